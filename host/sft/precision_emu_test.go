//go:build cudaemu && !cuda

package sft

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/host/device"
)

// TestParamDtypeCUDA: on the CUDA backend (its emulator here) the loaded
// model.fsdp_config.mixed_precision.param_dtype sets the products' precision,
// bfloat16 when not given, and the path is printed, as openBackend does after
// cuda.New.
func TestParamDtypeCUDA(t *testing.T) {
	be := cuda.OpenEmulator()
	defer be.Close()
	for _, tc := range []struct {
		override []string
		want     cuda.Precision
		path     string
	}{
		{[]string{ParamDtypeKey + "=float32"}, cuda.FP32, "cublasSgemm"},
		{nil, cuda.BF16, "CUDA_R_16BF operands"},
		{[]string{ParamDtypeKey + "=tf32"}, cuda.TF32, "CUBLAS_COMPUTE_32F_FAST_TF32"},
		{[]string{ParamDtypeKey + "=fp32"}, cuda.FP32, "cublasSgemm"},
		{[]string{"model.fsdp_config.mixed_precision=null"}, cuda.BF16, "CUDA_R_16BF operands"},
	} {
		c, err := Load(nil, tc.override)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := device.SetPrecision(be, ParamDtypeKey, c.Model.FSDPConfig.MixedPrecision.ParamDtype, &out); err != nil {
			t.Fatal(err)
		}
		if got := be.Precision(); got != tc.want || !strings.Contains(out.String(), tc.path) {
			t.Errorf("%v: precision %v, printed %q", tc.override, got, out.String())
		}
	}
}
