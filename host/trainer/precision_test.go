package trainer

import (
	"bytes"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
)

// TestSetPrecisionCPU: on the CPU backend actor.dtype changes nothing and
// prints nothing (the CPU computes in float32).
func TestSetPrecisionCPU(t *testing.T) {
	var out bytes.Buffer
	for _, d := range []string{"bfloat16", "tf32", "float32", "nonsense"} {
		if err := setPrecision(cpu.New(), d, &out); err != nil {
			t.Errorf("actor.dtype=%s on the CPU: %v", d, err)
		}
	}
	if out.Len() != 0 {
		t.Errorf("setPrecision on the CPU printed %q", out.String())
	}
}
