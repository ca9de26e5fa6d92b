// Package gpu defines the compute op set of a Llama/Qwen2 training step and
// generation, independent of the device that runs it.
//
// Backend (ops.go) lists every op forward and backward, in the style of
// llm.c: one explicit xxxForward / xxxBackward per op, outputs first in the
// argument list, shapes named in the comments. Tensors are row-major
// []float32 (and []int32) slices that the backend owns (Memory, memory.go):
// allocated once through Alloc, as llm.c's train_gpt2.cu allocates its
// parameters, gradients, moments and activations up front. On the CPU they
// are ordinary slices; on a GPU their addresses are device memory and the
// host reaches them only through Upload and Download. A host slice passed
// to an op is still accepted (staged through the device for that op).
//
// Conventions shared by every backend:
//
//   - Forward ops overwrite their outputs.
//   - Backward ops overwrite the gradients of their activation inputs
//     (dinp, dq, ...) and ACCUMULATE (+=) into parameter gradients
//     (dweight, dbias, dwte), so tied weights and repeated use just add up.
//     Zero the parameter gradients before a backward pass. The exception
//     is ResidualRMSNormBackward, which adds its input gradient into the
//     residual stream's (dres), as its name says.
//   - Linear weights are [OC, C] as Hugging Face stores them: out = inp W^T + b.
//
// The reference backend is gpu/cpu (Go + OpenBLAS sgemm); the models using
// the op set are in gpu/model.
package gpu
