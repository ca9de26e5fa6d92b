package cudacheck

// Checks of mixed precision (bf16.go, kernels/bf16.cuh, the GemmEx
// wrappers) against CPU references that round the same way (precision.go).

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/cuda/internal/round"
	"github.com/rlhost/rlhost/gpu/model"
)

// CheckToBF16: the f32_to_bf16 kernel against round.BF16, bit for bit, on
// normal values of many scales, exact ties (even and odd), the neighbours
// of ties, subnormals, the largest floats (which round to infinity),
// signed zeros, infinities and NaNs; an odd count.
func CheckToBF16(b Device) error {
	r := rand.New(rand.NewPCG(30, 30))
	var x []float32
	for _, bits := range []uint32{
		0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, // zeros, infinities, NaNs
		0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, 0x7f7effff, // near the largest float
		0x00000001, 0x00008000, 0x00018000, 0x807fffff, 0x00800000, // subnormals, the smallest normal
		0x3f808000, 0x3f818000, 0xbf808000, 0xbf818000, // ties: even (down), odd (up)
		0x3f807fff, 0x3f808001, 0x3f80ffff, 0x3f7fffff, // beside ties, a carry into the exponent
	} {
		x = append(x, math.Float32frombits(bits))
	}
	for len(x) < 10007 {
		v := float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20)))
		if r.IntN(8) == 0 { // an exact tie
			v = math.Float32frombits(math.Float32bits(v)&^0xffff | 0x8000)
		}
		x = append(x, v)
	}
	got := make([]uint16, len(x))
	for i := range got {
		got[i] = 0xdead // poison
	}
	b.ToBF16(got, x)
	for i, v := range x {
		if want := round.BF16(v); got[i] != want {
			return fmt.Errorf("bf16(%g = %#08x)[%d] = %#04x on cuda, %#04x on cpu", v, math.Float32bits(v), i, got[i], want)
		}
	}
	return nil
}

// gemmCases are products with every transpose, alpha and beta, and row
// strides wider than the rows (lda, ldb, ldc).
var gemmCases = []struct {
	ta, tb      bool
	M, N, K     int
	alpha, beta float32
}{
	{false, false, 17, 33, 65, 1, 0}, {false, true, 64, 48, 32, 0.5, 1}, {true, false, 31, 7, 129, 1, 0.25}, {true, true, 5, 70, 9, -1, 1},
}

// CheckGemmBF16: cublasGemmEx with bfloat16 operands rounded on the device
// against the CPU product of the operands rounded by round.BF16 (the
// products of two bfloat16s are exact in fp32, so only the order of the
// fp32 sums differs).
func CheckGemmBF16(b Device) error {
	r := rand.New(rand.NewPCG(31, 31))
	for _, tc := range gemmCases {
		lda, ldb, ldc := tc.K+3, tc.N+1, tc.N+2
		rowsA, rowsB := tc.M, tc.K
		if tc.ta {
			lda, rowsA = tc.M+3, tc.K
		}
		if tc.tb {
			ldb, rowsB = tc.K+1, tc.N
		}
		A, B, C := checkutil.Randn(r, rowsA*lda, 1), checkutil.Randn(r, rowsB*ldb, 1), checkutil.Randn(r, tc.M*ldc, 1)
		want, got := checkutil.Clone(C), checkutil.Clone(C)
		checkutil.Ref.Sgemm(tc.ta, tc.tb, tc.M, tc.N, tc.K, tc.alpha, round.BF16s(A), lda, round.BF16s(B), ldb, tc.beta, want, ldc)
		b.GemmBF16(tc.ta, tc.tb, tc.M, tc.N, tc.K, tc.alpha, A, lda, B, ldb, tc.beta, got, ldc)
		if err := checkutil.Compare(fmt.Sprintf("C(transA=%v transB=%v %dx%dx%d)", tc.ta, tc.tb, tc.M, tc.N, tc.K), got, want, 1e-5); err != nil {
			return err
		}
	}
	return nil
}

// CheckGemmStridedBatchedBF16: cublasGemmStridedBatchedEx with bfloat16
// operands against one CPU product of rounded operands per problem.
func CheckGemmStridedBatchedBF16(b Device) error {
	r := rand.New(rand.NewPCG(32, 32))
	const M, N, K, count = 19, 23, 40, 5
	A, B, C := checkutil.Randn(r, count*M*K, 1), checkutil.Randn(r, count*N*K, 1), checkutil.Randn(r, count*M*N, 1)
	Ar, Br := round.BF16s(A), round.BF16s(B)
	want := checkutil.Clone(C)
	for i := 0; i < count; i++ {
		checkutil.Ref.Sgemm(false, true, M, N, K, 0.5, Ar[i*M*K:], K, Br[i*N*K:], K, 1, want[i*M*N:], N)
	}
	got := checkutil.Clone(C)
	b.GemmStridedBatchedBF16(false, true, M, N, K, 0.5, A, K, M*K, B, K, N*K, 1, got, N, M*N, count)
	return checkutil.Compare("C", got, want, 1e-5)
}

// CheckMatmulBF16 and checkMatmulTF32: the model's products in BF16 and
// TF32 (SetPrecision).
func CheckMatmulBF16(b Device) error { return matmulPrecisionCheck(b, cuda.BF16) }
func CheckMatmulTF32(b Device) error { return matmulPrecisionCheck(b, cuda.TF32) }

// matmulPrecisionCheck runs MatmulForward and MatmulBackward in precision
// p against the fp32 CPU ops on operands rounded as p rounds them (bias and
// its gradient stay fp32). The weight is a view in the middle of a
// resident tensor (its bfloat16 copy at the view's offset), then the same
// view after an Upload into it (the copy refreshed), then a host slice
// (rounded for the one product); for each, the backward's input gradient
// also accumulated into a dinp of other values (checkAccumulate). TF32
// allows 1e-3: cuBLAS may truncate
// operands to TF32 where the emulator rounds them to nearest.
func matmulPrecisionCheck(b Device, p cuda.Precision) error {
	rnd, tol := round.BF16s, 1e-5
	if p == cuda.TF32 {
		rnd, tol = round.TF32s, 1e-3
	}
	prev := b.Precision()
	b.SetPrecision(p)
	defer b.SetPrecision(prev)
	r := rand.New(rand.NewPCG(33, 33))
	const N, C, OC = 21, 64, 80
	inp, bias, dout := checkutil.Randn(r, N*C, 1), checkutil.Randn(r, OC, 1), checkutil.Randn(r, N*OC, 1)
	t := b.Alloc("check weights", 3*OC*C)
	defer b.Free(t)
	b.Upload(t, checkutil.Randn(r, 3*OC*C, 0.1))
	view := t[OC*C : 2*OC*C]
	for round2, name := range []string{"resident weight", "resident weight after an upload", "host weight"} {
		w := checkutil.Randn(r, OC*C, 0.1)
		weight := w
		if round2 < 2 {
			b.Upload(view, w)
			weight = view
		}
		o1, o2 := make([]float32, N*OC), make([]float32, N*OC)
		checkutil.Ref.MatmulForward(o1, rnd(inp), rnd(w), bias, N, C, OC)
		b.MatmulForward(o2, inp, weight, bias, N, C, OC)
		if err := checkutil.Compare(name+": out", o2, o1, tol); err != nil {
			return err
		}
		dw0, db0 := checkutil.Randn(r, OC*C, 1), checkutil.Randn(r, OC, 1)
		di1, di2 := make([]float32, N*C), make([]float32, N*C)
		dw1, dw2, db1, db2 := checkutil.Clone(dw0), checkutil.Clone(dw0), checkutil.Clone(db0), checkutil.Clone(db0)
		checkutil.Ref.MatmulBackward(di1, dw1, nil, rnd(dout), rnd(inp), rnd(w), N, C, OC, false)
		checkutil.Ref.MatmulBackward(nil, nil, db1, dout, inp, w, N, C, OC, false)
		b.MatmulBackward(di2, dw2, db2, dout, inp, weight, N, C, OC, false)
		if err := checkutil.CompareAll(tol, name+": dinp", di2, di1, name+": dweight", dw2, dw1, name+": dbias", db2, db1); err != nil {
			return err
		}
		if err := checkAccumulate(b, name+": ", di1, dout, inp, weight, N, C, OC, tol); err != nil {
			return err
		}
	}
	if err := gradientCopyCheck(b, rnd, tol); err != nil {
		return err
	}
	return sharedInputCheck(b, rnd, tol)
}

// gradientCopyCheck: MatmulBackward's output gradient a tensor of the
// backend written by each op that, in BF16, writes the bfloat16 copy of
// that output itself (RMSNormBackward, ResidualRMSNormBackward adding
// into it, SwiGLUBackward's two outputs and SwiGLUBackwardH's,
// RopeQKBackward's two, rotating
// in place, LogprobBackward; bf16.go), then
// after Scale wrote it (no copy: the product rounds it itself); both
// products must read the copy of what the op wrote, against the CPU on
// operands rounded as the precision rounds them.
func gradientCopyCheck(b Device, round func([]float32) []float32, tol float64) error {
	r := rand.New(rand.NewPCG(37, 37))
	const N, C, OC = 17, 40, 32
	inp, w := checkutil.Randn(r, N*C, 1), checkutil.Randn(r, OC*C, 0.1)
	// two tensors: an op's copy is made only of a tensor it writes
	// through that one output
	g1, g2 := b.Alloc("check output gradients", N*OC), b.Alloc("check output gradients, second", N*OC)
	defer b.Free(g1)
	defer b.Free(g2)
	vals := make([]float32, N*OC)
	bwd := func(what string, dout []float32) error {
		b.Download(vals, dout)
		dw := checkutil.Randn(r, OC*C, 1)
		di1, di2, dw1, dw2 := make([]float32, N*C), make([]float32, N*C), checkutil.Clone(dw), checkutil.Clone(dw)
		checkutil.Ref.MatmulBackward(di1, dw1, nil, round(vals), round(inp), round(w), N, C, OC, false)
		b.MatmulBackward(di2, dw2, nil, dout, inp, w, N, C, OC, false)
		return checkutil.CompareAll(tol, "output gradient "+what+": dinp", di2, di1, "output gradient "+what+": dweight", dw2, dw1)
	}
	rstd := make([]float32, N)
	for i := range rstd {
		rstd[i] = 0.5 + r.Float32()
	}
	targets, pos := make([]int32, N), make([]int32, N)
	for i := range targets {
		targets[i], pos[i] = int32(r.IntN(OC)), int32(r.IntN(N))
	}
	cos, sin := checkutil.Randn(r, N*8, 1), checkutil.Randn(r, N*8, 1) // N positions x 8 pairs

	for _, op := range []struct {
		what  string
		write func()
		dout  []float32
	}{
		{"written by RMSNormBackward", func() {
			b.RMSNormBackward(g1, make([]float32, OC), checkutil.Randn(r, N*OC, 1), checkutil.Randn(r, N*OC, 1), checkutil.Randn(r, OC, 1), rstd, N, OC)
		}, g1},
		{"added to by ResidualRMSNormBackward", func() {
			b.ResidualRMSNormBackward(g1, make([]float32, OC), checkutil.Randn(r, N*OC, 1), checkutil.Randn(r, N*OC, 1), checkutil.Randn(r, N*OC, 1),
				checkutil.Randn(r, OC, 1), rstd, N, OC)
		}, g1},
		{"dgate of SwiGLUBackward", func() {
			b.SwiGLUBackward(g1, g2, checkutil.Randn(r, N*OC, 1), checkutil.Randn(r, N*OC, 2), checkutil.Randn(r, N*OC, 1), N*OC)
		}, g1},
		{"dup of SwiGLUBackward", func() {}, g2},
		{"dgate of SwiGLUBackwardH", func() {
			b.SwiGLUBackwardH(g1, g2, make([]float32, N*OC), checkutil.Randn(r, N*OC, 1), checkutil.Randn(r, N*OC, 2), checkutil.Randn(r, N*OC, 1), N*OC)
		}, g1},
		{"dup of SwiGLUBackwardH", func() {}, g2},
		{"dq of RopeQKBackward", func() {
			b.RopeQKBackward(g1, g2, pos, cos, sin, N, 2, 2, 16, gpu.RopeHalf) // [N,2,16] each, rotated in place
		}, g1},
		{"dk of RopeQKBackward", func() {}, g2},
		{"written by LogprobBackward", func() {
			b.LogprobBackward(g2, checkutil.Randn(r, N*OC, 1), checkutil.Randn(r, N, 0.3), checkutil.Randn(r, N, 1), targets, checkutil.Randn(r, N, 1), checkutil.Randn(r, N, 1), N, OC)
		}, g2},
		{"after Scale wrote it", func() { b.Scale(g2, -0.5) }, g2},
	} {
		op.write()
		if err := bwd(op.what, op.dout); err != nil {
			return err
		}
	}
	return nil
}

// sharedInputCheck runs products whose input is a tensor of the backend,
// in the backend's precision, against the CPU on operands rounded as that
// precision rounds them: the same input read by products in turn (in BF16
// they share one bfloat16 copy, bf16.go), then after each way the input
// can change between two products: an op writing it (Scale), a product
// writing it (as its output), an Upload into it, the ops that write the
// copy of their output themselves in BF16 (RMSNormForward,
// ResidualRMSNormForward, SwiGLUForward, SwiGLUBackwardH's h; then AdamW on a weight,
// adamwWeightCheck), and its memory freed and
// handed to a new tensor (zeros; TestSharedBF16ReusesFreedMemory checks
// that the emulator hands it the same memory). Each product must see the values the
// input holds when it runs, never a copy of earlier ones.
func sharedInputCheck(b Device, round func([]float32) []float32, tol float64) error {
	r := rand.New(rand.NewPCG(35, 35))
	const N, C, OC = 19, 48, 40
	w, w2, bias, dout := checkutil.Randn(r, OC*C, 0.1), checkutil.Randn(r, C*C, 0.1), checkutil.Randn(r, OC, 1), checkutil.Randn(r, N*OC, 1)
	x := b.Alloc("check activations", N*C)
	defer func() { b.Free(x) }()
	vals := checkutil.Randn(r, N*C, 1) // what x holds
	b.Upload(x, vals)
	fwd := func(what string) error {
		want, got := make([]float32, N*OC), make([]float32, N*OC)
		checkutil.Ref.MatmulForward(want, round(vals), round(w), bias, N, C, OC)
		b.MatmulForward(got, x, w, bias, N, C, OC)
		return checkutil.Compare("input resident, "+what+": out", got, want, tol)
	}
	bwd := func(what string) error { // the weight gradient reads the input
		dw := checkutil.Randn(r, OC*C, 1)
		want, got := checkutil.Clone(dw), checkutil.Clone(dw)
		checkutil.Ref.MatmulBackward(nil, want, nil, round(dout), round(vals), round(w), N, C, OC, false)
		b.MatmulBackward(nil, got, nil, dout, x, w, N, C, OC, false)
		return checkutil.Compare("input resident, "+what+": dweight", got, want, tol)
	}
	if err := fwd("first product"); err != nil {
		return err
	}
	if err := fwd("second product of the same input"); err != nil {
		return err
	}
	if err := bwd("a backward of the same input"); err != nil {
		return err
	}
	b.Scale(x, -1.5)
	for i := range vals {
		vals[i] *= -1.5
	}
	if err := fwd("after Scale wrote it"); err != nil {
		return err
	}
	b.MatmulForward(x, checkutil.Randn(r, N*C, 1), w2, nil, N, C, C) // x = z w2^T
	b.Download(vals, x)
	if err := bwd("after a product wrote it"); err != nil {
		return err
	}
	vals = checkutil.Randn(r, N*C, 1)
	b.Upload(x, vals)
	if err := fwd("after an Upload into it"); err != nil {
		return err
	}
	// the ops that write their output's bfloat16 copy in BF16 (bf16.go):
	// each product after one must read the copy of what the op wrote
	norm, rstd := checkutil.Randn(r, C, 1), make([]float32, N)
	for _, op := range []struct {
		what  string
		write func()
	}{
		{"RMSNormForward", func() { b.RMSNormForward(x, rstd, checkutil.Randn(r, N*C, 1), norm, N, C, 1e-6) }},
		{"ResidualRMSNormForward", func() {
			b.ResidualRMSNormForward(make([]float32, N*C), x, rstd, checkutil.Randn(r, N*C, 1), checkutil.Randn(r, N*C, 1), norm, N, C, 1e-6)
		}},
		{"SwiGLUForward", func() { b.SwiGLUForward(x, checkutil.Randn(r, N*C, 2), checkutil.Randn(r, N*C, 1), N*C) }},
		{"SwiGLUBackwardH", func() { // its h
			b.SwiGLUBackwardH(make([]float32, N*C), make([]float32, N*C), x, checkutil.Randn(r, N*C, 1), checkutil.Randn(r, N*C, 2), checkutil.Randn(r, N*C, 1), N*C)
		}},
	} {
		op.write()
		b.Download(vals, x)
		if err := fwd("after " + op.what + " wrote it"); err != nil {
			return err
		}
		if err := bwd("a backward after " + op.what + " wrote it"); err != nil {
			return err
		}
	}
	if err := adamwWeightCheck(b, round, tol); err != nil {
		return err
	}
	// the CUDA backend hands a freed tensor's memory to the next tensor of
	// its size (gpu/cpu allocates anew: there the step checks a new tensor)
	b.Free(x)
	x = b.Alloc("check activations, allocated again", N*C)
	clear(vals)
	return fwd("a new tensor in a freed one's memory")
}

// adamwWeightCheck: a product reads a weight tensor of the backend (in
// BF16 its resident copy is made), AdamW updates the weights (in BF16 it
// writes the copy of the updated values itself), and the products that
// read them next must compute with the updated weights, rounded as the
// precision rounds them: the first AdamW step, a second one, and then
// an Upload into the tensor (the copy left stale and converted again).
func adamwWeightCheck(b Device, round func([]float32) []float32, tol float64) error {
	r := rand.New(rand.NewPCG(36, 36))
	const N, C, OC = 13, 32, 24
	inp, grads := checkutil.Randn(r, N*C, 1), checkutil.Randn(r, OC*C, 1)
	m, v := make([]float32, OC*C), make([]float32, OC*C)
	w := b.Alloc("check weights (AdamW)", OC*C)
	defer b.Free(w)
	b.Upload(w, checkutil.Randn(r, OC*C, 0.1))
	vals := make([]float32, OC*C)
	fwd := func(what string) error {
		b.Download(vals, w)
		want, got := make([]float32, N*OC), make([]float32, N*OC)
		checkutil.Ref.MatmulForward(want, round(inp), round(vals), nil, N, C, OC)
		b.MatmulForward(got, inp, w, nil, N, C, OC)
		return checkutil.Compare("weight resident, "+what+": out", got, want, tol)
	}
	if err := fwd("first product"); err != nil {
		return err
	}
	for step := 1; step <= 2; step++ {
		b.AdamW(w, grads, m, v, step, 1e-2, 0.9, 0.999, 1e-8, 0.1)
		if err := fwd(fmt.Sprintf("after AdamW step %d", step)); err != nil {
			return err
		}
	}
	b.Upload(w, checkutil.Randn(r, OC*C, 0.1))
	return fwd("after an Upload into it")
}

// MixedTolerance bounds how far the log-probs and the loss of the tiny
// training step in BF16 (TF32) may lie from the fp32 CPU reference: about
// 4x what the emulator measures (docs/gpu.md lists the measured figures:
// BF16 2.7e-3 and 2.3e-4, TF32 1.9e-4 and 6.9e-6), and for TF32 room for
// operands truncated rather than rounded by the tensor cores.
var MixedTolerance = map[cuda.Precision]struct{ Logp, Loss float64 }{
	cuda.BF16: {1e-2, 1e-3},
	cuda.TF32: {1e-3, 1e-4},
}

// CheckTrainStepBF16 and checkTrainStepTF32: two training steps of the
// tiny model with the products in BF16 (TF32) on the device and in fp32 on
// the CPU, within mixedTolerance.
func CheckTrainStepBF16(b Device) error { return mixedStepCheck(b, cuda.BF16) }
func CheckTrainStepTF32(b Device) error { return mixedStepCheck(b, cuda.TF32) }

func mixedStepCheck(b Device, p cuda.Precision) error {
	return mixedStepCheckConfig(b, p, MixedStepConfig, MixedTolerance[p])
}

// MixedStepConfig is the Qwen2-shaped model of mixedStepCheck.
var MixedStepConfig = model.Config{Family: "qwen2", V: 97, C: 64, F: 160, L: 2, NH: 4, NKV: 2, HD: 16, MaxPos: 64,
	Eps: 1e-6, RopeTheta: 10000, QKVBias: true, BOS: 1, EOS: 2}

// mixedStepCheckConfig is mixedStepCheck of the model c, within tol.
func mixedStepCheckConfig(b Device, p cuda.Precision, c model.Config, tol struct{ Logp, Loss float64 }) error {
	d, err := MixedStepDiffs(b, p, c)
	if err != nil {
		return err
	}
	for s := range d.Logp {
		if !(d.Logp[s] <= tol.Logp) {
			return fmt.Errorf("step %d: logp[%d] = %.6g on cuda (%v), %.6g on cpu (fp32) (|diff| %.3g > %.3g)",
				s+1, d.At[s], d.Got[s], p, d.Want[s], d.Logp[s], tol.Logp)
		}
		if !(d.Loss[s] <= tol.Loss) {
			return fmt.Errorf("step %d: loss %.6g on cuda (%v), %.6g on cpu (fp32) (|diff| %.3g > %.3g)",
				s+1, d.LossGot[s], p, d.LossWant[s], d.Loss[s], tol.Loss)
		}
	}
	return nil
}

// stepDiffs are the differences of two training steps between a device in
// some precision and the fp32 CPU reference: per step, the largest
// |logp difference| (at row at, got vs want) and the |loss difference|
// (loss = -mean of the scored rows' log-probs), and the relative difference
// of the gradient norms.
type stepDiffs struct {
	Logp, Loss, Norm  [2]float64
	At                [2]int
	Got, Want         [2]float32
	LossGot, LossWant [2]float64
}

// MixedStepDiffs runs forward, backward and AdamW twice on the model c
// (weights std 0.1) on b in precision p and on the CPU
// in fp32, from the same weights and batch; the second forward reads the
// updated weights (so their bfloat16 copies must have been refreshed).
func MixedStepDiffs(b Device, p cuda.Precision, c model.Config) (stepDiffs, error) {
	prev := b.Precision()
	b.SetPrecision(p)
	defer b.SetPrecision(prev)
	r := rand.New(rand.NewPCG(34, 34))
	init := checkutil.Randn(r, c.NumParams(), 0.1)
	const B, T = 2, 12
	batch := model.Batch{B: B, T: T, Tokens: make([]int32, B*T), Targets: make([]int32, B*T)}
	dlogp, dent := make([]float32, B*T), make([]float32, B*T)
	scored := 0
	for n := range batch.Tokens {
		batch.Tokens[n] = int32(r.IntN(c.V))
	}
	for n := range batch.Targets {
		batch.Targets[n] = -1
		if n%T != T-1 {
			batch.Targets[n] = batch.Tokens[n+1]
			scored++
		}
	}
	for n := range dlogp {
		if batch.Targets[n] >= 0 {
			dlogp[n] = -1 / float32(scored)
		}
	}
	cfg := model.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, MaxGradNorm: 1}
	var logp [2][2][]float32 // [backend][step]
	var norms [2][2]float64
	for i, be := range []Device{nil, b} {
		var m *model.Model
		if i == 0 {
			m = model.NewZero(checkutil.Ref, c)
		} else {
			m = model.NewZero(be, c)
		}
		m.Params.Upload(init)
		m.EnableGrads()
		a := m.NewActs(B, T)
		opt := model.NewAdamW(m, cfg)
		for s := 0; s < 2; s++ {
			if err := m.Forward(a, batch); err != nil {
				return stepDiffs{}, fmt.Errorf("forward on %s: %w", m.Backend().Name(), err)
			}
			logp[i][s] = checkutil.Clone(a.Logp)
			m.ZeroGrads()
			if err := m.Backward(a, dlogp, dent); err != nil {
				return stepDiffs{}, fmt.Errorf("backward on %s: %w", m.Backend().Name(), err)
			}
			var err error
			if norms[i][s], err = opt.Update(m); err != nil {
				return stepDiffs{}, err
			}
		}
		a.Free()
	}
	var d stepDiffs
	for s := 0; s < 2; s++ {
		var lg, lw float64
		for n := range dlogp {
			if batch.Targets[n] < 0 {
				continue
			}
			got, want := logp[1][s][n], logp[0][s][n]
			lg -= float64(got) / float64(scored)
			lw -= float64(want) / float64(scored)
			if diff := math.Abs(float64(got - want)); diff > d.Logp[s] || math.IsNaN(diff) {
				d.Logp[s], d.At[s], d.Got[s], d.Want[s] = diff, n, got, want
				if math.IsNaN(diff) {
					d.Logp[s] = math.Inf(1)
				}
			}
		}
		d.Loss[s], d.LossGot[s], d.LossWant[s] = math.Abs(lg-lw), lg, lw
		if math.IsNaN(d.Loss[s]) {
			d.Loss[s] = math.Inf(1)
		}
		d.Norm[s] = math.Abs(norms[1][s]-norms[0][s]) / norms[0][s]
	}
	return d, nil
}
