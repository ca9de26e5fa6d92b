package cudacheck

// Checks of generation's fused decode ops (decode.go, gpu.DecodeFused)
// against the separate ops they replace, run on the same device, and
// against the CPU reference gpu/cpu.

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// decodeFused is d's gpu.DecodeFused, or an error saying it has none.
func decodeFused(d Device) (gpu.DecodeFused, error) {
	f, ok := d.(gpu.DecodeFused)
	if !ok {
		return nil, fmt.Errorf("%s has no fused decode ops (gpu.DecodeFused)", d.Name())
	}
	return f, nil
}

// residentCopy is x uploaded into a new tensor of b (freed by the returned func).
func residentCopy(b gpu.Backend, name string, x []float32) ([]float32, func()) {
	t := b.Alloc(name, len(x))
	b.Upload(t, x)
	return t, func() { b.Free(t) }
}

// residentInt32 is residentCopy for int32 indexes.
func residentInt32(b gpu.Backend, name string, x []int32) ([]int32, func()) {
	t := b.AllocInt32(name, len(x))
	b.UploadInt32(t, x)
	return t, func() { b.Free(t) }
}

// identity is the [n,n] identity matrix.
func identity(n int) []float32 {
	m := make([]float32, n*n)
	for i := range n {
		m[i*n+i] = 1
	}
	return m
}

// concatRows interleaves parts, each [N, widths[i]], into [N, sum of widths]
// rows (the layout of a product over concatenated weights).
func concatRows(N int, parts [][]float32, widths []int) []float32 {
	var out []float32
	for n := range N {
		for i, p := range parts {
			out = append(out, p[n*widths[i]:(n+1)*widths[i]]...)
		}
	}
	return out
}

// decodeQKVCases: query and key heads (GQA groups of 2, 3, 14 and none),
// heads of 16 to 64 dimensions, with and without biases, both RoPE layouts.
var decodeQKVCases = []struct {
	NH, NKV, HD int
	bias        bool
	layout      gpu.RopeLayout
}{
	{4, 2, 32, true, gpu.RopeHalf},
	{4, 2, 32, false, gpu.RopePairs},
	{3, 1, 16, true, gpu.RopePairs},
	{2, 2, 16, false, gpu.RopeHalf},
	{14, 1, 64, true, gpu.RopeHalf}, // Qwen2.5-0.5B's group of 7 per key head, doubled
}

// CheckDecodeQKV: QKVRopeCacheForward, and RopeCacheForward on q, k and v
// with their biases added, against what the generator ran before them on
// the same device: per tensor MatmulForward with its bias
// (in fp32, by the identity, whose product is exact: the bias added to
// the values as add_bias adds it), RopeQKForward and ScatterRows of k and
// v into caches of 3 slots of 12 positions that hold other values. q and
// both whole caches must be equal bit for bit (the same fp32 operations in
// the same order), and within 1e-5 of gpu/cpu's separate ops.
func CheckDecodeQKV(b Device) error {
	f, err := decodeFused(b)
	if err != nil {
		return err
	}
	defer b.SetPrecision(b.Precision())
	b.SetPrecision(cuda.FP32)
	r := rand.New(rand.NewPCG(28, 1))
	const N, S, T, P = 7, 3, 12, 40
	for ci, c := range decodeQKVCases {
		QD, KD := c.NH*c.HD, c.NKV*c.HD
		cos, sin := ropeTables(P, c.HD)
		q, k, v := checkutil.Randn(r, N*QD, 1), checkutil.Randn(r, N*KD, 1), checkutil.Randn(r, N*KD, 1)
		var bq, bk, bv []float32
		if c.bias {
			bq, bk, bv = checkutil.Randn(r, QD, 0.5), checkutil.Randn(r, KD, 0.5), checkutil.Randn(r, KD, 0.5)
		}
		kc0, vc0 := checkutil.Randn(r, S*T*KD, 1), checkutil.Randn(r, S*T*KD, 1)
		pos, rows := make([]int32, N), make([]int32, N)
		for n, i := range r.Perm(S * T)[:N] { // distinct cache rows
			rows[n], pos[n] = int32(i), int32(i%T)
		}
		// the separate ops on host slices: gpu/cpu, then the device
		run := func(be gpu.Backend, kc, vc []float32) (qo []float32) {
			qo, ko, vo := make([]float32, N*QD), make([]float32, N*KD), make([]float32, N*KD)
			be.MatmulForward(qo, q, identity(QD), bq, N, QD, QD)
			be.MatmulForward(ko, k, identity(KD), bk, N, KD, KD)
			be.MatmulForward(vo, v, identity(KD), bv, N, KD, KD)
			be.RopeQKForward(qo, ko, pos, cos, sin, N, c.NH, c.NKV, c.HD, c.layout)
			be.ScatterRows(kc, ko, rows, N, KD)
			be.ScatterRows(vc, vo, rows, N, KD)
			return qo
		}
		kcRef, vcRef := checkutil.Clone(kc0), checkutil.Clone(vc0)
		qRef := run(checkutil.Ref, kcRef, vcRef)
		kcSep, vcSep := checkutil.Clone(kc0), checkutil.Clone(vc0)
		qSep := run(b, kcSep, vcSep)
		// the fused op on resident tensors, as the generator runs it
		qkv, free1 := residentCopy(b, "check qkv", concatRows(N, [][]float32{q, k, v}, []int{QD, KD, KD}))
		defer free1()
		var bias []float32
		if c.bias {
			var free func()
			bias, free = residentCopy(b, "check bias", slices.Concat(bq, bk, bv))
			defer free()
		}
		kc, free2 := residentCopy(b, "check k cache", kc0)
		defer free2()
		vc, free3 := residentCopy(b, "check v cache", vc0)
		defer free3()
		posD, free4 := residentInt32(b, "check positions", pos)
		defer free4()
		rowD, free5 := residentInt32(b, "check rows", rows)
		defer free5()
		qD, free6 := residentCopy(b, "check q", make([]float32, N*QD))
		defer free6()
		f.QKVRopeCacheForward(qD, kc, vc, qkv, bias, posD, rowD, cos, sin, N, c.NH, c.NKV, c.HD, c.layout)
		qF, kcF, vcF := checkutil.Host(b, qD), checkutil.Host(b, kc), checkutil.Host(b, vc)
		name := fmt.Sprintf("case %d (NH %d, NKV %d, HD %d, bias %v, %s) ", ci, c.NH, c.NKV, c.HD, c.bias, c.layout)
		if err := checkutil.CompareAll(0, name+"q/fused vs separate", qF, qSep, name+"k cache/fused vs separate", kcF, kcSep,
			name+"v cache/fused vs separate", vcF, vcSep); err != nil {
			return err
		}
		if err := checkutil.CompareAll(1e-5, name+"q", qF, qRef, name+"k cache", kcF, kcRef, name+"v cache", vcF, vcRef); err != nil {
			return err
		}
		// RopeCacheForward: q, k and v apart, their biases added (a float32
		// add, as add_bias's), q rotated in place
		add := func(x, b []float32, W int) []float32 {
			y := checkutil.Clone(x)
			for i := range y {
				if b != nil {
					y[i] += b[i%W]
				}
			}
			return y
		}
		q2, free7 := residentCopy(b, "check q", add(q, bq, QD))
		defer free7()
		k2, free8 := residentCopy(b, "check k", add(k, bk, KD))
		defer free8()
		v2, free9 := residentCopy(b, "check v", add(v, bv, KD))
		defer free9()
		b.Upload(kc, kc0)
		b.Upload(vc, vc0)
		f.RopeCacheForward(q2, kc, vc, k2, v2, posD, rowD, cos, sin, N, c.NH, c.NKV, c.HD, c.layout)
		if err := checkutil.CompareAll(0, name+"q/rope+cache vs separate", checkutil.Host(b, q2), qSep, name+"k cache/rope+cache vs separate",
			checkutil.Host(b, kc), kcSep, name+"v cache/rope+cache vs separate", checkutil.Host(b, vc), vcSep); err != nil {
			return err
		}
	}
	return nil
}

// CheckSwiGLURows: SwiGLURowsForward over [N,2F] rows against
// SwiGLUForward of the two halves on the same device (bit for bit) and on
// gpu/cpu (1e-5).
func CheckSwiGLURows(b Device) error {
	f, err := decodeFused(b)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(28, 2))
	for _, s := range []struct{ N, F int }{{1, 7}, {5, 160}, {3, 1000}} {
		N, F := s.N, s.F
		gate, up := checkutil.Randn(r, N*F, 2), checkutil.Randn(r, N*F, 1)
		want, sep := make([]float32, N*F), make([]float32, N*F)
		checkutil.Ref.SwiGLUForward(want, gate, up, N*F)
		b.SwiGLUForward(sep, gate, up, N*F)
		gu, free := residentCopy(b, "check gate and up", concatRows(N, [][]float32{gate, up}, []int{F, F}))
		out, free2 := residentCopy(b, "check swiglu", make([]float32, N*F))
		f.SwiGLURowsForward(out, gu, N, F)
		got := checkutil.Host(b, out)
		free()
		free2()
		name := fmt.Sprintf("swiglu rows N %d F %d", N, F)
		if err := checkutil.Compare(name+"/fused vs separate", got, sep, 0); err != nil {
			return err
		}
		if err := checkutil.Compare(name, got, want, 1e-5); err != nil {
			return err
		}
	}
	return nil
}

// DecodeProductTol bounds the difference between one product over
// concatenated weights (q|k|v, gate|up) and the separate products, relative
// to the largest value: the operands are the same (in bf16 the same
// rounded copies), the fp32 sums may be ordered differently (cuBLAS may
// pick another kernel, split or tiling for another output width).
const DecodeProductTol = 1e-5

// checkDecodeProducts: the generator's fused products, MatmulForward over
// a view of q_proj | k_proj | v_proj (and gate_proj | up_proj) in one
// parameter tensor, against the separate products over each view, in each
// precision, within decodeProductTol.
func checkDecodeProducts(b Device) error { return DecodeProductsCompare(b, DecodeProductTol) }

// DecodeProductsCompare is checkDecodeProducts with tolerance tol.
func DecodeProductsCompare(b Device, tol float64) error {
	defer b.SetPrecision(b.Precision())
	r := rand.New(rand.NewPCG(28, 3))
	const C = 96
	for _, s := range []struct{ N, QD, KD int }{{1, 128, 32}, {9, 896 / 7, 64}, {64, 64, 16}} {
		widths := []int{s.QD, s.KD, s.KD} // q, k, v; gate, up are two of QD
		total := s.QD + 2*s.KD
		w, freeW := residentCopy(b, "check weights", checkutil.Randn(r, (total+2*s.QD)*C, 0.1))
		x, freeX := residentCopy(b, "check input", checkutil.Randn(r, s.N*C, 1))
		for _, p := range []cuda.Precision{cuda.FP32, cuda.TF32, cuda.BF16} {
			b.SetPrecision(p)
			for _, g := range [][]int{widths, {s.QD, s.QD}} {
				base := 0
				if len(g) == 2 {
					base = total * C // gate | up after q | k | v
				}
				sum := 0
				for _, wd := range g {
					sum += wd
				}
				fused := b.Alloc("check fused", s.N*sum)
				b.MatmulForward(fused, x, w[base:base+sum*C], nil, s.N, C, sum)
				got := checkutil.Host(b, fused)
				b.Free(fused)
				var parts [][]float32
				off := base
				for _, wd := range g {
					out := b.Alloc("check part", s.N*wd)
					b.MatmulForward(out, x, w[off:off+wd*C], nil, s.N, C, wd)
					parts, off = append(parts, checkutil.Host(b, out)), off+wd*C
					b.Free(out)
				}
				name := fmt.Sprintf("%s product of widths %v, N %d", p, g, s.N)
				if err := checkutil.Compare(name+"/fused vs separate", got, concatRows(s.N, parts, g), tol); err != nil {
					return err
				}
			}
		}
		freeW()
		freeX()
	}
	return nil
}

// checkGenerateQwen: greedy generation with a Qwen2-shaped model (biases
// on q, k and v, GQA groups of 2) on the device and on the CPU: the same
// tokens and log-probs within 1e-4, through the fused decode ops where the
// device has them (the other generation checks are Llama-shaped: no
// biases).
func checkGenerateQwen(b Device) error {
	c := model.Config{Family: "qwen2", V: 97, C: 64, F: 160, L: 2, NH: 4, NKV: 2, HD: 16, MaxPos: 64,
		Eps: 1e-6, RopeTheta: 10000, QKVBias: true, BOS: 1, EOS: 2}
	r := rand.New(rand.NewPCG(28, 4))
	init := checkutil.Randn(r, c.NumParams(), 0.3)
	return generateBoth(checkutil.Ref, b, c, init, greedyRequests(r, c.V, 3, 2, 5, 10), 2, "tokens")
}
