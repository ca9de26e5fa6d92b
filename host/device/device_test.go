package device

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/cuda"
)

// TestSetPrecisionCPU: on the CPU backend the dtype changes nothing and
// prints nothing (the CPU computes in float32), whatever it says.
func TestSetPrecisionCPU(t *testing.T) {
	var out bytes.Buffer
	for _, d := range []string{"bfloat16", "tf32", "float32", "nonsense"} {
		if err := SetPrecision(cpu.New(), "actor_rollout_ref.actor.dtype", d, &out); err != nil {
			t.Errorf("dtype=%s on the CPU: %v", d, err)
		}
	}
	if out.Len() != 0 {
		t.Errorf("SetPrecision on the CPU printed %q", out.String())
	}
}

// TestOpen: cpu is gpu/cpu whatever the dtype; an unknown device is an error
// naming trainer.device; cuda in a build without the tag is cuda.ErrNotBuilt.
func TestOpen(t *testing.T) {
	var out bytes.Buffer
	be, err := Open("cpu", "k", "nonsense", &out)
	if _, isCPU := be.(cpu.Backend); err != nil || !isCPU || out.Len() != 0 {
		t.Errorf("Open(cpu) = %v, %v; printed %q", be, err, out.String())
	}
	if _, err := Open("tpu", "k", "bfloat16", &out); err == nil || !strings.Contains(err.Error(), "trainer.device") {
		t.Errorf("Open(tpu): %v", err)
	}
	if !cuda.Built {
		if _, err := Open("cuda", "k", "bfloat16", &out); !errors.Is(err, cuda.ErrNotBuilt) || !strings.Contains(err.Error(), "trainer.device=cuda") {
			t.Errorf("Open(cuda) without the tag: %v", err)
		}
	}
}
