// Package model implements the decoder families of weights.Families (Llama 2
// and 3.x, Qwen2, Qwen3, Mistral, Gemma 3 text; docs/models.md) on a
// gpu.Backend, as options of one model (Config): the training forward
// (per-token log-probs and entropy of a padded or packed batch) and its
// backward, AdamW with gradient-norm clipping, and generation with a KV
// cache over a batch of sequences of different lengths (rolling caches for
// sliding-window layers).
//
// Weights come in as a weights.Checkpoint (Hugging Face names and shapes, fp32)
// and live in one flat fp32 tensor of the backend, so the optimizer and the
// gradient norm run over a single slice; every tensor is a view into it.
// Parameters, gradients, AdamW moments, activations and the KV cache are all
// allocated through the backend (gpu.Memory) and stay there: on a GPU only
// token ids, positions, targets and loss weights go up, and log-probs,
// entropies, values, logits for sampling and the gradient norm come down.
//
// Shape letters follow gpu.Backend: B batch, T time, N = B*T tokens,
// C hidden size, F intermediate size, V vocabulary, NH query heads,
// NKV key/value heads, HD head dimension, L layers.
package model
