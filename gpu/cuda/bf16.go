package cuda

// Mixed precision (Precision BF16): bfloat16 operands for cuBLAS's tensor
// cores, made on the device by the f32_to_bf16 kernel (kernels/bf16.cuh)
// or written by the kernel that produces the operand, beside its fp32
// output. CPU reference: round.BF16 (gpu/cuda/internal/round); the checks
// are in bf16_check.go.
//
// A weight tensor (a tensor of the backend passed as a product's weight)
// gets a resident bfloat16 copy of the whole tensor the first time, made on
// the device. Every op that writes the tensor (AdamW, Upload, Copy, Zero,
// Scale, ...: every output operand staged through the arena, and Upload)
// marks the copy stale, and the next product that reads it converts the
// tensor again before it runs, on the device. AdamW is the exception that
// matters: it writes the copy of the parameters it updates in the same
// kernel (paramsBF16), so a copy that was current before the step is
// current after it, and a training step converts no parameters; during
// generation none are converted either. Nothing crosses between host and
// device for it. A weight that is a host slice is staged and rounded for
// that product alone.
//
// An activation operand (the input of MatmulForward and MatmulBackward)
// that lies in a tensor of the backend is converted into one shared copy,
// kept after the op: the next product that reads the same floats (the same
// address and length) while the copy is valid uses it as it is, so q, k
// and v convert their common normed input once, gate and up theirs once,
// and the LM head's backward reuses its forward's. The ops that produce
// those inputs (RMSNormForward, ResidualRMSNormForward, SwiGLUForward,
// SwiGLUBackwardH's h) write the copy of their output in the same kernel
// instead (outputBF16), and the products that read it convert nothing. The copy
// is valid from its conversion (or from the end of the op that wrote it)
// until the first of: an op writes its tensor (the same marks as the
// weights' copies: each output staged with back, when the op starts and
// again when it ends, and Upload), the tensor is freed (its memory may
// become another tensor), another operand is converted or produced into
// the copy, Close. Host slices are rounded into the op's staging arena as
// before. The copy holds 2 bytes per float of the largest operand
// converted into it, in a buffer that grows and never shrinks.
//
// An output gradient (MatmulBackward's dout, read by its two products) is
// read from a gradient copy where the op that produced it wrote one
// (gradBF16: LogprobBackward's dlogits, the norms' backward dres,
// SwiGLUBackward's and SwiGLUBackwardH's dgate and dup, RopeQKBackward's
// dq and dk, the second of each pair into the second gradient copy),
// under the same rules as
// the activation copy; otherwise (dv, a host slice) it is rounded into
// the op's staging arena.
//
// A copy an op's kernel writes is made valid only when the op ends
// (arena.endWrites, after the marks of its writes), and only if the op
// wrote the tensor through that one output: an op that also writes
// another operand in the same tensor leaves the copy invalid (stale).

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
	kept  bool  // an op's kernel (AdamW) kept it current, and no product has read it since
}

// bf16Of is the index in d.bf16 of the resident copy of the weight tensor
// at src, or -1.
func (d *device) bf16Of(src dptr) int {
	return slices.IndexFunc(d.bf16, func(c bf16Copy) bool { return c.src == src })
}

// shared are the shared copies: the activation copy and the gradient
// copies.
func (d *device) shared() [3]*actCopy { return [3]*actCopy{&d.act, &d.grad[0], &d.grad[1]} }

// wrote records that an op writes (part of) the tensor starting at t.
func (d *device) wrote(t dptr) {
	for _, c := range d.shared() {
		if c.tensor == t && d.plantBF16 != "actstale" { // planted bug: the shared copies kept
			c.valid = false
		}
	}
	if d.plantBF16 == "stale" {
		return // planted bug: copies never refreshed
	}
	for i := range d.bf16 {
		if d.bf16[i].src == t {
			d.bf16[i].stale = true
		}
	}
}

// dropBF16 frees the copy of the tensor at t (which is being freed), and
// invalidates a shared copy made from t.
func (d *device) dropBF16(t dptr) {
	for _, c := range d.shared() {
		if c.tensor == t && d.plantBF16 != "actfree" { // planted bug: kept after a free
			c.valid = false
		}
	}
	i := d.bf16Of(t)
	if i < 0 {
		return
	}
	c := d.bf16[i]
	d.bf16 = slices.Delete(d.bf16, i, i+1)
	d.release(c.p)
}

// convCounts count the f32_to_bf16 launches the products and the bf16
// ops queued, the floats they converted (each read as 4 bytes and written
// as 2), the products that used a copy they did not convert (the shared
// activation copy, converted by an earlier product or written by the op
// that produced the operand, and a weight copy AdamW kept current: each
// is one conversion fewer), and the floats of the copies that producing
// kernels wrote beside their outputs (2 bytes each, no read).
type convCounts struct {
	launches, floats, shared, produced int64
}

// bytes is the device memory traffic of the conversions and the copies
// the producers wrote: 6 bytes per float converted, 2 per float produced.
func (c convCounts) bytes() int64 { return 6*c.floats + 2*c.produced }

// produced is a bfloat16 copy that an op's kernel writes beside its
// output: a shared copy (into, the activation copy or a gradient copy) of
// the n floats at src (in the tensor at tensor), or (into nil) the
// resident copy of the weight tensor at tensor. The op's end makes it
// valid (producedValid).
type produced struct {
	tensor, src dptr
	n           int
	into        *actCopy
}

// producedValid makes the copy an op's kernel wrote valid, once the op's
// writes have been marked (arena.endWrites): only if the op wrote its
// tensor through that one output (writes holds each output staged, so
// another output in the same tensor, whose bytes the copy does not follow,
// leaves the copy as the marks left it: invalid, stale).
func (d *device) producedValid(p produced, writes []dptr) {
	if n := countOf(writes, p.tensor); n != 1 && d.plantBF16 != "anywrites" { // planted bug: the rule left out
		return
	}
	if c := p.into; c != nil {
		c.tensor, c.src, c.n, c.valid = p.tensor, p.src, p.n, true
		d.conv.produced += int64(p.n)
		return
	}
	if i := d.bf16Of(p.tensor); i >= 0 {
		d.bf16[i].stale, d.bf16[i].kept = false, true
		d.conv.produced += int64(p.n)
	}
}

func countOf(xs []dptr, x dptr) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// outputBF16 returns where the op's kernel writes the bfloat16 copy of
// its output out [n] (at po; the op writes all of it): the shared
// activation copy's buffer, which becomes the valid copy of those floats
// when the op ends, so that the products that read out next as their
// input convert nothing. It returns 0 (the kernel writes no copy) outside
// BF16, for a host slice, while unsharedBF16 is set, and when the buffer
// cannot grow.
func (d *device) outputBF16(a *arena, out []float32, po dptr, n int) dptr {
	return d.produce(a, &d.act, out, po, n)
}

// gradBF16 is outputBF16 for an output gradient that products read next
// as their dout (MatmulBackward): the copy goes to gradient copy i (0, or
// 1 for an op's second such output).
func (d *device) gradBF16(a *arena, i int, out []float32, po dptr, n int) dptr {
	return d.produce(a, &d.grad[i], out, po, n)
}

func (d *device) produce(a *arena, c *actCopy, out []float32, po dptr, n int) dptr {
	if d.prec != BF16 || d.unsharedBF16 || n == 0 || po == 0 {
		return 0
	}
	_, t := d.mem.find(unsafe.Pointer(&out[0]), int64(n)*4)
	if t == nil {
		return 0
	}
	tensor := t.p
	c.valid = false // the kernel overwrites the buffer
	if !d.grow(c, n) {
		return 0
	}
	a.produced = append(a.produced, produced{tensor: tensor, src: po, n: n, into: c})
	if d.plantBF16 == "prodskip" {
		return 0 // planted bug: the kernel writes no copy, which is made valid all the same
	}
	return c.p
}

// paramsBF16 returns where AdamW writes the bfloat16 copy of the
// parameters params [n] it updates: their place in the resident copy of
// their tensor, which the op's end leaves current. Call it before staging
// params (staging marks the copy stale). It returns 0 (no copy written)
// when the tensor has no copy (no product has read it as a weight), when
// the copy is stale already (the next product converts the whole tensor,
// as before), and while unsharedBF16 is set.
func (d *device) paramsBF16(a *arena, params []float32, n int) dptr {
	if d.unsharedBF16 || n == 0 {
		return 0
	}
	pp, t := d.mem.find(unsafe.Pointer(&params[0]), int64(n)*4)
	if t == nil {
		return 0
	}
	src := t.p
	i := d.bf16Of(src)
	if i < 0 || d.bf16[i].stale {
		return 0
	}
	a.produced = append(a.produced, produced{tensor: src, src: pp, n: n})
	if d.plantBF16 == "prodskip" {
		return 0 // planted bug: the kernel writes no copy, which is left current all the same
	}
	return d.bf16[i].p + dptr(2*((pp-src)/4))
}

// convert queues q [n] = bf16(x [n]), counted.
func (d *device) convert(q, x dptr, n int) {
	d.conv.launches++
	d.conv.floats += int64(n)
	d.launch("f32_to_bf16", gridFor(n), ptr(q), ptr(x), i64(n))
}

// toBF16 rounds the n floats at x into the arena and returns them.
func (d *device) toBF16(a *arena, x dptr, n int) dptr {
	if n == 0 {
		return 0
	}
	q := a.alloc(int64(n) * 2)
	d.convert(q, x, n)
	return q
}

// actCopy is the shared bfloat16 copy of an activation operand: the n
// floats at src, in the live tensor that starts at tensor, while valid.
type actCopy struct {
	tensor, src dptr
	n           int
	valid       bool
	p           dptr  // the copy's buffer, of bytes (0: none yet)
	bytes       int64 // its size
}

// activationBF16 returns the bfloat16 version of the activation operand x
// [n], on the device at px: the shared copy if it holds those floats and is
// valid, else a new conversion into it (the buffer grown first if too
// small). A host slice, and any operand while unsharedBF16 is set or when
// the buffer cannot grow, is rounded into the arena for this product alone.
func (d *device) activationBF16(a *arena, x []float32, px dptr, n int) dptr {
	if n == 0 {
		return 0
	}
	_, t := d.mem.find(unsafe.Pointer(&x[0]), int64(n)*4)
	if t == nil || d.unsharedBF16 {
		return d.toBF16(a, px, n)
	}
	c := &d.act
	if c.valid && c.src == px && c.n == n {
		d.conv.shared++
		if d.checkShared {
			d.verifyShared(a)
		}
		return c.p
	}
	c.valid = false
	if !d.grow(c, n) { // no room to keep it: this product's own copy, in the arena
		return d.toBF16(a, px, n)
	}
	d.convert(c.p, px, n)
	c.tensor, c.src, c.n, c.valid = t.p, px, n, true
	return c.p
}

// grow makes the buffer of the shared copy c hold n bfloat16s (growing
// it, after a synchronisation, if it is smaller); false if the device has
// no room for it.
func (d *device) grow(c *actCopy, n int) bool {
	if bytes := (int64(n)*2 + 255) &^ 255; bytes > c.bytes {
		if c.p != 0 {
			// queued products may still read the old buffer
			if err := d.sync(); err != nil {
				panic(&Error{"", err})
			}
			if err := d.drv.free(c.p); err != nil {
				panic(&Error{"", err})
			}
			c.p, c.bytes = 0, 0
		}
		what := "bfloat16 copy of an activation"
		if c != &d.act {
			what = "bfloat16 copy of an output gradient"
		}
		p, err := d.malloc(what, bytes)
		if err != nil {
			return false
		}
		c.p, c.bytes = p, bytes
	}
	return true
}

// gradientBF16 returns the bfloat16 version of the output gradient dout
// [n], on the device at pd, for MatmulBackward's two products: a gradient
// copy that the op producing dout wrote (gradBF16), if one holds those
// floats and is valid, else a conversion into the arena for this op.
func (d *device) gradientBF16(a *arena, pd dptr, n int) dptr {
	if n == 0 {
		return 0
	}
	if !d.unsharedBF16 {
		for i := range d.grad {
			if c := &d.grad[i]; c.valid && c.src == pd && c.n == n {
				d.conv.shared++
				if d.checkShared {
					d.verifyCopy(a, c.p, c.src, c.n, "the output gradient")
				}
				return c.p
			}
		}
	}
	return d.toBF16(a, pd, n)
}

// verifyShared converts the shared copy's operand again and compares the
// two bit for bit (checkShared): a difference is a stale copy.
func (d *device) verifyShared(a *arena) {
	c := d.act
	d.verifyCopy(a, c.p, c.src, c.n, "the activation")
}

// verifyCopy converts the n floats at src again and compares them with
// the bfloat16 copy kept at p, bit for bit (checkShared); a difference is
// a stale copy of what.
func (d *device) verifyCopy(a *arena, p, src dptr, n int, what string) {
	q := a.alloc(int64(n) * 2)
	d.launch("f32_to_bf16", gridFor(n), ptr(q), ptr(src), i64(n))
	kept, fresh := make([]uint16, n), make([]uint16, n)
	if err := d.dtoh(unsafe.Pointer(&kept[0]), p, int64(n)*2); err != nil {
		panic(&Error{"", err})
	}
	if err := d.dtoh(unsafe.Pointer(&fresh[0]), q, int64(n)*2); err != nil {
		panic(&Error{"", err})
	}
	if i := slices.Compare(kept, fresh); i != 0 {
		j := 0
		for kept[j] == fresh[j] {
			j++
		}
		panic(&Error{"", fmt.Errorf("stale bfloat16 copy of %s at %#x (%d floats): element %d is %#04x, converted again %#04x",
			what, src, n, j, kept[j], fresh[j])})
	}
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
	i := d.bf16Of(src)
	if i < 0 {
		p := d.alloc("bfloat16 copy of "+name, floats*2)
		d.bf16 = append(d.bf16, bf16Copy{src: src, n: floats, p: p, stale: true})
		i = len(d.bf16) - 1
	}
	c := &d.bf16[i]
	switch {
	case c.stale:
		d.convert(c.p, src, int(c.n))
		c.stale, c.kept = false, false
	case c.kept: // AdamW wrote it: a conversion fewer
		d.conv.shared++
		c.kept = false
		if d.checkShared {
			d.verifyCopy(a, c.p, src, int(c.n), "the weight tensor "+name)
		}
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
		b.d.convert(po, a.in(x, n), n)
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
