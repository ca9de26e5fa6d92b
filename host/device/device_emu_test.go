//go:build cudaemu && !cuda

package device

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
)

// TestSetPrecisionCUDA: on the CUDA backend (its emulator here) the dtype
// sets the products' precision and the path is printed; an unknown value is
// an error naming the key.
func TestSetPrecisionCUDA(t *testing.T) {
	be := cuda.OpenEmulator()
	defer be.Close()
	const key = "actor_rollout_ref.actor.dtype"
	for _, tc := range []struct {
		dtype string
		want  cuda.Precision
		path  string
	}{
		{"tf32", cuda.TF32, "CUBLAS_COMPUTE_32F_FAST_TF32"},
		{"bfloat16", cuda.BF16, "cublasGemmEx, CUDA_R_16BF operands"},
		{"float32", cuda.FP32, "cublasSgemm"},
		{"bf16", cuda.BF16, "CUDA_R_16BF"},
		{"fp32", cuda.FP32, "cublasSgemm"},
	} {
		var out bytes.Buffer
		if err := SetPrecision(be, key, tc.dtype, &out); err != nil {
			t.Fatal(err)
		}
		if got := be.Precision(); got != tc.want || !strings.Contains(out.String(), tc.path) {
			t.Errorf("dtype=%s: precision %v, printed %q", tc.dtype, got, out.String())
		}
	}
	if err := SetPrecision(be, key, "fp8", &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), key) {
		t.Errorf("dtype=fp8: %v", err)
	}
}
