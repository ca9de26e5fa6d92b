// Package gguf reads GGUF model files, the format of llama.cpp and Ollama (versions 2 and 3).
//
// A file is a header (magic "GGUF", version, tensor count, metadata count), typed metadata
// key/value pairs, tensor infos (name, dimensions innermost first, ggml type, offset), and an
// aligned data section. [Open] maps the file into memory and parses everything but the tensor
// data; [Parse] does the same on a byte slice. Metadata is read through typed accessors
// ([File.String], [File.Uint], [File.Strings], ...) that accept any integer width, and a tensor is
// dequantised to fp32 with [File.Float32s] (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
//
// Parsing is bounded by the size of the file: a hostile count or length yields an error naming the
// file and the key or tensor, never a panic or an allocation larger than the file warrants.
//
// Shapes: GGUF lists dimensions innermost first; [TensorInfo.Shape] returns them outermost first,
// the PyTorch order, so a GGUF tensor with Dims [576, 1536] has Shape [1536, 576].
package gguf
