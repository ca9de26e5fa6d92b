package cuda

// Mixed precision (Precision BF16): bfloat16 operands for cuBLAS's tensor
// cores, made on the device by the f32_to_bf16 kernel (kernels/bf16.cuh).
// CPU reference: bf16Round (precision.go); the checks are in bf16_check.go.
//
// A weight tensor (a tensor of the backend passed as a product's weight)
// gets a resident bfloat16 copy of the whole tensor the first time, made on
// the device. Every op that writes the tensor (AdamW, Upload, Copy, Zero,
// Scale, ...: every output operand staged through the arena, and Upload)
// marks the copy stale, and the next product that reads it converts the
// tensor again before it runs, on the device: after an optimizer step, one
// conversion of the parameters per step; during generation, none. Nothing
// crosses between host and device for it. A weight that is a host slice is
// staged and rounded for that product alone. Activations and output
// gradients are rounded into the op's staging arena for each product.

import (
	"fmt"
	"slices"
	"unsafe"
)

// bf16Copy is the resident bfloat16 copy of the fp32 tensor at src.
type bf16Copy struct {
	src   dptr
	n     int64 // floats of the tensor (its whole allocation)
	p     dptr  // its copy, n bfloat16s
	stale bool  // src was written since p was made
}

// wrote records that an op writes (part of) the tensor starting at t.
func (d *device) wrote(t dptr) {
	if d.plantBF16 == "stale" {
		return // planted bug: copies never refreshed
	}
	for i := range d.bf16 {
		if d.bf16[i].src == t {
			d.bf16[i].stale = true
		}
	}
}

// dropBF16 frees the copy of the tensor at t (which is being freed).
func (d *device) dropBF16(t dptr) {
	i := slices.IndexFunc(d.bf16, func(c bf16Copy) bool { return c.src == t })
	if i < 0 {
		return
	}
	c := d.bf16[i]
	d.bf16 = slices.Delete(d.bf16, i, i+1)
	d.release(c.p)
}

// toBF16 rounds the n floats at x into the arena and returns them.
func (d *device) toBF16(a *arena, x dptr, n int) dptr {
	if n == 0 {
		return 0
	}
	q := a.alloc(int64(n) * 2)
	d.launch("f32_to_bf16", gridFor(n), ptr(q), ptr(x), i64(n))
	return q
}

// weightBF16 returns the bfloat16 version of the weight w [n]: its place in
// the resident copy of w's tensor (made, or refreshed when stale, first),
// or for a host slice a rounded copy in the arena.
func (d *device) weightBF16(a *arena, w []float32, n int) dptr {
	pw := a.in(w, n)
	if pw == 0 {
		return 0
	}
	_, t := d.mem.find(unsafe.Pointer(&w[0]), int64(n)*4)
	if t == nil {
		return d.toBF16(a, pw, n)
	}
	src, floats, name := t.p, t.bytes/4, t.name // t points into d.mem.live, which alloc may move
	i := slices.IndexFunc(d.bf16, func(c bf16Copy) bool { return c.src == src })
	if i < 0 {
		p := d.alloc("bfloat16 copy of "+name, floats*2)
		d.bf16 = append(d.bf16, bf16Copy{src: src, n: floats, p: p, stale: true})
		i = len(d.bf16) - 1
	}
	c := &d.bf16[i]
	if c.stale {
		d.launch("f32_to_bf16", gridFor(int(c.n)), ptr(c.p), ptr(src), i64(int(c.n)))
		c.stale = false
	}
	off := dptr(2 * ((pw - src) / 4))
	if d.plantBF16 == "offset" {
		off = 0 // planted bug: the view's offset in its tensor ignored
	}
	return c.p + off
}

// gemm is row-major C [M,N] = op(A) op(B) + beta C in the backend's
// precision, for the ops: A, B fp32 operands on the device, Ab, Bb their
// bfloat16 versions (used, and needed, only in BF16).
func (d *device) gemm(transA, transB bool, M, N, K int, A, Ab dptr, lda int, B, Bb dptr, ldb int,
	beta float32, C dptr, ldc int) {
	switch d.prec {
	case BF16:
		d.blas.gemmExRM(transA, transB, M, N, K, 1, Ab, R16BF, lda, Bb, R16BF, ldb, beta, C, R32F, ldc, Compute32F)
	case TF32:
		d.blas.gemmExRM(transA, transB, M, N, K, 1, A, R32F, lda, B, R32F, ldb, beta, C, R32F, ldc, Compute32FTF32)
	default:
		d.blas.sgemmRM(transA, transB, M, N, K, 1, A, lda, B, ldb, beta, C, ldc)
	}
}

// ToBF16 rounds x to bfloat16 on the device (the f32_to_bf16 kernel):
// out [len(x)] gets the bits. For the checks.
func (b *Backend) ToBF16(out []uint16, x []float32) {
	n := len(x)
	if n == 0 {
		return
	}
	if len(out) < n {
		panic(&Error{"ToBF16", fmt.Errorf("%d outputs for %d inputs", len(out), n)})
	}
	b.d.run("ToBF16", func(a *arena) {
		po := a.stage(unsafe.Pointer(&out[0]), int64(n)*2, false, true)
		b.d.launch("f32_to_bf16", gridFor(n), ptr(po), ptr(a.in(x, n)), i64(n))
	})
}

// GemmBF16 is Sgemm with A and B rounded to bfloat16 on the device and
// multiplied by cublasGemmEx (CUDA_R_16BF operands, fp32 accumulation and
// output).
func (b *Backend) GemmBF16(transA, transB bool, M, N, K int, alpha float32, A []float32, lda int,
	B []float32, ldb int, beta float32, C []float32, ldc int) {
	b.d.run("GemmBF16", func(a *arena) {
		na, nb := extent(transA, M, K, lda), extent(!transB, N, K, ldb)
		pa := b.d.toBF16(a, a.in(A, na), na)
		pb := b.d.toBF16(a, a.in(B, nb), nb)
		pc := a.f32(C, extent(false, M, N, ldc), beta != 0 || ldc != N, true)
		b.d.blas.gemmExRM(transA, transB, M, N, K, alpha, pa, R16BF, lda, pb, R16BF, ldb, beta, pc, R32F, ldc, Compute32F)
	})
}

// GemmStridedBatchedBF16 is GemmBF16 over count products whose operands
// start strideA, strideB, strideC elements apart
// (cublasGemmStridedBatchedEx).
func (b *Backend) GemmStridedBatchedBF16(transA, transB bool, M, N, K int, alpha float32, A []float32, lda, strideA int,
	B []float32, ldb, strideB int, beta float32, C []float32, ldc, strideC, count int) {
	if count <= 0 {
		return
	}
	last := count - 1
	b.d.run("GemmStridedBatchedBF16", func(a *arena) {
		na, nb := last*strideA+extent(transA, M, K, lda), last*strideB+extent(!transB, N, K, ldb)
		pa := b.d.toBF16(a, a.in(A, na), na)
		pb := b.d.toBF16(a, a.in(B, nb), nb)
		pc := a.f32(C, last*strideC+extent(false, M, N, ldc), true, true)
		b.d.blas.gemmStridedBatchedExRM(transA, transB, M, N, K, alpha, pa, R16BF, lda, strideA, pb, R16BF, ldb, strideB,
			beta, pc, R32F, ldc, strideC, count, Compute32F)
	})
}
