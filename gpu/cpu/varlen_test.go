package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu"
)

// varlenCase is a packed batch: the sequence lengths (a 0 among them) and
// the heads.
var varlenCases = []struct {
	name                string
	lengths             []int
	NH, NKV, HD, window int
}{
	{"GQA", []int{5, 1, 0, 13, 8}, 4, 2, 8, 0},
	{"MHA one sequence", []int{9}, 2, 2, 4, 0},
	{"MQA", []int{3, 7, 2}, 3, 1, 16, 0},
	{"GQA window 4", []int{5, 1, 0, 13, 8}, 4, 2, 8, 4},
	{"MQA window 2", []int{3, 7, 2}, 3, 1, 16, 2},
}

// TestAttentionVarlenMatchesPerSequence: the packed ops give, on every
// sequence, what AttentionForward / AttentionBackward give on that sequence
// alone, and lse is the float64 log-sum-exp of each row's scaled scores.
func TestAttentionVarlenMatchesPerSequence(t *testing.T) {
	defer func(b int) { attnBlock = b }(attnBlock)
	for _, blk := range []int{attnBlock, 3} {
		for _, kernels := range []bool{true, false} {
			if kernels && !useKernels {
				continue
			}
			for _, tc := range varlenCases {
				t.Run(fmt.Sprintf("%s block %d kernels %v", tc.name, blk, kernels), func(t *testing.T) {
					attnBlock = blk
					run := func(f func()) {
						if kernels {
							f()
						} else {
							withGo(f)
						}
					}
					testVarlenPerSequence(t, run, tc.lengths, tc.NH, tc.NKV, tc.HD, tc.window)
				})
			}
		}
	}
}

func testVarlenPerSequence(t *testing.T, run func(func()), lengths []int, NH, NKV, HD, window int) {
	r := rand.New(rand.NewPCG(3, 11))
	cu, maxT := gpu.CuSeqlens(lengths)
	S, N := len(lengths), int(cu[len(lengths)])
	qs, ks := NH*HD, NKV*HD
	q, k, v := randSlice(r, N*qs, 1), randSlice(r, N*ks, 1), randSlice(r, N*ks, 1)
	dout := randSlice(r, N*qs, 1)
	out, lse := randSlice(r, N*qs, 9), randSlice(r, N*NH, 9) // garbage: must be overwritten
	dq, dk, dv := randSlice(r, N*qs, 9), randSlice(r, N*ks, 9), randSlice(r, N*ks, 9)
	run(func() {
		be.AttentionVarlenForward(out, lse, q, k, v, cu, S, N, maxT, NH, NKV, HD, window)
		be.AttentionVarlenBackward(dq, dk, dv, dout, out, lse, q, k, v, cu, S, N, maxT, NH, NKV, HD, window)
	})
	for s, T := range lengths {
		if T == 0 {
			continue
		}
		o := int(cu[s])
		sq, sk, sv := q[o*qs:(o+T)*qs], k[o*ks:(o+T)*ks], v[o*ks:(o+T)*ks]
		wout := make([]float32, T*qs)
		wdq, wdk, wdv := make([]float32, T*qs), make([]float32, T*ks), make([]float32, T*ks)
		scratch := make([]float32, 2*NH*T*T)
		run(func() {
			be.AttentionForward(wout, scratch, sq, sk, sv, 1, T, NH, NKV, HD, window)
			be.AttentionBackward(wdq, wdk, wdv, scratch, dout[o*qs:(o+T)*qs], sq, sk, sv, 1, T, NH, NKV, HD, window)
		})
		name := fmt.Sprintf("sequence %d ", s)
		compare(t, name+"out", out[o*qs:(o+T)*qs], wout, 1e-6, 1e-3)
		compare(t, name+"dq", dq[o*qs:(o+T)*qs], wdq, 1e-6, 1e-3)
		compare(t, name+"dk", dk[o*ks:(o+T)*ks], wdk, 1e-6, 1e-3)
		compare(t, name+"dv", dv[o*ks:(o+T)*ks], wdv, 1e-6, 1e-3)
		// lse in float64
		scale := 1 / math.Sqrt(float64(HD))
		for tq := 0; tq < T; tq++ {
			for h := 0; h < NH; h++ {
				kh := h / (NH / NKV)
				m, sum := math.Inf(-1), 0.0
				j0 := 0
				if window > 0 {
					j0 = max(0, tq-window+1)
				}
				sc := make([]float64, tq+1-j0)
				for jj := range sc {
					j := j0 + jj
					_ = j
					for d := 0; d < HD; d++ {
						sc[jj] += float64(sq[(tq*NH+h)*HD+d]) * float64(sk[(j*NKV+kh)*HD+d])
					}
					sc[jj] *= scale
					m = math.Max(m, sc[jj])
				}
				for _, x := range sc {
					sum += math.Exp(x - m)
				}
				want := m + math.Log(sum)
				if got := float64(lse[(o+tq)*NH+h]); math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
					t.Fatalf("%slse[t %d, h %d] = %v, want %v", name, tq, h, got, want)
				}
			}
		}
	}
}

// TestAttentionVarlenMatchesPadded: a packed batch gives, on each sequence's
// rows, what the padded ops give on the same sequences padded to the longest
// (the padding at the end, its output gradient 0).
func TestAttentionVarlenMatchesPadded(t *testing.T) {
	for _, window := range []int{0, 3} {
		t.Run(fmt.Sprintf("window %d", window), func(t *testing.T) { testVarlenMatchesPadded(t, window) })
	}
}

func testVarlenMatchesPadded(t *testing.T, window int) {
	r := rand.New(rand.NewPCG(4, 12))
	lengths := []int{6, 11, 1, 4}
	const NH, NKV, HD = 4, 2, 8
	qs, ks := NH*HD, NKV*HD
	cu, T := gpu.CuSeqlens(lengths)
	B, N := len(lengths), int(cu[len(lengths)])
	q, k, v, dout := randSlice(r, N*qs, 1), randSlice(r, N*ks, 1), randSlice(r, N*ks, 1), randSlice(r, N*qs, 1)
	out, lse := make([]float32, N*qs), make([]float32, N*NH)
	dq, dk, dv := make([]float32, N*qs), make([]float32, N*ks), make([]float32, N*ks)
	be.AttentionVarlenForward(out, lse, q, k, v, cu, B, N, T, NH, NKV, HD, window)
	be.AttentionVarlenBackward(dq, dk, dv, dout, out, lse, q, k, v, cu, B, N, T, NH, NKV, HD, window)

	// the same sequences padded to T: random padding, zero output gradient on it
	pad := func(x []float32, w int, fill bool) []float32 {
		p := make([]float32, B*T*w)
		for b, L := range lengths {
			if fill {
				copy(p[b*T*w:(b+1)*T*w], randSlice(r, T*w, 1))
			}
			copy(p[b*T*w:], x[int(cu[b])*w:(int(cu[b])+L)*w])
		}
		return p
	}
	pq, pk, pv, pdout := pad(q, qs, true), pad(k, ks, true), pad(v, ks, true), pad(dout, qs, false)
	pout := make([]float32, B*T*qs)
	pdq, pdk, pdv := make([]float32, B*T*qs), make([]float32, B*T*ks), make([]float32, B*T*ks)
	scratch := make([]float32, 2*NH*T*T)
	be.AttentionForward(pout, scratch, pq, pk, pv, B, T, NH, NKV, HD, window)
	be.AttentionBackward(pdq, pdk, pdv, scratch, pdout, pq, pk, pv, B, T, NH, NKV, HD, window)
	for b, L := range lengths {
		o := int(cu[b])
		name := fmt.Sprintf("sequence %d ", b)
		compare(t, name+"out", out[o*qs:(o+L)*qs], pout[b*T*qs:(b*T+L)*qs], 1e-5, 1e-2)
		compare(t, name+"dq", dq[o*qs:(o+L)*qs], pdq[b*T*qs:(b*T+L)*qs], 1e-5, 1e-2)
		compare(t, name+"dk", dk[o*ks:(o+L)*ks], pdk[b*T*ks:(b*T+L)*ks], 1e-5, 1e-2)
		compare(t, name+"dv", dv[o*ks:(o+L)*ks], pdv[b*T*ks:(b*T+L)*ks], 1e-5, 1e-2)
	}
}

// TestAttentionVarlenRejectsBadSeqlens: cuSeqlens that do not cover the
// batch panic with the reason.
func TestAttentionVarlenRejectsBadSeqlens(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "cuSeqlens[2] is 7, want N 8") {
			t.Fatalf("panic %v", r)
		}
	}()
	x := make([]float32, 8*4)
	be.AttentionVarlenForward(x, make([]float32, 8), x, x, x, []int32{0, 3, 7}, 2, 8, 4, 1, 1, 4, 0)
}
