package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestToBF16(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{0, 0},
		{1, 0x3f80},
		{-2, 0xc000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81}, // above the tie
		{float32(math.Inf(1)), 0x7f80},
		{math.MaxFloat32, 0x7f80}, // rounds to +inf, as torch does
	} {
		if got := ToBF16(tc.in); got != tc.want {
			t.Errorf("ToBF16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if nan := FromBF16(ToBF16(float32(math.NaN()))); !math.IsNaN(float64(nan)) {
		t.Errorf("ToBF16(NaN) widens to %g", nan)
	}
}

func TestParseDtype(t *testing.T) {
	for in, want := range map[string]Dtype{"float32": Float32, "fp32": Float32, "bfloat16": BFloat16, "bf16": BFloat16, "int8": Int8} {
		if got, err := ParseDtype(in); err != nil || got != want {
			t.Errorf("ParseDtype(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseDtype("float16"); err == nil {
		t.Error("ParseDtype(float16) gave no error")
	}
}

// TestQuantizeBound checks every element of the copies against the format's
// bound: bfloat16 relative error <= 2^-8, int8 absolute error <= scale/2 =
// absmax(block)/254.
func TestQuantizeBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 7, 77 // a partial last block
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(r.IntN(5)-3)))
	}
	w[5] = 0
	for i := 2 * cols; i < 3*cols; i++ { // an all-zero row: scale 0
		w[i] = 0
	}
	for _, dt := range []Dtype{BFloat16, Int8} {
		q, err := Quantize(dt, w, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		d := q.Dequantize()
		for i, x := range w {
			var bound float64
			if dt == BFloat16 {
				bound = math.Abs(float64(x)) / 256
			} else {
				r, c := i/cols, i%cols
				var amax float64
				for _, y := range w[r*cols+c/LowpBlock*LowpBlock : r*cols+min(c/LowpBlock*LowpBlock+LowpBlock, cols)] {
					amax = max(amax, math.Abs(float64(y)))
				}
				bound = amax / 254 * (1 + 1e-6)
			}
			if e := math.Abs(float64(d[i]) - float64(x)); e > bound {
				t.Fatalf("%v: element %d is %g after the round trip, want %g within %g", dt, i, d[i], x, bound)
			}
		}
	}
	if _, err := Quantize(Float32, w, rows, cols); err == nil {
		t.Error("Quantize(Float32) gave no error")
	}
	if _, err := Quantize(Int8, w, rows, cols+1); err == nil {
		t.Error("Quantize with a wrong shape gave no error")
	}
}

// TestQuantizeBF16C: the C bfloat16 rounding gives ToBF16's bits for every float32 class:
// ties to even both ways, carries into the exponent, infinities, NaNs (kept quiet),
// subnormals and signed zeros, and random values of every magnitude.
func TestQuantizeBF16C(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	special := []uint32{0, 0x80000000, 0x00000001, 0x807fffff, 0x3f808000, 0x3f818000, 0x3f80ffff, 0x3f7fffff,
		0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffbfffff, 0x4effffff}
	const rows, cols = 3, 99
	w := make([]float32, rows*cols)
	for i := range w {
		if i < len(special) {
			w[i] = math.Float32frombits(special[i])
		} else {
			w[i] = math.Float32frombits(r.Uint32())
		}
	}
	c, _ := Quantize(BFloat16, w, rows, cols)
	g := &LowpMatrix{Dtype: BFloat16, Rows: rows, Cols: cols, BF: make([]uint16, len(c.BF)), goQuant: true}
	g.Requantize(w)
	for i := range w {
		if c.BF[i] != g.BF[i] || g.BF[i] != ToBF16(w[i]) {
			t.Fatalf("%#08x: C %#04x, Go %#04x", math.Float32bits(w[i]), c.BF[i], g.BF[i])
		}
	}
}

// TestQuantizeC: the C int8 quantiser gives the Go reference's bytes and scales.
func TestQuantizeC(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, cols := range []int{32, 77, 576, 5} {
		rows := 9
		w := randVec(r, rows*cols)
		for i := range w {
			w[i] *= float32(math.Pow(10, float64(r.IntN(7)-3)))
		}
		c, _ := Quantize(Int8, w, rows, cols)
		g := &LowpMatrix{Dtype: Int8, Rows: rows, Cols: cols, Q: make([]int8, len(c.Q)), Scale: make([]float32, len(c.Scale)), goQuant: true}
		g.Requantize(w)
		if !slices.Equal(c.Q, g.Q) || !slices.Equal(c.Scale, g.Scale) {
			t.Errorf("cols %d: C and Go int8 copies differ", cols)
		}
		for isa := ISAGeneric; isa <= BestLowpISA.tile(); isa++ {
			q, sc := make([]int8, len(g.Q)), make([]float32, len(g.Scale))
			quantQ8C(isa, w, q, sc, cols, 0, rows)
			if !slices.Equal(q, g.Q) || !slices.Equal(sc, g.Scale) {
				t.Errorf("cols %d: the %v quantiser and Go's int8 copies differ", cols, isa)
			}
		}
	}
}

// TestLowpMatmul compares every kernel this CPU runs, for both formats, with
// a float64 product of the dequantised weights (so only the fp32 arithmetic
// differs: bound 1e-5 relative to sum |x w|), and with the product of the
// original fp32 weights within the format's bound sum_k |x_k| |w_k - q_k|
// (the copy's own error, measured) plus the same arithmetic slack.
func TestLowpMatmul(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	shapes := []struct{ N, K, OC int }{
		{1, 576, 192}, {1, 64, 4}, {2, 48, 5}, {3, 33, 7}, {4, 96, 9}, {5, 1536, 13},
		{9, 40, 6}, {16, 576, 64}, {1, 17, 3}, {7, 7, 1}, {17, 34, 49}, {8, 576, 48}, {12, 31, 100},
	}
	for isa := ISAGeneric; isa <= BestLowpISA; isa++ {
		for _, dt := range []Dtype{BFloat16, Int8} {
			for _, sh := range shapes {
				for _, withBias := range []bool{false, true} {
					name := fmt.Sprintf("%v/%v/N%d-K%d-OC%d-bias%v", isa, dt, sh.N, sh.K, sh.OC, withBias)
					t.Run(name, func(t *testing.T) {
						N, K, OC := sh.N, sh.K, sh.OC
						x, w := randVec(r, N*K), randVec(r, OC*K)
						var bias []float32
						if withBias {
							bias = randVec(r, OC)
						}
						q, err := Quantize(dt, w, OC, K)
						if err != nil {
							t.Fatal(err)
						}
						dq := q.Dequantize()
						// the dot-product kernels round the activations as well: to
						// bfloat16, or to int8 blocks like the weights
						xr := x
						if UsesDot(isa, dt) {
							xr = roundActivations(dt, x, N, K)
						}
						out := randVec(r, N*OC) // overwritten
						LowpMatmulISA(isa, out, x, q, bias, N)
						for n := 0; n < N; n++ {
							for o := 0; o < OC; o++ {
								var ref, refW, mag, qerr float64
								for k := 0; k < K; k++ {
									xv, xq := float64(x[n*K+k]), float64(xr[n*K+k])
									ref += xq * float64(dq[o*K+k])
									refW += xv * float64(w[o*K+k])
									mag += math.Abs(xq * float64(dq[o*K+k]))
									qerr += math.Abs(xv)*math.Abs(float64(dq[o*K+k])-float64(w[o*K+k])) +
										math.Abs(xv-xq)*math.Abs(float64(dq[o*K+k]))
								}
								if bias != nil {
									ref += float64(bias[o])
									refW += float64(bias[o])
									mag += math.Abs(float64(bias[o]))
								}
								got := float64(out[n*OC+o])
								if d := math.Abs(got - ref); d > 1e-5*mag+1e-30 {
									t.Fatalf("out[%d,%d] = %g, float64 product of the copy %g (|diff| %g > %g)", n, o, got, ref, d, 1e-5*mag)
								}
								if d := math.Abs(got - refW); d > qerr+1e-5*mag {
									t.Fatalf("out[%d,%d] = %g, fp32 weights give %g (|diff| %g > format bound %g)", n, o, got, refW, d, qerr+1e-5*mag)
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestLowpMatmulKernelsAgree runs the same product on every kernel: the
// lane layout and summation order are the same, so they agree to within FMA
// rounding (1e-6 relative to sum |x w|).
func TestLowpMatmulKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const N, K, OC = 6, 200, 11
	x, w := randVec(r, N*K), randVec(r, OC*K)
	for _, dt := range []Dtype{BFloat16, Int8} {
		q, _ := Quantize(dt, w, OC, K)
		ref := make([]float32, N*OC)
		LowpMatmulISA(ISAGeneric, ref, x, q, nil, N)
		for isa := ISAGeneric + 1; isa <= BestLowpISA; isa++ {
			if UsesDot(isa, dt) {
				continue // other arithmetic (rounded activations): TestLowpMatmul checks it
			}
			out := make([]float32, N*OC)
			LowpMatmulISA(isa, out, x, q, nil, N)
			for i := range out {
				if d := math.Abs(float64(out[i] - ref[i])); d > 1e-4 {
					t.Errorf("%v %v: out[%d] = %g, generic kernel %g", isa, dt, i, out[i], ref[i])
				}
			}
		}
	}
	t.Logf("best kernel on this CPU: %v", BestLowpISA)
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// TestSmallMatmul checks the small-batch fp32 kernel (MatmulForward up to
// SmallMatmulMaxN rows) on every instruction set this CPU runs against a
// float64 product (1e-5 relative to sum |x w|), and that a row's result is
// bit for bit the same whatever the batch it is in and its place there (the
// lanes, tree and tail are the same for every tile), so sampling does not
// depend on batching.
func TestSmallMatmul(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	shapes := []struct{ N, K, OC int }{
		{1, 576, 192}, {1, 17, 3}, {2, 48, 5}, {3, 33, 7}, {4, 96, 9}, {5, 1536, 13},
		{7, 7, 1}, {16, 576, 64}, {17, 34, 49}, {32, 64, 30}, {12, 31, 100},
	}
	for isa := ISAGeneric; isa <= BestLowpISA; isa++ {
		for _, sh := range shapes {
			for _, withBias := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/N%d-K%d-OC%d-bias%v", isa, sh.N, sh.K, sh.OC, withBias), func(t *testing.T) {
					N, K, OC := sh.N, sh.K, sh.OC
					x, w := randVec(r, N*K), randVec(r, OC*K)
					var bias []float32
					if withBias {
						bias = randVec(r, OC)
					}
					out := randVec(r, N*OC) // overwritten
					smallMatmul(isa, out, x, w, bias, N, K, OC)
					for n := 0; n < N; n++ {
						for o := 0; o < OC; o++ {
							var ref, mag float64
							for k := 0; k < K; k++ {
								ref += float64(x[n*K+k]) * float64(w[o*K+k])
								mag += math.Abs(float64(x[n*K+k]) * float64(w[o*K+k]))
							}
							if bias != nil {
								ref += float64(bias[o])
								mag += math.Abs(float64(bias[o]))
							}
							if d := math.Abs(float64(out[n*OC+o]) - ref); d > 1e-5*mag+1e-30 {
								t.Fatalf("out[%d,%d] = %g, float64 product %g (|diff| %g > %g)", n, o, out[n*OC+o], ref, d, 1e-5*mag)
							}
						}
					}
					one := make([]float32, OC)
					for n := 0; n < N; n++ {
						smallMatmul(isa, one, x[n*K:(n+1)*K], w, bias, 1, K, OC)
						for o := range one {
							if math.Float32bits(one[o]) != math.Float32bits(out[n*OC+o]) {
								t.Fatalf("row %d alone gives out[%d] = %g, in the batch of %d %g", n, o, one[o], N, out[n*OC+o])
							}
						}
					}
				})
			}
		}
	}
	// MatmulForward takes this kernel up to SmallMatmulMaxN rows and sgemm above: the same
	// products within fp32 rounding.
	const K, OC = 200, 37
	for _, N := range []int{1, SmallMatmulMaxN, SmallMatmulMaxN + 1} {
		x, w, bias := randVec(r, N*K), randVec(r, OC*K), randVec(r, OC)
		got, ref := make([]float32, N*OC), make([]float32, N*OC)
		Backend{}.MatmulForward(got, x, w, bias, N, K, OC)
		Sgemm(false, true, N, OC, K, 1, x, K, w, K, 0, ref, OC)
		for i := range ref {
			ref[i] += bias[i%OC]
			if d := math.Abs(float64(got[i] - ref[i])); d > 1e-4 {
				t.Fatalf("N=%d: MatmulForward out[%d] = %g, sgemm %g", N, i, got[i], ref[i])
			}
		}
	}
}

// A row's product with a reduced copy is bit for bit the same alone and in a
// batch: up to 4 rows widen the weights in registers, more share a
// dequantised copy, with the same values and summation order.
func TestLowpMatmulBatchIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, K := range []int{96, 100} {
		const OC = 22
		w := randVec(r, OC*K)
		for isa := ISAGeneric; isa <= BestLowpISA; isa++ {
			for _, dt := range []Dtype{BFloat16, Int8} {
				if isa == ISAAVX512Dot && dt == BFloat16 && HasBF16Dot {
					continue // the bfloat16 dot-product kernel: its own arithmetic
				}
				q, _ := Quantize(dt, w, OC, K)
				for _, N := range []int{2, 4, 5, 16} {
					x, bias := randVec(r, N*K), randVec(r, OC)
					out, one := make([]float32, N*OC), make([]float32, OC)
					LowpMatmulISA(isa, out, x, q, bias, N)
					for n := 0; n < N; n++ {
						LowpMatmulISA(isa, one, x[n*K:(n+1)*K], q, bias, 1)
						for o := range one {
							if math.Float32bits(one[o]) != math.Float32bits(out[n*OC+o]) {
								t.Errorf("K=%d %v %v N=%d: row %d alone gives out[%d] = %g, in the batch %g", K, isa, dt, N, n, o, one[o], out[n*OC+o])
							}
						}
					}
				}
			}
		}
	}
}

// roundActivations is x [N,K] as a dot-product kernel of dtype sees it.
func roundActivations(dt Dtype, x []float32, N, K int) []float32 {
	xr := make([]float32, len(x))
	if dt == BFloat16 {
		for i, v := range x {
			xr[i] = FromBF16(ToBF16(v))
		}
		return xr
	}
	q, scale := Q8Activations(x, N, K)
	nb := (K + LowpBlock - 1) / LowpBlock
	for n := 0; n < N; n++ {
		for k := 0; k < K; k++ {
			xr[n*K+k] = float32(q[n*nb*LowpBlock+k]) * scale[n*nb+k/LowpBlock]
		}
	}
	return xr
}

// TestQ8ActivationsC checks the C activation quantiser of the int8
// dot-product kernel against Q8Activations (values, scales and the offsets
// -128 * block sum) on rows with ties, zero blocks, tails and huge values.
func TestQ8ActivationsC(t *testing.T) {
	if !HasQ8Dot {
		t.Skip("the C quantiser is the int8 dot-product kernel's (AVX-512 VNNI): this CPU does not run it")
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, sh := range []struct{ N, K int }{{1, 576}, {3, 33}, {2, 7}, {5, 1536}, {4, 64}} {
		N, K := sh.N, sh.K
		x := randVec(r, N*K)
		for i := 0; i < K && i < 32; i++ {
			x[i] = 0 // a zero block (scale 0)
		}
		if K > 40 && N > 1 {
			x[K+3] = 1e30
			x[K+5] = -127.0 / 2 // a tie after scaling when the block's absmax is 127
			x[K+6] = 127
		}
		wantQ, wantS := Q8Activations(x, N, K)
		nb := (K + LowpBlock - 1) / LowpBlock
		a := &q8Acts{q: make([]int8, N*nb*LowpBlock), scale: make([]float32, N*nb), off: make([]int32, N*nb)}
		for i := range a.q {
			a.q[i] = 99 // overwritten, also past K
		}
		a.quantize(x, N, K)
		q, s, off := a.q, a.scale, a.off
		for i := range wantQ {
			if q[i] != wantQ[i] {
				t.Fatalf("N=%d K=%d: q[%d] = %d, Go %d", N, K, i, q[i], wantQ[i])
			}
		}
		for i := range wantS {
			if math.Float32bits(s[i]) != math.Float32bits(wantS[i]) {
				t.Fatalf("N=%d K=%d: scale[%d] = %g, Go %g", N, K, i, s[i], wantS[i])
			}
			var sum int32
			for _, v := range wantQ[i*LowpBlock : (i+1)*LowpBlock] {
				sum += int32(v)
			}
			if off[i] != -128*sum {
				t.Fatalf("N=%d K=%d: offset[%d] = %d, want %d", N, K, i, off[i], -128*sum)
			}
		}
	}
}

// TestAutoDtype: `auto` picks bfloat16 only where the reduced-precision
// kernels run at full width (AVX-512), float32 where they would spill
// (AVX2) or run portable C.
func TestAutoDtype(t *testing.T) {
	for isa, want := range map[LowpISA]Dtype{ISAGeneric: Float32, ISAAVX2: Float32, ISAAVX512: BFloat16, ISAAVX512Dot: BFloat16} {
		if got := autoDtype(isa); got != want {
			t.Errorf("autoDtype(%v) = %v, want %v", isa, got, want)
		}
	}
	if got := AutoDtype(); got != autoDtype(BestLowpISA) {
		t.Errorf("AutoDtype() = %v on a CPU whose best kernel is %v", got, BestLowpISA)
	}
	if _, err := ParseDtype("auto"); err == nil {
		t.Error(`ParseDtype("auto") gave no error: auto depends on the backend (model.Generator.SetDtypeName)`)
	}
}
