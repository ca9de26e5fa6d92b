package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
)

// swigluCounted is gpu/cpu counting the SwiGLU ops, asking for the former
// MLP backward when recompute is set (gpu.SwiGLURecompute, as the CUDA
// backend does with its swiglu_recompute variant).
type swigluCounted struct {
	gpu.Backend
	recompute      bool
	fwd, bwd, bwdH int
}

func (c *swigluCounted) SwiGLURecompute() bool { return c.recompute }

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

// TestSwiGLUBackwardSequences: the training step's MLP backward with
// SwiGLUBackwardH (the down product's input gradient, then dgate, dup and
// h in one pass, then the gradients that read h) gives the gradients of
// the former sequence (h recomputed by SwiGLUForward, then SwiGLUBackward)
// bit for bit: every base gradient of a full step, and with LoRA adapters
// on every linear layer (the down projection's too, random A and B) every
// adapter gradient, on both tiny families; each sequence runs the ops it
// should, one pass over gate and up a layer fewer.
func TestSwiGLUBackwardSequences(t *testing.T) {
	for _, name := range families {
		for _, lora := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s lora=%v", name, lora), func(t *testing.T) {
				ck := loadCheckpoint(t, filepath.Join("testdata", name))
				g := loadGolden(t, name)
				batch, dlogp, dent := goldenLoss(g)
				var grads [2][]float32
				for i, recompute := range []bool{false, true} {
					be := &swigluCounted{Backend: cpu.New(), recompute: recompute}
					m, err := New(be, ck)
					if err != nil {
						t.Fatal(err)
					}
					if lora {
						if err := m.EnableLoRA(LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}, Seed: 5}); err != nil {
							t.Fatal(err)
						}
						rng := rand.New(rand.NewPCG(1, 2))
						for j := range m.LoRA().Data {
							m.LoRA().Data[j] = float32(rng.NormFloat64() * 0.1)
						}
						if m.adapter(0, modDown) == nil {
							t.Fatal("no adapter on the down projection")
						}
					}
					a := m.NewActs(batch.B, batch.T)
					if err := m.Forward(a, batch); err != nil {
						t.Fatal(err)
					}
					m.ZeroGrads()
					if err := m.Backward(a, dlogp, dent); err != nil {
						t.Fatal(err)
					}
					if lora {
						grads[i] = m.LoRA().Grad
					} else {
						grads[i] = m.Grads.Data
					}
					L := m.Config.L
					want := [3]int{L, 0, L} // forward, backward, backward with h
					if recompute {
						want = [3]int{2 * L, L, 0}
					}
					if got := [3]int{be.fwd, be.bwd, be.bwdH}; got != want {
						t.Errorf("recompute=%v: SwiGLUForward, SwiGLUBackward, SwiGLUBackwardH ran %v times, want %v", recompute, got, want)
					}
				}
				nonzero := 0
				for j, w := range grads[1] {
					if math.Float32bits(grads[0][j]) != math.Float32bits(w) {
						t.Fatalf("gradient [%d] = %v with SwiGLUBackwardH, %v with h recomputed", j, grads[0][j], w)
					}
					if w != 0 {
						nonzero++
					}
				}
				if nonzero < len(grads[1])/2 {
					t.Fatalf("only %d of %d gradients are not 0", nonzero, len(grads[1]))
				}
			})
		}
	}
}
