package cuda

import "fmt"

// Precision is how the matrix products of MatmulForward and MatmulBackward
// compute (SetPrecision). The other ops, the gradients, the master weights
// and the AdamW moments are fp32 in every mode; so are log-softmax, the loss
// and every reduction.
type Precision int

const (
	// FP32: cublasSgemm, fp32 operands and products (CUDA cores).
	FP32 Precision = iota
	// TF32: cublasGemmEx on the fp32 tensors with CUBLAS_COMPUTE_32F_FAST_TF32:
	// tensor cores multiply the operands rounded to a 10-bit mantissa and
	// accumulate in fp32.
	TF32
	// BF16: cublasGemmEx with bfloat16 operands (CUDA_R_16BF, rounded to
	// nearest even by the f32_to_bf16 kernel), fp32 accumulation
	// (CUBLAS_COMPUTE_32F) and an fp32 output, as llm.c's mixed precision:
	// the weights through resident bf16 copies (AdamW writes them beside
	// the parameters; other writes, e.g. an upload, leave them to be
	// converted again), the activations through one shared copy (written
	// by the norms and SwiGLU, or converted by the first product that reads
	// them), the output gradients from copies their producers write
	// (dlogits, dres, dgate, dup, dq, dk) or rounded on the device for the
	// product.
	BF16
)

// String gives the spelling of actor_rollout_ref.actor.dtype.
func (p Precision) String() string {
	switch p {
	case FP32:
		return "float32"
	case TF32:
		return "tf32"
	case BF16:
		return "bfloat16"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// Path says how the products of the precision run, for logs and the proof
// script.
func (p Precision) Path() string {
	switch p {
	case FP32:
		return "float32: cublasSgemm (fp32 operands and products)"
	case TF32:
		return "tf32: cublasGemmEx, fp32 operands, CUBLAS_COMPUTE_32F_FAST_TF32 (TF32 tensor cores, fp32 accumulation)"
	case BF16:
		return "bfloat16: cublasGemmEx, CUDA_R_16BF operands (weights from resident bf16 copies, activations rounded " +
			"to nearest even on the device), CUBLAS_COMPUTE_32F (fp32 accumulation), fp32 output"
	}
	return p.String()
}

// ParsePrecision reads actor_rollout_ref.actor.dtype: float32 (fp32),
// tf32, bfloat16 (bf16).
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "float32", "fp32":
		return FP32, nil
	case "tf32", "tfloat32":
		return TF32, nil
	case "bfloat16", "bf16":
		return BF16, nil
	}
	return 0, fmt.Errorf("cuda: unknown product precision %q (float32, tf32 or bfloat16)", s)
}

// SetPrecision selects how MatmulForward and MatmulBackward compute from
// now on (FP32 when the backend opens). Sgemm, SgemmStridedBatched and
// GemmEx keep their own types.
func (b *Backend) SetPrecision(p Precision) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	b.d.prec = p
}

// Precision reports the precision of the products.
func (b *Backend) Precision() Precision {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	return b.d.prec
}
