//go:build cudaemu && !cuda

package cuda

import (
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
