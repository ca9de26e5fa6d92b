package cuda

import (
	"testing"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
)

// TestSampleParamsLayout: SampleTokens uploads []gpu.SampleParams as they
// are, so their layout must be kernels/sample.cuh's sample_params (float,
// int, float, 4 bytes of padding, double).
func TestSampleParamsLayout(t *testing.T) {
	var p gpu.SampleParams
	got := [5]uintptr{unsafe.Sizeof(p), unsafe.Offsetof(p.Temperature), unsafe.Offsetof(p.TopK), unsafe.Offsetof(p.TopP), unsafe.Offsetof(p.U)}
	if want := [5]uintptr{24, 0, 4, 8, 16}; got != want {
		t.Fatalf("gpu.SampleParams size and offsets %v, want %v (sample_params in kernels/sample.cuh)", got, want)
	}
}
