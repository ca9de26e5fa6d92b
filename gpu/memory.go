package gpu

import "fmt"

// Memory is how a backend owns tensors, in karpathy/llm.c's manner: the
// model allocates its parameters, gradients, optimizer moments, activations
// and KV cache once, through the backend, and passes those tensors (or
// views of them: sub-slices) to the ops; only inputs computed on the host
// go up and only results the host needs come down.
//
// A tensor is a []float32 or []int32 that the backend returned. On the CPU
// it is an ordinary slice. On a GPU its address is device memory: the host
// must not read or write it except through Upload, Download, Zero and Copy
// (doing so faults). An op given a slice the backend did not allocate (host
// memory) stages it through the device for that op; that is correct but
// costs a transfer, and the CUDA backend counts it.
//
// Alloc panics with a *MemoryError when the device cannot hold the tensor;
// model constructors that return errors turn it into their error
// (RecoverMemory).
type Memory interface {
	// Alloc returns n zeroed floats owned by the backend; name says what
	// the tensor is (for errors, e.g. "activations: layer 3 gate").
	Alloc(name string, n int) []float32
	// AllocInt32 is Alloc for int32 (token ids, positions, targets).
	AllocInt32(name string, n int) []int32
	// Free returns a tensor from Alloc or AllocInt32 (the whole slice, not
	// a view) to the backend. Using it afterwards is an error.
	Free(x any)
	// Upload copies host src into the tensor dst (len(src) <= len(dst)).
	Upload(dst, src []float32)
	// UploadInt32 is Upload for int32.
	UploadInt32(dst, src []int32)
	// Download copies the tensor src into host dst (len(dst) <= len(src)),
	// after every op queued before it has finished.
	Download(dst, src []float32)
	// Zero sets every element of the tensor x to 0.
	Zero(x []float32)
	// Copy copies the tensor src into the tensor dst (same length), on
	// the device.
	Copy(dst, src []float32)
}

// MemoryError is the panic value of Memory.Alloc when the device is out of
// memory: it names the tensor, its size, what the device has free, and
// the settings that make a run need less.
type MemoryError struct {
	Device      string // e.g. "cuda/NVIDIA H100 80GB HBM3/sm_90"
	Tensor      string
	Bytes       int64
	Free, Total int64 // device memory free and in all, in bytes
	Err         error // the driver's error
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("gpu: out of memory on %s: tensor %s needs %s; %s of %s free "+
		"(%v); reduce actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, "+
		"critic.ppo_micro_batch_size_per_gpu, data.max_response_length or "+
		"actor_rollout_ref.rollout.max_num_seqs, or train LoRA adapters (actor_rollout_ref.model.lora_rank)",
		e.Device, e.Tensor, MiB(e.Bytes), MiB(e.Free), MiB(e.Total), e.Err)
}

func (e *MemoryError) Unwrap() error { return e.Err }

// MiB formats a byte count in MiB.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// RecoverMemory turns a *MemoryError panic into *err; use it as
// `defer gpu.RecoverMemory(&err)` in a function that allocates tensors and
// returns an error. Other panics continue.
func RecoverMemory(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(*MemoryError); ok {
			*err = e
			return
		}
		panic(r)
	}
}
