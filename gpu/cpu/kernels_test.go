package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// withGo runs f with the Go loops instead of the kernels of kernels.c.
func withGo(f func()) {
	saved := useKernels
	useKernels = false
	defer func() { useKernels = saved }()
	f()
}

func needKernels(t *testing.T) {
	t.Helper()
	if !haveAVX2 {
		t.Skip("no AVX2+FMA on this CPU: the Go loops run and are the only path")
	}
	if !useKernels {
		t.Fatal("AVX2+FMA present but the kernels are off")
	}
}

// closeTo reports whether got is within rel (relative to max(|want|, floor))
// of want; NaNs must match NaNs and infinities must be equal.
func closeTo(got, want float32, rel, floor float64) bool {
	g, w := float64(got), float64(want)
	if math.IsNaN(w) || math.IsNaN(g) {
		return math.IsNaN(w) && math.IsNaN(g)
	}
	if math.IsInf(w, 0) || math.IsInf(g, 0) {
		return g == w
	}
	return math.Abs(g-w) <= rel*math.Max(math.Abs(w), floor)
}

func compare(t *testing.T, what string, got, want []float32, rel, floor float64) {
	t.Helper()
	for i := range want {
		if !closeTo(got[i], want[i], rel, floor) {
			t.Fatalf("%s[%d] = %v, want %v (Go loop)", what, i, got[i], want[i])
		}
	}
}

// special are inputs at and beyond the edges of expf's range.
var special = []float32{0, -0, 1, -1, 88.72283, 88.72284, 89, -87.33654, -87.33655, -88, -100, 100, 1e-30, -1e-30,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0.34657359, -0.34657359, 0.5, 20, -20}

// TestExpKernel: the vectorised exp against float64 math.Exp over a sweep of
// [-87, 88] and the special values, lengths that exercise the masked tail.
func TestExpKernel(t *testing.T) {
	needKernels(t)
	var x []float32
	for v := -87.3; v <= 88.7; v += 0.01 {
		x = append(x, float32(v))
	}
	x = append(x, special...)
	for _, n := range []int{len(x), 1, 7, 9} {
		out := make([]float32, n+1)
		out[n] = 42 // past the end: must stay
		expC(out[:n], x[:n])
		if out[n] != 42 {
			t.Fatalf("n=%d: wrote past the end", n)
		}
		for i, xi := range x[:n] {
			want := float32(math.Exp(float64(xi)))
			if xi < -87.33654 { // no subnormals, like expf
				want = 0
			}
			if !closeTo(out[i], want, 3e-7, 0) {
				t.Fatalf("exp(%v) = %v, want %v", xi, out[i], want)
			}
			if g := expf(xi); !closeTo(out[i], g, 3e-7, 0) {
				t.Fatalf("exp(%v) = %v, Go expf %v", xi, out[i], g)
			}
		}
	}
}

func TestSwiGLUKernel(t *testing.T) {
	needKernels(t)
	r := rand.New(rand.NewPCG(7, 1))
	for _, n := range []int{0, 1, 5, 8, 9, 15, 16, 17, len(special), 1000, 1 << 16} {
		gate, up, dout := randSlice(r, n, 12), randSlice(r, n, 2), randSlice(r, n, 1)
		if n == len(special) {
			copy(gate, special)
		}
		out, dg, du := make([]float32, n), make([]float32, n), make([]float32, n)
		wout, wdg, wdu := make([]float32, n), make([]float32, n), make([]float32, n)
		be.SwiGLUForward(out, gate, up, n)
		be.SwiGLUBackward(dg, du, dout, gate, up, n)
		withGo(func() {
			be.SwiGLUForward(wout, gate, up, n)
			be.SwiGLUBackward(wdg, wdu, dout, gate, up, n)
		})
		// (1 + g(1-s)) cancels near g = -1.28: errors relative to the operands' scale
		compare(t, "out", out, wout, 1e-6, 1e-3)
		for i := range wdg { // relative to the operands' scale |dout*up|*(1+|g|)
			scale := math.Abs(float64(dout[i]*up[i])) * (1 + math.Abs(float64(gate[i])))
			if !closeTo(dg[i], wdg[i], 1e-6, scale) {
				t.Fatalf("dgate[%d] = %v, want %v (Go loop; gate %v)", i, dg[i], wdg[i], gate[i])
			}
		}
		compare(t, "dup", du, wdu, 1e-6, 1e-3)
	}
}

func TestSoftmaxCausalKernel(t *testing.T) {
	needKernels(t)
	r := rand.New(rand.NewPCG(7, 2))
	for _, T := range []int{1, 2, 7, 8, 9, 16, 17, 37, 256} {
		for _, W := range []int{0, 1, 5, 16, 300} {
			const NH = 3
			p := randSlice(r, NH*T*T, 20)
			p[T*T-1] = 80 // a large score
			want := slices.Clone(p)
			p2 := slices.Clone(p)
			softmaxCausalC(p, T, 0, NH*T, W)
			lse, wantLse := make([]float32, NH*T), make([]float32, NH*T)
			for row := 0; row < NH*T; row++ {
				wantLse[row] = softmaxCausal(want[row*T:(row+1)*T], row%T, W)
			}
			compare(t, "p", p, want, 2e-6, 1e-30)
			softmaxCausalLseC(p2, lse, T, 0, NH*T, W)
			compare(t, "p (lse)", p2, want, 2e-6, 1e-30)
			compare(t, "lse", lse, wantLse, 1e-6, 1)
			// a sub-range of rows leaves the others alone
			q := randSlice(r, NH*T*T, 5)
			orig := slices.Clone(q)
			softmaxCausalC(q, T, 1, NH*T-1, W)
			if !slices.Equal(q[:T], orig[:T]) || !slices.Equal(q[(NH*T-1)*T:], orig[(NH*T-1)*T:]) {
				t.Fatalf("T=%d W=%d: rows outside [lo, hi) changed", T, W)
			}
		}
	}
}

func TestLogprobKernel(t *testing.T) {
	needKernels(t)
	r := rand.New(rand.NewPCG(7, 3))
	for _, V := range []int{1, 2, 7, 8, 9, 13, 16, 17, 49, 1000, 49152} {
		const N = 5
		logits := randSlice(r, N*V, 15)
		targets := make([]int32, N)
		for n := range targets {
			targets[n] = int32(r.IntN(V))
		}
		targets[2] = -1
		if V > 3 {
			logits[V+1] = -200 // an exp that underflows to 0
		}
		dlogp, dent := randSlice(r, N, 1), randSlice(r, N, 1)
		logp, ent, lse := make([]float32, N), make([]float32, N), make([]float32, N)
		wlogp, went, wlse := make([]float32, N), make([]float32, N), make([]float32, N)
		be.LogprobForward(logp, ent, lse, logits, targets, N, V)
		withGo(func() { be.LogprobForward(wlogp, went, wlse, logits, targets, N, V) })
		compare(t, "lse", lse, wlse, 1e-6, 1)
		compare(t, "logp", logp, wlogp, 1e-6, 1)
		compare(t, "entropy", ent, went, 1e-5, 1)
		dl, wdl := make([]float32, N*V), slices.Clone(logits) // the Go loop runs in place (aliasing allowed)
		be.LogprobBackward(dl, logits, lse, ent, targets, dlogp, dent, N, V)
		withGo(func() { be.LogprobBackward(wdl, wdl, lse, ent, targets, dlogp, dent, N, V) })
		compare(t, "dlogits", dl, wdl, 1e-5, 1e-3)
	}
}

// TestAdamWKernel: the vectorised AdamW is the Go loop's arithmetic, so the
// results must be bit-identical.
func TestAdamWKernel(t *testing.T) {
	needKernels(t)
	r := rand.New(rand.NewPCG(7, 4))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 1000, 1 << 16} {
		p, m, v := randSlice(r, n, 1), randSlice(r, n, 0.1), randSlice(r, n, 0.01)
		for i := range v {
			v[i] = v[i] * v[i]
		}
		wp, wm, wv := slices.Clone(p), slices.Clone(m), slices.Clone(v)
		for step := 1; step <= 3; step++ {
			g := randSlice(r, n, 1)
			be.AdamW(p, g, m, v, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
			withGo(func() { be.AdamW(wp, g, wm, wv, step, 1e-3, 0.9, 0.999, 1e-8, 0.01) })
		}
		if !slices.Equal(p, wp) || !slices.Equal(m, wm) || !slices.Equal(v, wv) {
			t.Fatalf("n=%d: AdamW differs from the Go loop", n)
		}
	}
}

// TestSumSquaresScaleKernel: sum of squares against float64 and the Go loop,
// scale bit-identical to the Go loop, on lengths around the blocks and lanes.
func TestSumSquaresScaleKernel(t *testing.T) {
	needKernels(t)
	r := rand.New(rand.NewPCG(7, 5))
	for _, n := range []int{0, 1, 7, 8, 9, 2047, 2048, 2049, 1<<16 + 5, 3<<20 + 1} {
		x := randSlice(r, n, 3)
		var want float64
		for _, v := range x {
			want += float64(v) * float64(v)
		}
		got := be.SumSquares(x)
		var goLoop float64
		withGo(func() { goLoop = be.SumSquares(x) })
		if math.Abs(got-want) > 1e-6*want || math.Abs(goLoop-want) > 1e-6*want {
			t.Fatalf("n=%d: SumSquares %v, Go loop %v, want %v", n, got, goLoop, want)
		}
		y := slices.Clone(x)
		be.Scale(x, 0.37)
		withGo(func() { be.Scale(y, 0.37) })
		if !slices.Equal(x, y) {
			t.Fatalf("n=%d: Scale differs from the Go loop", n)
		}
	}
}

// TestRMSNormKernel: forward and the input gradient against the Go loop
// (float32 sums in another order), the weight gradient bit-identical.
func TestRMSNormKernel(t *testing.T) {
	needKernels(t)
	r := rand.New(rand.NewPCG(7, 6))
	for _, sh := range [][2]int{{1, 1}, {3, 7}, {5, 8}, {4, 9}, {7, 17}, {64, 576}, {3, 1000}} {
		N, C := sh[0], sh[1]
		inp, w, dout := randSlice(r, N*C, 2), randSlice(r, C, 1), randSlice(r, N*C, 1)
		out, rstd := make([]float32, N*C), make([]float32, N)
		wout, wrstd := make([]float32, N*C), make([]float32, N)
		be.RMSNormForward(out, rstd, inp, w, N, C, 1e-5)
		withGo(func() { be.RMSNormForward(wout, wrstd, inp, w, N, C, 1e-5) })
		compare(t, "out", out, wout, 2e-6, 1e-3)
		compare(t, "rstd", rstd, wrstd, 2e-6, 0)
		dw0 := randSlice(r, C, 1) // accumulated into
		dinp, dw := make([]float32, N*C), slices.Clone(dw0)
		wdinp, wdw := make([]float32, N*C), slices.Clone(dw0)
		be.RMSNormBackward(dinp, dw, dout, inp, w, wrstd, N, C)
		withGo(func() { be.RMSNormBackward(wdinp, wdw, dout, inp, w, wrstd, N, C) })
		compare(t, "dinp", dinp, wdinp, 1e-5, 1e-2)
		if !slices.Equal(dw, wdw) {
			t.Fatalf("%dx%d: dweight differs from the Go loop", N, C)
		}
	}
}

// TestAttentionCachedKernel compares the C cached attention with the Go loop
// on SmolLM2's head layout (9 query heads over 3 kv heads, 64 wide) and an
// odd one, tokens at assorted positions of shuffled slots.
func TestAttentionCachedKernel(t *testing.T) {
	needKernels(t)
	r := rand.New(rand.NewPCG(11, 12))
	for i, sh := range []struct{ NH, NKV, HD int }{{9, 3, 64}, {4, 4, 8}, {14, 2, 16}, {8, 1, 24}, {12, 2, 128}, {16, 2, 48}, {5, 5, 32}} {
		const S, maxT = 5, 70
		// a full cache, then rolling ones (positions past the rows wrap around)
		rows, window, maxPos := maxT, 0, maxT
		switch i % 3 {
		case 1:
			rows, window, maxPos = 20, 20, 3*maxT
		case 2:
			rows, window, maxPos = 24, 17, 3*maxT
		}
		KD := sh.NKV * sh.HD
		kc, vc := randSlice(r, S*rows*KD, 3), randSlice(r, S*rows*KD, 3)
		var slot, pos []int32
		for n := 0; n < 23; n++ {
			slot, pos = append(slot, int32(r.IntN(S))), append(pos, int32(r.IntN(maxPos)))
		}
		pos[0], pos[1] = 0, int32(maxPos-1)
		N := len(slot)
		q := randSlice(r, N*sh.NH*sh.HD, 2)
		want := make([]float32, N*sh.NH*sh.HD)
		withGo(func() { be.AttentionCachedForward(want, q, kc, vc, slot, pos, N, sh.NH, sh.NKV, sh.HD, rows, window) })
		for _, avx512 := range []bool{false, true} {
			if avx512 && !useAVX512Attention {
				t.Log("no AVX-512 on this CPU: the AVX2 kernel only")
				continue
			}
			saved := useAVX512Attention
			useAVX512Attention = avx512
			got := make([]float32, len(want))
			be.AttentionCachedForward(got, q, kc, vc, slot, pos, N, sh.NH, sh.NKV, sh.HD, rows, window)
			useAVX512Attention = saved
			for i := range want {
				if !closeTo(got[i], want[i], 1e-5, 1) {
					t.Fatalf("%+v avx512 %v: out[%d] = %v, Go loop %v", sh, avx512, i, got[i], want[i])
				}
			}
		}
	}
}

// TestExpShift compares the kernel with the Go loop and with float64 exp.
func TestExpShift(t *testing.T) {
	needKernels(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 7, 8, 9, 255, 256, 257, 1000, 49152} {
		x := randSlice(r, n, 8)
		m := slices.Max(x)
		got, want := make([]float32, n), make([]float32, n)
		sg := ExpShift(got, x, m, 1/0.7)
		var sw float64
		withGo(func() { sw = ExpShift(want, x, m, 1/0.7) })
		var exact float64
		for i := range x {
			e := math.Exp(float64(x[i]-m) / 0.7)
			exact += e
			// vs float64: the float32 argument (x-m)*s is rounded (|arg| <= ~40: 3e-6 relative)
			if !closeTo(got[i], want[i], 1e-6, 1e-30) || !closeTo(got[i], float32(e), 1e-5, 1e-30) {
				t.Fatalf("n=%d: out[%d] = %v, Go %v, float64 %v", n, i, got[i], want[i], e)
			}
		}
		if math.Abs(sg-sw) > 1e-6*sw || math.Abs(sg-exact) > 1e-6*exact {
			t.Fatalf("n=%d: sum %v, Go %v, float64 %v", n, sg, sw, exact)
		}
	}
}

// TestSwiGLUBackwardH: the fused op gives SwiGLUBackward's dgate and dup and
// SwiGLUForward's out as h, bit for bit, on the kernels and on the Go loops
// (each against the separate ops of the same path), tails and the special
// values included.
func TestSwiGLUBackwardH(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	paths := map[string]func(func()){"go": withGo}
	if haveAVX2 {
		paths["kernels"] = func(f func()) { f() }
	}
	for name, run := range paths {
		for _, n := range []int{0, 1, 5, 8, 9, 15, 16, 17, len(special), 1000, 1 << 16} {
			gate, up, dout := randSlice(r, n, 12), randSlice(r, n, 2), randSlice(r, n, 1)
			if n == len(special) {
				copy(gate, special)
				copy(up[:n/2], special[n/2:])
			}
			h, dg, du := randSlice(r, n, 9), randSlice(r, n, 9), randSlice(r, n, 9) // garbage: overwritten
			wh, wdg, wdu := make([]float32, n), make([]float32, n), make([]float32, n)
			run(func() {
				be.SwiGLUBackwardH(dg, du, h, dout, gate, up, n)
				be.SwiGLUForward(wh, gate, up, n)
				be.SwiGLUBackward(wdg, wdu, dout, gate, up, n)
			})
			for _, c := range []struct {
				what      string
				got, want []float32
			}{{"h", h, wh}, {"dgate", dg, wdg}, {"dup", du, wdu}} {
				for i := range c.want {
					if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
						t.Fatalf("%s, n=%d: %s[%d] = %v, the separate ops %v (gate %v, up %v)", name, n, c.what, i, c.got[i], c.want[i],
							gate[i], up[i])
					}
				}
			}
		}
	}
}
