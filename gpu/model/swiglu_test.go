package model

import (
	"path/filepath"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
)

// swigluCounted is gpu/cpu counting the SwiGLU ops.
type swigluCounted struct {
	gpu.Backend
	fwd, bwd, bwdH int
}

func (c *swigluCounted) SwiGLUForward(out, gate, up []float32, n int) {
	c.fwd++
	c.Backend.SwiGLUForward(out, gate, up, n)
}

func (c *swigluCounted) SwiGLUBackward(dgate, dup, dout, gate, up []float32, n int) {
	c.bwd++
	c.Backend.SwiGLUBackward(dgate, dup, dout, gate, up, n)
}

func (c *swigluCounted) SwiGLUBackwardH(dgate, dup, h, dout, gate, up []float32, n int) {
	c.bwdH++
	c.Backend.SwiGLUBackwardH(dgate, dup, h, dout, gate, up, n)
}

// TestSwiGLUBackwardOps: the training step's MLP backward takes the down
// product's input gradient, then dgate, dup and h in one pass
// (SwiGLUBackwardH), never SwiGLUForward again nor SwiGLUBackward: one
// pass over gate and up a layer fewer than recomputing h first (the
// gradients themselves are checked against transformers' goldens).
func TestSwiGLUBackwardOps(t *testing.T) {
	for _, name := range families {
		t.Run(name, func(t *testing.T) {
			ck := loadCheckpoint(t, filepath.Join("testdata", name))
			batch, dlogp, dent := goldenLoss(loadGolden(t, name))
			be := &swigluCounted{Backend: cpu.New()}
			m, err := New(be, ck)
			if err != nil {
				t.Fatal(err)
			}
			a := m.NewActs(batch.B, batch.T)
			if err := m.Forward(a, batch); err != nil {
				t.Fatal(err)
			}
			m.ZeroGrads()
			if err := m.Backward(a, dlogp, dent); err != nil {
				t.Fatal(err)
			}
			L := m.Config.L
			if got, want := [3]int{be.fwd, be.bwd, be.bwdH}, [3]int{L, 0, L}; got != want {
				t.Errorf("SwiGLUForward, SwiGLUBackward, SwiGLUBackwardH ran %v times, want %v", got, want)
			}
		})
	}
}
