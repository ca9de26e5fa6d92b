//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/cuda/internal/round"
)

// TestSwiGLUBackwardHCopies: in BF16, swiglu_backward_h writes the
// bfloat16 copies of dgate and dup (the gradient copies) and of h (the
// activation copy) beside them, each the rounding to nearest even of what
// it wrote (round.BF16) bit for bit, and the op leaves the three valid for
// those tensors; in FP32 it writes none.
func TestSwiGLUBackwardHCopies(t *testing.T) {
	be := openEmulator(t)
	r := rand.New(rand.NewPCG(40, 40))
	const n = 3001
	dg, du, h := be.Alloc("dgate", n), be.Alloc("dup", n), be.Alloc("h", n)
	for _, p := range []Precision{FP32, BF16} {
		be.SetPrecision(p)
		be.SwiGLUBackwardH(dg, du, h, checkutil.Randn(r, n, 1), checkutil.Randn(r, n, 8), checkutil.Randn(r, n, 1), n)
		d := be.d
		for _, c := range []struct {
			what string
			out  []float32
			copy *actCopy
		}{{"dgate", dg, &d.grad[0]}, {"dup", du, &d.grad[1]}, {"h", h, &d.act}} {
			src, tensor := d.mem.find(unsafe.Pointer(&c.out[0]), 4*n)
			if tensor == nil {
				t.Fatalf("%s is not a tensor of the device", c.what)
			}
			if p == FP32 {
				if c.copy.valid && c.copy.src == src {
					t.Errorf("fp32: a valid bfloat16 copy of %s", c.what)
				}
				continue
			}
			if !c.copy.valid || c.copy.src != src || c.copy.n != n {
				t.Fatalf("bf16: the copy of %s is not the valid copy of its %d floats (valid %v, %d floats)", c.what, n, c.copy.valid, c.copy.n)
			}
			bits := make([]uint16, n)
			var err error
			d.run("read the copy", func(*arena) { err = d.dtoh(unsafe.Pointer(&bits[0]), c.copy.p, 2*n) }) // device memory: within an op
			if err != nil {
				t.Fatal(err)
			}
			vals := checkutil.Host(be, c.out)
			for i, v := range vals {
				if want := round.BF16(v); bits[i] != want {
					t.Fatalf("bf16: copy of %s[%d] = %#04x, %v rounds to %#04x", c.what, i, bits[i], v, want)
				}
			}
		}
	}
	be.SetPrecision(FP32)
}

// TestSwiGLURecomputeSameValues: the training step gives the same
// log-probabilities, gradients and updated parameters with the default MLP
// backward (swiglu_backward_h) as with the swiglu_recompute variant
// (swiglu_forward again, then swiglu_backward), bit for bit, in FP32, TF32
// and BF16 (the bfloat16 copies: the down product's weight gradient
// converts the residual stream's gradient again where the variant reused
// its norm's copy, the same rounding), full and with LoRA adapters on
// every linear layer (the down projection's included), over two steps
// (the second reads the updated weights). The profile of the second step
// says which kernels each ran: per layer swiglu_forward once and
// swiglu_backward_h once, or swiglu_forward twice and swiglu_backward once.
func TestSwiGLURecomputeSameValues(t *testing.T) {
	for _, p := range []Precision{FP32, TF32, BF16} {
		for _, lora := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v lora=%v", p, lora), func(t *testing.T) {
				if err := SwigluSequencesDiffer(t, p, lora); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// SwigluSequencesDiffer runs two training steps of 2 layers in precision
// p with each MLP backward (TestSwiGLURecomputeSameValues) and returns the
// first value that differs, or an output that is mostly 0.
func SwigluSequencesDiffer(t *testing.T, p Precision, lora bool) error {
	const L = 2
	var runs [2][][]float32
	for i, recompute := range []bool{false, true} {
		be := openEmulator(t)
		be.SetPrecision(p)
		be.SetVariants(Variants{SwiGLURecompute: recompute})
		s := newStep(t, be, L, false, lora)
		s.Run(t)
		if err := be.EnableProfile(); err != nil {
			t.Fatal(err)
		}
		s.Run(t)
		prof, err := be.Profile()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"swiglu_forward": L, "swiglu_backward_h": L, "swiglu_backward": 0}
		if recompute {
			want = map[string]int64{"swiglu_forward": 2 * L, "swiglu_backward_h": 0, "swiglu_backward": L}
		}
		for k, calls := range want {
			if e, _ := profileEntry(prof, k); e.Calls != calls {
				t.Errorf("recompute=%v: %d calls of %s, want %d", recompute, e.Calls, k, calls)
			}
		}
		out := [][]float32{checkutil.Clone(s.a.Logp), checkutil.Clone(s.a.Entropy)}
		if lora {
			out = append(out, checkutil.Host(be, s.M.LoRA().Data), checkutil.Host(be, s.M.LoRA().Grad))
		} else {
			out = append(out, checkutil.Host(be, s.M.Params.Data), checkutil.Host(be, s.M.Grads.Data))
		}
		runs[i] = out
	}
	for k, what := range []string{"log-probs", "entropies", "trained tensors", "gradients"} {
		got, want := runs[0][k], runs[1][k]
		nonzero := 0
		for j := range want {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				return fmt.Errorf("%s[%d] = %v with swiglu_backward_h, %v with swiglu_recompute", what, j, got[j], want[j])
			}
			if want[j] != 0 {
				nonzero++
			}
		}
		if nonzero < len(want)/2 {
			return fmt.Errorf("%s: only %d of %d are not 0", what, nonzero, len(want))
		}
	}
	return nil
}
