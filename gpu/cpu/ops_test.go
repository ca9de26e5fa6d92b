package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlhost/rlhost/gpu"
)

var be gpu.Backend = New()

// gradCheck compares analytic gradients with central finite differences of
// L = sum_i r_i * out_i (accumulated in float64), for every input in ins.
// fwd recomputes the output from the current values of ins; bwd returns the
// gradients of L with respect to ins given dout = r. Up to maxProbe elements
// of each input are probed.
func gradCheck(t *testing.T, names []string, ins [][]float32, fwd func() []float32,
	bwd func(dout []float32) [][]float32, eps float32, tol float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 7))
	out := fwd()
	dout := randSlice(r, len(out), 1)
	grads := bwd(dout)
	loss := func() float64 {
		o := fwd()
		var s float64
		for i := range o {
			s += float64(o[i]) * float64(dout[i])
		}
		return s
	}
	const maxProbe = 60
	for k, x := range ins {
		g := grads[k]
		if len(g) != len(x) {
			t.Fatalf("%s: gradient has %d elements, input %d", names[k], len(g), len(x))
		}
		idx := r.Perm(len(x))
		if len(idx) > maxProbe {
			idx = idx[:maxProbe]
		}
		var num, den, gnorm float64
		for _, i := range idx {
			old := x[i]
			x[i] = old + eps
			lp := loss()
			x[i] = old - eps
			lm := loss()
			x[i] = old
			fd := (lp - lm) / (2 * float64(eps))
			d := fd - float64(g[i])
			num += d * d
			den += fd * fd
			gnorm += float64(g[i]) * float64(g[i])
		}
		rel := math.Sqrt(num) / math.Max(math.Sqrt(den), 1e-12)
		if den == 0 && gnorm == 0 {
			rel = 0
		}
		if rel > tol {
			t.Errorf("%s: finite-difference relative error %.3g > %.3g (|fd| %.3g, |grad| %.3g)",
				names[k], rel, tol, math.Sqrt(den), math.Sqrt(gnorm))
		} else {
			t.Logf("%s: finite-difference relative error %.2g", names[k], rel)
		}
	}
}

func TestEmbeddingGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	const N, C, V = 9, 5, 4
	wte := randSlice(r, V*C, 1)
	tokens := []int32{0, 3, 3, 1, 0, 2, 3, 3, 1}
	out := make([]float32, N*C)
	fwd := func() []float32 { be.EmbeddingForward(out, tokens, wte, N, C); return out }
	fwd()
	for n, tok := range tokens { // forward is a plain gather
		for c := 0; c < C; c++ {
			if out[n*C+c] != wte[int(tok)*C+c] {
				t.Fatalf("out[%d,%d] != wte[%d,%d]", n, c, tok, c)
			}
		}
	}
	gradCheck(t, []string{"wte"}, [][]float32{wte}, fwd, func(dout []float32) [][]float32 {
		dwte := make([]float32, V*C)
		be.EmbeddingBackward(dwte, dout, tokens, N, C)
		return [][]float32{dwte}
	}, 1e-2, 1e-4)
}

func TestRMSNormGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const N, C = 6, 16
	const eps = 1e-5
	inp := randSlice(r, N*C, 2)
	w := randSlice(r, C, 1)
	out, rstd := make([]float32, N*C), make([]float32, N)
	fwd := func() []float32 { be.RMSNormForward(out, rstd, inp, w, N, C, eps); return out }
	fwd()
	for n := 0; n < N; n++ { // float64 reference forward
		var ss float64
		for c := 0; c < C; c++ {
			ss += float64(inp[n*C+c]) * float64(inp[n*C+c])
		}
		rs := 1 / math.Sqrt(ss/C+eps)
		for c := 0; c < C; c++ {
			want := float64(inp[n*C+c]) * rs * float64(w[c])
			if math.Abs(float64(out[n*C+c])-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("out[%d,%d] = %v, want %v", n, c, out[n*C+c], want)
			}
		}
	}
	gradCheck(t, []string{"inp", "weight"}, [][]float32{inp, w}, fwd, func(dout []float32) [][]float32 {
		fwd()
		dinp, dw := make([]float32, N*C), make([]float32, C)
		be.RMSNormBackward(dinp, dw, dout, inp, w, rstd, N, C)
		return [][]float32{dinp, dw}
	}, 1e-2, 2e-3)
}

func TestMatmulGrad(t *testing.T) {
	for _, withBias := range []bool{false, true} {
		r := rand.New(rand.NewPCG(1, 3))
		const N, C, OC = 7, 11, 5
		inp := randSlice(r, N*C, 1)
		w := randSlice(r, OC*C, 1)
		var bias []float32
		names := []string{"inp", "weight"}
		ins := [][]float32{inp, w}
		if withBias {
			bias = randSlice(r, OC, 1)
			names = append(names, "bias")
			ins = append(ins, bias)
		}
		out := make([]float32, N*OC)
		fwd := func() []float32 { be.MatmulForward(out, inp, w, bias, N, C, OC); return out }
		fwd()
		for n := 0; n < N; n++ {
			for o := 0; o < OC; o++ {
				var s float64
				if bias != nil {
					s = float64(bias[o])
				}
				for c := 0; c < C; c++ {
					s += float64(inp[n*C+c]) * float64(w[o*C+c])
				}
				if math.Abs(float64(out[n*OC+o])-s) > 1e-5*(1+math.Abs(s)) {
					t.Fatalf("bias=%v out[%d,%d] = %v, want %v", withBias, n, o, out[n*OC+o], s)
				}
			}
		}
		gradCheck(t, names, ins, fwd, func(dout []float32) [][]float32 {
			dinp, dw := make([]float32, N*C), make([]float32, OC*C)
			var db []float32
			if withBias {
				db = make([]float32, OC)
			}
			be.MatmulBackward(dinp, dw, db, dout, inp, w, N, C, OC, false)
			if withBias {
				return [][]float32{dinp, dw, db}
			}
			return [][]float32{dinp, dw}
		}, 1e-2, 1e-3)
	}
}

// TestMatmulBackwardAccumulate: with accumulate, dinp gets the product
// added to what it held (sgemm's beta 1), the same values as the product
// into a zeroed tensor added afterwards; without it dinp is overwritten
// whatever it held (a NaN included). Sizes on both sides of OpenBLAS's
// blocking of the summed dimension (OC up to 700).
func TestMatmulBackwardAccumulate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 7))
	for _, sz := range [][3]int{{7, 11, 5}, {64, 96, 700}} {
		N, C, OC := sz[0], sz[1], sz[2]
		dout, w := randSlice(r, N*OC, 1), randSlice(r, OC*C, 1)
		prior := randSlice(r, N*C, 1)
		prod := make([]float32, N*C)
		be.MatmulBackward(prod, nil, nil, dout, nil, w, N, C, OC, false)
		got := slices.Clone(prior)
		be.MatmulBackward(got, nil, nil, dout, nil, w, N, C, OC, true)
		for i := range got {
			want := prior[i] + prod[i]
			if d := math.Abs(float64(got[i] - want)); d > 1e-5*(1+math.Abs(float64(want))) {
				t.Fatalf("N=%d C=%d OC=%d: accumulated dinp[%d] = %v, want %v + %v = %v", N, C, OC, i, got[i], prior[i], prod[i], want)
			}
		}
		over := slices.Clone(prior)
		over[0] = float32(math.NaN())
		be.MatmulBackward(over, nil, nil, dout, nil, w, N, C, OC, false)
		if !slices.Equal(over, prod) {
			t.Fatalf("N=%d C=%d OC=%d: dinp without accumulate is not the product alone", N, C, OC)
		}
	}
}

// ropeTables builds cos/sin [P, HD/2] for base theta, as transformers does.
func ropeTables(P, HD int, theta float64) (cos, sin []float32) {
	half := HD / 2
	cos, sin = make([]float32, P*half), make([]float32, P*half)
	for p := 0; p < P; p++ {
		for i := 0; i < half; i++ {
			a := float64(p) / math.Pow(theta, float64(2*i)/float64(HD))
			cos[p*half+i], sin[p*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return cos, sin
}

func TestRopeGrad(t *testing.T) {
	for _, layout := range []gpu.RopeLayout{gpu.RopeHalf, gpu.RopePairs} {
		t.Run(layout.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 4))
			const N, H, HD, P = 5, 3, 8, 40
			cos, sin := ropeTables(P, HD, 10000)
			pos := []int32{0, 1, 7, 39, 12}
			inp := randSlice(r, N*H*HD, 1)
			out := make([]float32, N*H*HD)
			fwd := func() []float32 { be.RopeForward(out, inp, pos, cos, sin, N, H, HD, layout); return out }
			fwd()
			// Reference: the pair (a, b) as the complex number a+ib, times e^{i angle}.
			for n := 0; n < N; n++ {
				for h := 0; h < H; h++ {
					for i := 0; i < HD/2; i++ {
						ia, ib := i, i+HD/2
						if layout == gpu.RopePairs {
							ia, ib = 2*i, 2*i+1
						}
						base := (n*H + h) * HD
						ang := float64(pos[n]) / math.Pow(10000, float64(2*i)/HD)
						z := complex(float64(inp[base+ia]), float64(inp[base+ib])) * complex(math.Cos(ang), math.Sin(ang))
						if math.Abs(real(z)-float64(out[base+ia])) > 1e-5 || math.Abs(imag(z)-float64(out[base+ib])) > 1e-5 {
							t.Fatalf("token %d head %d pair %d: got (%v,%v), want %v", n, h, i, out[base+ia], out[base+ib], z)
						}
					}
				}
			}
			gradCheck(t, []string{"inp"}, [][]float32{inp}, fwd, func(dout []float32) [][]float32 {
				dinp := make([]float32, N*H*HD)
				be.RopeBackward(dinp, dout, pos, cos, sin, N, H, HD, layout)
				return [][]float32{dinp}
			}, 1e-2, 1e-3)
			// in place
			x := append([]float32(nil), inp...)
			be.RopeForward(x, x, pos, cos, sin, N, H, HD, layout)
			be.RopeBackward(x, x, pos, cos, sin, N, H, HD, layout)
			for i := range x {
				if math.Abs(float64(x[i]-inp[i])) > 1e-5 {
					t.Fatalf("in-place rotate and back: x[%d] = %v, want %v", i, x[i], inp[i])
				}
			}
		})
	}
}

// naiveAttention is the float64 reference of AttentionForward.
// naiveAttention is causal attention in float64; window > 0 limits each
// query to the keys at positions t-window+1 .. t.
func naiveAttention(q, k, v []float32, B, T, NH, NKV, HD, window int) []float64 {
	out := make([]float64, B*T*NH*HD)
	scale := 1 / math.Sqrt(float64(HD))
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			kh := h / (NH / NKV)
			for t := 0; t < T; t++ {
				j0 := 0
				if window > 0 {
					j0 = max(0, t-window+1)
				}
				s := make([]float64, t+1)
				m := math.Inf(-1)
				for j := j0; j <= t; j++ {
					for d := 0; d < HD; d++ {
						s[j] += float64(q[((b*T+t)*NH+h)*HD+d]) * float64(k[((b*T+j)*NKV+kh)*HD+d])
					}
					s[j] *= scale
					m = math.Max(m, s[j])
				}
				var sum float64
				for j := j0; j <= t; j++ {
					s[j] = math.Exp(s[j] - m)
					sum += s[j]
				}
				for j := j0; j <= t; j++ {
					for d := 0; d < HD; d++ {
						out[((b*T+t)*NH+h)*HD+d] += s[j] / sum * float64(v[((b*T+j)*NKV+kh)*HD+d])
					}
				}
			}
		}
	}
	return out
}

func TestAttentionGrad(t *testing.T) {
	tests := []struct {
		name                      string
		B, T, NH, NKV, HD, window int
	}{
		{"MHA", 2, 5, 2, 2, 4, 0},
		{"GQA", 2, 6, 4, 2, 8, 0},
		{"MQA T=1", 3, 1, 3, 1, 4, 0},
		{"GQA window 3", 2, 7, 4, 2, 8, 3},
		{"MHA window 1", 1, 5, 2, 2, 4, 1},
		{"GQA window longer than T", 2, 6, 4, 2, 8, 9},
	}
	defer func(b int) { attnBlock = b }(attnBlock)
	for _, blk := range []int{attnBlock, 2, 3} { // one block, and many with a partial last one
		attnBlock = blk
		for _, tt := range tests {
			testAttentionGrad(t, fmt.Sprintf("%s block %d", tt.name, blk), tt.B, tt.T, tt.NH, tt.NKV, tt.HD, tt.window)
		}
	}
}

func testAttentionGrad(t *testing.T, name string, B, T, NH, NKV, HD, window int) {
	t.Run(name, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 5))
		q := randSlice(r, B*T*NH*HD, 1)
		k := randSlice(r, B*T*NKV*HD, 1)
		v := randSlice(r, B*T*NKV*HD, 1)
		out := make([]float32, B*T*NH*HD)
		scratch := randSlice(r, 2*NH*T*T, 9) // garbage: must not matter
		fwd := func() []float32 { be.AttentionForward(out, scratch, q, k, v, B, T, NH, NKV, HD, window); return out }
		fwd()
		want := naiveAttention(q, k, v, B, T, NH, NKV, HD, window)
		for i := range want {
			if math.Abs(float64(out[i])-want[i]) > 1e-5 {
				t.Fatalf("out[%d] = %v, want %v", i, out[i], want[i])
			}
		}
		gradCheck(t, []string{"q", "k", "v"}, [][]float32{q, k, v}, fwd, func(dout []float32) [][]float32 {
			dq := make([]float32, len(q))
			dk, dv := randSlice(r, len(k), 9), randSlice(r, len(v), 9) // garbage: must be overwritten
			be.AttentionBackward(dq, dk, dv, randSlice(r, 2*NH*T*T, 9), dout, q, k, v, B, T, NH, NKV, HD, window)
			return [][]float32{dq, dk, dv}
		}, 1e-2, 2e-3)
	})
}

// TestAttentionWindowOffByOne: a window of W is not one of W+1 or W-1 (the
// planted off-by-one of the issue): the outputs differ.
func TestAttentionWindowOffByOne(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 17))
	const B, T, NH, NKV, HD, W = 1, 9, 2, 1, 8, 4
	q, k, v := randSlice(r, B*T*NH*HD, 1), randSlice(r, B*T*NKV*HD, 1), randSlice(r, B*T*NKV*HD, 1)
	run := func(w int) []float32 {
		out := make([]float32, B*T*NH*HD)
		be.AttentionForward(out, make([]float32, NH*T*T), q, k, v, B, T, NH, NKV, HD, w)
		return out
	}
	got := run(W)
	want := naiveAttention(q, k, v, B, T, NH, NKV, HD, W)
	for _, w := range []int{W - 1, W + 1} {
		other := naiveAttention(q, k, v, B, T, NH, NKV, HD, w)
		d := 0.0
		for i := range other {
			d = math.Max(d, math.Abs(other[i]-want[i]))
		}
		if d < 1e-3 {
			t.Fatalf("window %d and %d give the same attention: the test cannot tell them apart", W, w)
		}
	}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-5 {
			t.Fatalf("out[%d] = %v, want %v (window %d)", i, got[i], want[i], W)
		}
	}
}

func TestSwiGLUGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 6))
	const n = 50
	gate, up := randSlice(r, n, 4), randSlice(r, n, 2)
	out := make([]float32, n)
	fwd := func() []float32 { be.SwiGLUForward(out, gate, up, n); return out }
	fwd()
	for i := range out {
		g := float64(gate[i])
		want := g / (1 + math.Exp(-g)) * float64(up[i])
		if math.Abs(float64(out[i])-want) > 1e-5*(1+math.Abs(want)) {
			t.Fatalf("out[%d] = %v, want %v", i, out[i], want)
		}
	}
	gradCheck(t, []string{"gate", "up"}, [][]float32{gate, up}, fwd, func(dout []float32) [][]float32 {
		dg, du := make([]float32, n), make([]float32, n)
		be.SwiGLUBackward(dg, du, dout, gate, up, n)
		return [][]float32{dg, du}
	}, 1e-2, 1e-3)
}

// TestGeGLUGrad: GeGLU against PyTorch's tanh-approximated GELU in float64,
// its gradient by finite differences, and h of the backward bit for bit the
// forward's out.
func TestGeGLUGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 16))
	const n = 50
	gate, up := randSlice(r, n, 4), randSlice(r, n, 2)
	gate[0], gate[1] = 0, -12 // gelu(0) = 0, and the far negative tail
	out := make([]float32, n)
	fwd := func() []float32 { be.GeGLUForward(out, gate, up, n); return out }
	fwd()
	for i := range out {
		g := float64(gate[i])
		want := 0.5 * g * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(g+0.044715*g*g*g))) * float64(up[i])
		if math.Abs(float64(out[i])-want) > 1e-6*(1+math.Abs(want)) {
			t.Fatalf("out[%d] = %v, want %v", i, out[i], want)
		}
	}
	h := make([]float32, n)
	gradCheck(t, []string{"gate", "up"}, [][]float32{gate, up}, fwd, func(dout []float32) [][]float32 {
		dg, du := make([]float32, n), make([]float32, n)
		be.GeGLUBackwardH(dg, du, h, dout, gate, up, n)
		return [][]float32{dg, du}
	}, 1e-2, 1e-3)
	fwd()
	if !slices.Equal(h, out) {
		t.Fatal("GeGLUBackwardH's h differs from GeGLUForward's out")
	}
}

// TestSoftcapGrad: the soft-cap against float64 and its gradient by finite
// differences.
func TestSoftcapGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 18))
	const n, cp = 40, 3
	x := randSlice(r, n, 8)
	out := make([]float32, n)
	fwd := func() []float32 { copy(out, x); be.SoftcapForward(out, cp, n); return out }
	fwd()
	for i := range out {
		if want := cp * math.Tanh(float64(x[i])/cp); math.Abs(float64(out[i])-want) > 1e-6 {
			t.Fatalf("out[%d] = %v, want %v", i, out[i], want)
		}
	}
	gradCheck(t, []string{"x"}, [][]float32{x}, fwd, func(dout []float32) [][]float32 {
		dx := slices.Clone(dout)
		be.SoftcapBackward(dx, fwd(), cp, n)
		return [][]float32{dx}
	}, 1e-2, 1e-3)
}

func TestResidualGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 7))
	const n = 20
	a, b := randSlice(r, n, 1), randSlice(r, n, 1)
	out := make([]float32, n)
	fwd := func() []float32 { be.ResidualForward(out, a, b, n); return out }
	gradCheck(t, []string{"a", "b"}, [][]float32{a, b}, fwd, func(dout []float32) [][]float32 {
		da, db := make([]float32, n), make([]float32, n)
		be.ResidualBackward(da, db, dout, n)
		return [][]float32{da, db}
	}, 1e-2, 1e-4)
}

func TestLogprobGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 8))
	const N, V = 6, 13
	logits := randSlice(r, N*V, 3)
	targets := []int32{3, 0, 12, -1, 7, 7}
	logp, ent, lse := make([]float32, N), make([]float32, N), make([]float32, N)
	fwd := func() []float32 {
		be.LogprobForward(logp, ent, lse, logits, targets, N, V)
		return append(append([]float32(nil), logp...), ent...)
	}
	fwd()
	for n := 0; n < N; n++ { // float64 reference
		var m, se float64 = math.Inf(-1), 0
		for j := 0; j < V; j++ {
			m = math.Max(m, float64(logits[n*V+j]))
		}
		for j := 0; j < V; j++ {
			se += math.Exp(float64(logits[n*V+j]) - m)
		}
		l := m + math.Log(se)
		var h float64
		for j := 0; j < V; j++ {
			lp := float64(logits[n*V+j]) - l
			h -= math.Exp(lp) * lp
		}
		wantLogp := 0.0
		if targets[n] >= 0 {
			wantLogp = float64(logits[n*V+int(targets[n])]) - l
		}
		if math.Abs(float64(logp[n])-wantLogp) > 1e-5 || math.Abs(float64(ent[n])-h) > 1e-5 {
			t.Fatalf("row %d: logp %v entropy %v, want %v %v", n, logp[n], ent[n], wantLogp, h)
		}
	}
	gradCheck(t, []string{"logits"}, [][]float32{logits}, fwd, func(dout []float32) [][]float32 {
		fwd()
		dl := make([]float32, N*V)
		be.LogprobBackward(dl, logits, lse, ent, targets, dout[:N], dout[N:], N, V)
		return [][]float32{dl}
	}, 1e-2, 2e-3)
}

// TestAdamW checks two steps against a float64 transcription of
// torch.optim.AdamW, and that a finite-difference-free optimizer step moves
// against the gradient.
func TestAdamW(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 9))
	const n = 33
	const lr, b1, b2, eps, wd = 1e-2, 0.9, 0.95, 1e-8, 0.1
	p := randSlice(r, n, 1)
	m, v := make([]float32, n), make([]float32, n)
	p64 := make([]float64, n)
	m64, v64 := make([]float64, n), make([]float64, n)
	for i := range p {
		p64[i] = float64(p[i])
	}
	for step := 1; step <= 3; step++ {
		g := randSlice(r, n, 1)
		be.AdamW(p, g, m, v, step, lr, b1, b2, eps, wd)
		for i := range p64 {
			gi := float64(g[i])
			p64[i] *= 1 - lr*wd
			m64[i] = b1*m64[i] + (1-b1)*gi
			v64[i] = b2*v64[i] + (1-b2)*gi*gi
			mh := m64[i] / (1 - math.Pow(b1, float64(step)))
			vh := v64[i] / (1 - math.Pow(b2, float64(step)))
			p64[i] -= lr * mh / (math.Sqrt(vh) + eps)
			if math.Abs(float64(p[i])-p64[i]) > 1e-6 {
				t.Fatalf("step %d param %d = %v, want %v", step, i, p[i], p64[i])
			}
		}
	}
}

func TestClipGradNorm(t *testing.T) {
	g := []float32{3, 4, 0, 0}
	if n := gpu.ClipGradNorm(be, g, 10); n != 5 || g[0] != 3 {
		t.Fatalf("norm %v, g %v: clipping below the limit must not change the gradient", n, g)
	}
	n := gpu.ClipGradNorm(be, g, 1)
	if n != 5 {
		t.Fatalf("norm = %v, want 5", n)
	}
	if got := math.Sqrt(be.SumSquares(g)); math.Abs(got-1) > 1e-5 {
		t.Fatalf("norm after clipping = %v, want 1", got)
	}
	big := make([]float32, 1<<20+3)
	for i := range big {
		big[i] = 0.5
	}
	if got, want := be.SumSquares(big), 0.25*float64(len(big)); math.Abs(got-want) > 1e-6*want {
		t.Fatalf("SumSquares = %v, want %v", got, want)
	}
}

// TestAttentionCached: attention of every token of a batch through a KV cache
// equals the full causal attention, with sequences in arbitrary slots; with a
// sliding window, through a rolling cache of fewer rows than positions.
func TestAttentionCached(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	const B, T, NH, NKV, HD, S = 2, 7, 4, 2, 8, 3
	for _, tc := range []struct{ window, rows int }{{0, 10}, {3, 3}, {3, 5}, {5, 10}, {9, 7}} {
		q := randSlice(r, B*T*NH*HD, 1)
		k := randSlice(r, B*T*NKV*HD, 1)
		v := randSlice(r, B*T*NKV*HD, 1)
		want := make([]float32, B*T*NH*HD)
		be.AttentionForward(want, make([]float32, NH*T*T), q, k, v, B, T, NH, NKV, HD, tc.window)

		rows := tc.rows
		kc, vc := randSlice(r, S*rows*NKV*HD, 5), randSlice(r, S*rows*NKV*HD, 5) // stale garbage beyond pos
		slots := []int32{2, 0}                                                   // batch row b lives in slot slots[b]
		KD := NKV * HD
		// one token of each sequence a step, its key and value written first,
		// as generation does: a rolling cache keeps only the last rows positions
		got := make([]float32, B*T*NH*HD)
		for tt := 0; tt < T; tt++ {
			slot, pos := make([]int32, B), make([]int32, B)
			qs := make([]float32, B*NH*HD)
			for b := 0; b < B; b++ {
				n := b*T + tt
				slot[b], pos[b] = slots[b], int32(tt)
				row := int(slots[b])*rows + tt%rows
				copy(kc[row*KD:], k[n*KD:(n+1)*KD])
				copy(vc[row*KD:], v[n*KD:(n+1)*KD])
				copy(qs[b*NH*HD:], q[n*NH*HD:(n+1)*NH*HD])
			}
			o := make([]float32, B*NH*HD)
			be.AttentionCachedForward(o, qs, kc, vc, slot, pos, B, NH, NKV, HD, rows, tc.window)
			for b := 0; b < B; b++ {
				copy(got[(b*T+tt)*NH*HD:], o[b*NH*HD:(b+1)*NH*HD])
			}
		}
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-5 {
				t.Fatalf("window %d rows %d: out[%d] = %v, want %v", tc.window, rows, i, got[i], want[i])
			}
		}
	}
}
