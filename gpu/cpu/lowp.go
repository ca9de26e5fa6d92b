package cpu

/*
#include "lowp.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// Dtype is the storage type of a reduced-precision weight copy (LowpMatrix).
type Dtype int

const (
	Float32  Dtype = iota // no copy: the fp32 weights themselves
	BFloat16              // bfloat16, rounded to nearest even: 2 bytes per weight
	Int8                  // blocks of 32 int8 with an fp32 scale (absmax/127): 1.125 bytes per weight
)

// String gives the veRL spelling (actor_rollout_ref.rollout.dtype).
func (d Dtype) String() string {
	switch d {
	case Float32:
		return "float32"
	case BFloat16:
		return "bfloat16"
	case Int8:
		return "int8"
	}
	return fmt.Sprintf("Dtype(%d)", int(d))
}

// ParseDtype reads a dtype name: float32 (fp32), bfloat16 (bf16) or int8.
func ParseDtype(s string) (Dtype, error) {
	switch s {
	case "float32", "fp32", "":
		return Float32, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	case "int8":
		return Int8, nil
	}
	return 0, fmt.Errorf("cpu: unknown dtype %q (want float32, bfloat16 or int8)", s)
}

// LowpBlock is the number of int8 weights sharing one scale.
const LowpBlock = C.LOWP_BLOCK

// LowpMatrix is a reduced-precision copy of an fp32 weight [Rows, Cols]
// (out = inp W^T), for generation. Build it with Quantize and refresh it
// in place with Requantize.
type LowpMatrix struct {
	Dtype      Dtype
	Rows, Cols int
	BF         []uint16  // BFloat16: [Rows*Cols]
	Q          []int8    // Int8: [Rows*Cols]
	Scale      []float32 // Int8: [Rows*ceil(Cols/LowpBlock)]
	// Packed is BF in the layout of the bfloat16 dot-product kernel
	// (lowp.h): built only on CPUs that run it (HasBF16Dot).
	Packed []uint16
	// QPacked and QPScale are Q and Scale in the layout of the int8
	// dot-product kernel (lowp.h): built only on CPUs that run it
	// (HasQ8Dot).
	QPacked []uint8
	QPScale []float32
	goQuant bool // quantise in Go (the reference the C quantisers are tested against)
}

// Quantize returns the dtype copy of w [rows, cols].
func Quantize(dtype Dtype, w []float32, rows, cols int) (*LowpMatrix, error) {
	if dtype != BFloat16 && dtype != Int8 {
		return nil, fmt.Errorf("cpu: no reduced-precision copy for dtype %v", dtype)
	}
	if rows <= 0 || cols <= 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("cpu: quantize: weight has %d values, want %d x %d", len(w), rows, cols)
	}
	q := &LowpMatrix{Dtype: dtype, Rows: rows, Cols: cols}
	if dtype == BFloat16 {
		q.BF = HugeUint16s(rows * cols)
		if HasBF16Dot {
			q.Packed = HugeUint16s(q.outBlocks() * q.pairs() * 32)
		}
	} else {
		q.Q = HugeInt8s(rows * cols)
		q.Scale = make([]float32, rows*q.blocks())
		if HasQ8Dot {
			q.QPacked = hugeSlice[uint8](q.outBlocks() * 16 * q.blocks() * LowpBlock)
			q.QPScale = make([]float32, q.outBlocks()*16*q.blocks())
		}
	}
	q.Requantize(w)
	return q, nil
}

func (q *LowpMatrix) blocks() int { return (q.Cols + LowpBlock - 1) / LowpBlock }

// outBlocks and pairs are the packed layout's blocks of 16 rows and
// column pairs.
func (q *LowpMatrix) outBlocks() int { return (q.Rows + 15) / 16 }
func (q *LowpMatrix) pairs() int     { return (q.Cols + 1) / 2 }

// Bytes is the size of the copy (the packed layout replaces the row-major
// one for the products when it is there; both are counted).
func (q *LowpMatrix) Bytes() int {
	return 2*len(q.BF) + 2*len(q.Packed) + len(q.Q) + 4*len(q.Scale) + len(q.QPacked) + 4*len(q.QPScale)
}

// productBytes is what one product streams: the packed weights when a
// dot-product kernel runs, else the row-major copy.
func (q *LowpMatrix) productBytes() int {
	switch {
	case q.Packed != nil:
		return 2 * len(q.Packed)
	case q.QPacked != nil:
		return len(q.QPacked) + 4*len(q.QPScale)
	}
	return q.Bytes()
}

// Requantize overwrites the copy from w [Rows, Cols] (same shape as built).
func (q *LowpMatrix) Requantize(w []float32) {
	if len(w) != q.Rows*q.Cols {
		panic(fmt.Sprintf("cpu: requantize: weight has %d values, want %d x %d", len(w), q.Rows, q.Cols))
	}
	parallelRows(q.Rows, 4*q.Cols, func(lo, hi int) {
		if q.Dtype == BFloat16 && !q.goQuant {
			C.lowp_to_bf16((*C.float)(&w[lo*q.Cols]), (*C.uint16_t)(&q.BF[lo*q.Cols]), C.long((hi-lo)*q.Cols))
			return
		}
		if q.Dtype == Int8 && !q.goQuant {
			quantQ8C(BestLowpISA.tile(), w, q.Q, q.Scale, q.Cols, lo, hi)
			return
		}
		for r := lo; r < hi; r++ {
			row := w[r*q.Cols : (r+1)*q.Cols]
			if q.Dtype == BFloat16 {
				out := q.BF[r*q.Cols : (r+1)*q.Cols]
				for i, x := range row {
					out[i] = ToBF16(x)
				}
				continue
			}
			nb := q.blocks()
			for b := 0; b < nb; b++ {
				blk := row[b*LowpBlock : min((b+1)*LowpBlock, q.Cols)]
				var amax float32
				for _, x := range blk {
					amax = max(amax, float32(math.Abs(float64(x))))
				}
				d := amax / 127
				q.Scale[r*nb+b] = d
				inv := float32(0)
				if d > 0 {
					inv = 1 / d
				}
				out := q.Q[r*q.Cols+b*LowpBlock:]
				for i, x := range blk {
					out[i] = int8(math.RoundToEven(float64(x * inv)))
				}
			}
		}
	})
	if q.Packed != nil {
		parallelRows(q.outBlocks(), 32*q.Cols, func(lo, hi int) {
			C.lowp_bf16_pack((*C.uint16_t)(&q.BF[0]), (*C.uint16_t)(&q.Packed[0]), C.int(q.Rows), C.int(q.Cols), C.int(lo), C.int(hi))
		})
	}
	if q.QPacked != nil {
		parallelRows(q.outBlocks(), 16*q.Cols, func(lo, hi int) {
			C.lowp_q8_pack((*C.int8_t)(unsafe.Pointer(&q.Q[0])), (*C.float)(&q.Scale[0]), (*C.uint8_t)(&q.QPacked[0]),
				(*C.float)(&q.QPScale[0]), C.int(q.Rows), C.int(q.Cols), C.int(lo), C.int(hi))
		})
	}
}

// quantQ8C writes rows [lo, hi) of w [*, cols] as int8 blocks into q and
// scale with the C quantiser of isa (a tile ISA, see LowpISA.tile).
func quantQ8C(isa LowpISA, w []float32, q []int8, scale []float32, cols, lo, hi int) {
	C.lowp_quant_q8(C.int(isa), (*C.float)(&w[0]), (*C.int8_t)(unsafe.Pointer(&q[0])),
		(*C.float)(&scale[0]), C.int(cols), C.int(lo), C.int(hi))
}

// ToBF16 rounds x to bfloat16, nearest even (NaN stays NaN), as torch does.
func ToBF16(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// FromBF16 widens a bfloat16 to float32 (exact).
func FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Dequantize writes the copy back as fp32 [Rows*Cols] (for tests and error bounds).
func (q *LowpMatrix) Dequantize() []float32 {
	out := make([]float32, q.Rows*q.Cols)
	nb := q.blocks()
	for r := 0; r < q.Rows; r++ {
		for c := 0; c < q.Cols; c++ {
			i := r*q.Cols + c
			if q.Dtype == BFloat16 {
				out[i] = FromBF16(q.BF[i])
			} else {
				out[i] = float32(q.Q[i]) * q.Scale[r*nb+c/LowpBlock]
			}
		}
	}
	return out
}

// LowpISA names the instruction sets of the kernels.
type LowpISA int

const (
	ISAGeneric LowpISA = C.LOWP_ISA_GENERIC // portable C
	ISAAVX2    LowpISA = C.LOWP_ISA_AVX2    // AVX2 + FMA
	ISAAVX512  LowpISA = C.LOWP_ISA_AVX512  // AVX-512 F/BW/VL/DQ
	// ISAAVX512Dot adds the dot-product kernels the CPU has: bfloat16
	// (VDPBF16PS, AVX-512 BF16: HasBF16Dot) for BFloat16 copies, with the
	// activations rounded to bfloat16 too (as in torch's bfloat16 matmuls),
	// and int8 (VPDPBUSD, AVX-512 VNNI: HasQ8Dot) for Int8 copies, with the
	// activations quantised like the weights (Q8Activations). A dtype whose
	// instruction the CPU lacks uses the AVX-512 kernel.
	ISAAVX512Dot LowpISA = ISAAVX512 + 1
)

func (i LowpISA) String() string {
	return [...]string{"generic", "avx2", "avx512", "avx512-dot"}[i]
}

// tile is the ISA of the C tile kernels and quantisers (lowp_dispatch.c) at
// this level: the dot-product level runs the AVX-512 ones for everything
// its dot-product kernels do not cover.
func (i LowpISA) tile() LowpISA { return min(i, ISAAVX512) }

// HasBF16Dot and HasQ8Dot say whether this CPU runs the bfloat16 and int8
// dot-product kernels.
var (
	HasBF16Dot = C.lowp_bf16dot_supported() != 0
	HasQ8Dot   = C.lowp_q8dot_supported() != 0
)

// BestLowpISA is the widest kernel this CPU runs, chosen at start-up.
var BestLowpISA = bestLowpISA()

// AutoDtype is the generation weight type that `auto` (the default of
// actor_rollout_ref.rollout.dtype) picks on this CPU: bfloat16 where the
// reduced-precision kernels run at full width (AVX-512: the copy halves the
// weights streamed per decode step, and with AVX-512 BF16 its products run
// at twice the fp32 multiply rate), float32 elsewhere: with AVX2 only,
// bfloat16 decoding is about 10% slower than float32 (the widening costs what
// the smaller reads save; docs/compute.md).
func AutoDtype() Dtype { return autoDtype(BestLowpISA) }

func autoDtype(isa LowpISA) Dtype {
	if isa >= ISAAVX512 {
		return BFloat16
	}
	return Float32
}

func bestLowpISA() LowpISA {
	isa := LowpISA(C.lowp_best_isa())
	if isa == ISAAVX512 && (HasBF16Dot || HasQ8Dot) {
		return ISAAVX512Dot
	}
	return isa
}

// UsesDot says whether products of a dtype copy run on a dot-product
// kernel with the given ISA (and so round the activations too).
func UsesDot(isa LowpISA, dt Dtype) bool {
	return isa == ISAAVX512Dot && (dt == BFloat16 && HasBF16Dot || dt == Int8 && HasQ8Dot)
}

// LowpMatmul computes out [N, Rows] = inp [N, Cols] W^T + bias with the copy
// W, bias [Rows] or nil, in fp32 arithmetic on the widened weights, with the
// best kernel for the CPU, over GOMAXPROCS goroutines.
func LowpMatmul(out, inp []float32, w *LowpMatrix, bias []float32, N int) {
	LowpMatmulISA(BestLowpISA, out, inp, w, bias, N)
}

// LowpMatmulISA is LowpMatmul with a given kernel (tests compare them all).
func LowpMatmulISA(isa LowpISA, out, inp []float32, w *LowpMatrix, bias []float32, N int) {
	K, OC := w.Cols, w.Rows
	if N <= 0 {
		return
	}
	if len(inp) < N*K || len(out) < N*OC || (bias != nil && len(bias) < OC) {
		panic(fmt.Sprintf("cpu: lowp matmul: inp %d, out %d, bias %d values for N=%d, [%d,%d]", len(inp), len(out), len(bias), N, OC, K))
	}
	if isa > BestLowpISA {
		panic(fmt.Sprintf("cpu: lowp matmul: this CPU does not run the %v kernel", isa))
	}
	if UsesDot(isa, w.Dtype) {
		if w.Dtype == BFloat16 {
			bf16DotMatmul(out, inp, w, bias, N)
		} else {
			q8DotMatmul(out, inp, w, bias, N)
		}
		return
	}
	dtype := C.int(C.LOWP_BF16)
	var wb *C.uint16_t
	var wq *C.int8_t
	var sc *C.float
	switch w.Dtype {
	case BFloat16:
		wb = (*C.uint16_t)(unsafe.Pointer(&w.BF[0]))
	case Int8:
		dtype = C.LOWP_Q8
		wq = (*C.int8_t)(unsafe.Pointer(&w.Q[0]))
		sc = (*C.float)(&w.Scale[0])
	default:
		panic("cpu: lowp matmul: matrix has no reduced-precision copy")
	}
	lowpRun(isa.tile(), dtype, out, inp, nil, wb, wq, sc, bias, N, K, OC)
}

// lowpRun runs the C kernel of isa over the output rows, split between
// GOMAXPROCS threads of the C pool (pool.c) in whole groups of 4 rows when
// the product is large enough.
func lowpRun(isa LowpISA, dtype C.int, out, inp []float32, wf *C.float, wb *C.uint16_t, wq *C.int8_t, sc *C.float,
	bias []float32, N, K, OC int) {
	parts := poolParts(N, K, OC, (OC+3)/4)
	C.lowp_matmul_mt(C.int(parts), C.int(isa), dtype, (*C.float)(&out[0]), (*C.float)(&inp[0]), wf, wb, wq, sc, cBias(bias),
		C.int(N), C.int(K), C.int(OC))
}

// poolParts is how many parts of the C pool a product [N,K] x [K,OC] is split into: one per
// thread (GOMAXPROCS) when it is large enough, at most units (the kernel's whole tiles).
func poolParts(N, K, OC, units int) int {
	parts := runtime.GOMAXPROCS(0)
	if OC*K*max(N, 4) < 1<<17 {
		parts = 1
	}
	return min(parts, units)
}

// cBias is bias for C: nil when there is none.
func cBias(bias []float32) *C.float {
	if bias == nil {
		return nil
	}
	return (*C.float)(&bias[0])
}

// SmallMatmulMaxN is the most rows of activations for which MatmulForward
// uses the small-batch kernel (fp32 weights read in place) instead of sgemm.
const SmallMatmulMaxN = 32

// DecodeMatmul is MatmulForward for generation. On AVX-512 CPUs it runs the
// small-batch kernel for every N (prefill included), so that a row's result
// does not depend on the other rows of its batch (sampling with a fixed seed
// gives the same tokens whatever the batching). On AVX2 CPUs the kernel's
// AVX2 tiles take up to SmallMatmulMaxN rows (decode steps: 9% more tokens/s
// than sgemm at batch 16, docs/compute.md) and sgemm the longer prefills,
// which it computes faster; there a row's result depends on its batch when
// the batch crosses SmallMatmulMaxN rows. Elsewhere MatmulForward.
func DecodeMatmul(out, inp, weight, bias []float32, N, K, OC int) {
	if N <= 0 {
		return
	}
	if BestLowpISA < ISAAVX2 || (BestLowpISA < ISAAVX512 && N > SmallMatmulMaxN) {
		Backend{}.MatmulForward(out, inp, weight, bias, N, K, OC)
		return
	}
	if len(inp) < N*K || len(out) < N*OC || len(weight) < OC*K || (bias != nil && len(bias) < OC) {
		panic(fmt.Sprintf("cpu: decode matmul: inp %d, out %d, weight %d, bias %d values for N=%d, K=%d, OC=%d",
			len(inp), len(out), len(weight), len(bias), N, K, OC))
	}
	smallMatmul(BestLowpISA, out, inp, weight, bias, N, K, OC)
}

// smallMatmul is out [N,OC] = inp [N,K] weight^T + bias with the weights
// [OC,K] read in place by the small-batch kernel: for the few rows of a
// decode step, where sgemm's packing of the weights costs more than the
// product.
func smallMatmul(isa LowpISA, out, inp, weight, bias []float32, N, K, OC int) {
	lowpRun(isa.tile(), C.LOWP_F32, out, inp, (*C.float)(&weight[0]), nil, nil, nil, bias, N, K, OC)
}

// splitOut runs run(lo, hi) over ranges of [0, n) in whole tiles of width,
// one range per worker (GOMAXPROCS), or all of it at once when the work is
// small.
func splitOut(n, width, work int, run func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if work < 1<<17 {
		workers = 1
	}
	tiles := (n + width - 1) / width
	workers = min(workers, tiles)
	if workers <= 1 {
		run(0, n)
		return
	}
	var wg sync.WaitGroup
	per := (tiles + workers - 1) / workers
	for t := per; t < tiles; t += per {
		lo, hi := width*t, min(width*(t+per), n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(lo, hi)
		}()
	}
	run(0, min(width*per, n)) // the first range on the calling goroutine
	wg.Wait()
}

var pairBufs sync.Pool

// bf16DotMatmul is LowpMatmul on the bfloat16 dot-product kernel: the
// activations are rounded to bfloat16 pairs once, then the output blocks of
// 16 are spread over the workers.
func bf16DotMatmul(out, inp []float32, w *LowpMatrix, bias []float32, N int) {
	if w.Packed == nil {
		panic("cpu: lowp matmul: bfloat16 copy has no packed layout (built on a CPU without AVX-512 BF16?)")
	}
	K, OC, K2 := w.Cols, w.Rows, w.pairs()
	bp, _ := pairBufs.Get().(*[]uint32)
	if bp == nil || len(*bp) < N*K2 {
		b := make([]uint32, N*K2)
		bp = &b
	}
	defer pairBufs.Put(bp)
	xb := *bp
	C.lowp_bf16_pairs((*C.float)(&inp[0]), (*C.uint32_t)(&xb[0]), C.int(N), C.int(K))
	cb := cBias(bias)
	run := func(lo, hi int) {
		C.lowp_bf16dot_matmul((*C.float)(&out[0]), (*C.uint32_t)(&xb[0]), (*C.uint16_t)(&w.Packed[0]), cb,
			C.int(N), C.int(K), C.int(OC), C.int(lo), C.int(hi))
	}
	splitOut(w.outBlocks(), 3, OC*K*max(N, 4), run) // whole tiles of 3 blocks (the kernel's width)
}

// q8Acts is the scratch of q8DotMatmul: an activation matrix quantised in
// blocks (Q8Activations' layout).
type q8Acts struct {
	q     []int8
	scale []float32
	off   []int32
}

var q8ActBufs sync.Pool

// quantize fills a with x [N,K] (the C quantiser, lowp_q8_acts).
func (a *q8Acts) quantize(x []float32, N, K int) {
	C.lowp_q8_acts((*C.float)(&x[0]), (*C.int8_t)(unsafe.Pointer(&a.q[0])), (*C.float)(&a.scale[0]),
		(*C.int32_t)(&a.off[0]), C.int(N), C.int(K))
}

// q8DotMatmul is LowpMatmul on the int8 dot-product kernel: the activations
// are quantised once, then the output blocks of 16 are spread over the C
// thread pool.
func q8DotMatmul(out, inp []float32, w *LowpMatrix, bias []float32, N int) {
	if w.QPacked == nil {
		panic("cpu: lowp matmul: int8 copy has no packed layout (built on a CPU without AVX-512 VNNI?)")
	}
	K, OC, NB := w.Cols, w.Rows, w.blocks()
	a, _ := q8ActBufs.Get().(*q8Acts)
	if a == nil || len(a.scale) < N*NB {
		a = &q8Acts{q: make([]int8, N*NB*LowpBlock), scale: make([]float32, N*NB), off: make([]int32, N*NB)}
	}
	defer q8ActBufs.Put(a)
	a.quantize(inp, N, K)
	parts := poolParts(N, K, OC, (w.outBlocks()+2)/3) // whole tiles of 3 blocks (the kernel's width)
	C.lowp_q8dot_matmul_mt(C.int(parts), (*C.float)(&out[0]), (*C.int8_t)(unsafe.Pointer(&a.q[0])),
		(*C.float)(&a.scale[0]), (*C.int32_t)(&a.off[0]), (*C.uint8_t)(&w.QPacked[0]), (*C.float)(&w.QPScale[0]),
		cBias(bias), C.int(N), C.int(K), C.int(OC))
}

// Q8Activations quantises x [N,K] as the int8 dot-product kernel does, per
// row in blocks of LowpBlock: q [N, ceil(K/32)*32] = nearest-even(x / d)
// (zero past K) with d = absmax/127 per block in scale [N, ceil(K/32)]. It
// is the reference the C quantiser is tested against.
func Q8Activations(x []float32, N, K int) (q []int8, scale []float32) {
	nb := (K + LowpBlock - 1) / LowpBlock
	q, scale = make([]int8, N*nb*LowpBlock), make([]float32, N*nb)
	for n := 0; n < N; n++ {
		for b := 0; b < nb; b++ {
			blk := x[n*K+b*LowpBlock : n*K+min((b+1)*LowpBlock, K)]
			var amax float32
			for _, v := range blk {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			inv := float32(0)
			if d > 0 {
				inv = 1 / d
			}
			scale[n*nb+b] = d
			for i, v := range blk {
				q[n*nb*LowpBlock+b*LowpBlock+i] = int8(math.RoundToEven(float64(v * inv)))
			}
		}
	}
	return q, scale
}
