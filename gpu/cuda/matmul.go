package cuda

// Matrix products: cuBLAS through the row-major mapping of blas.go, plus the bias kernels of kernels/matmul.cuh.
// CPU reference: gpu/cpu; the checks are in matmul_check.go.

// span of a row-major operand op(X) [R,K] stored with row stride ld.
func extent(trans bool, R, K, ld int) int {
	if R == 0 || K == 0 {
		return 0
	}
	if trans {
		return (K-1)*ld + R
	}
	return (R-1)*ld + K
}

// Sgemm is row-major C = alpha op(A) op(B) + beta C through cublasSgemm.
func (b *Backend) Sgemm(transA, transB bool, M, N, K int, alpha float32, A []float32, lda int,
	B []float32, ldb int, beta float32, C []float32, ldc int) {
	b.d.run("Sgemm", func(a *arena) {
		pa := a.in(A, extent(transA, M, K, lda))
		pb := a.in(B, extent(!transB, N, K, ldb))
		// C is read when beta != 0, and when it has gaps between rows
		// (ldc > N), which must come back unchanged.
		pc := a.f32(C, extent(false, M, N, ldc), beta != 0 || ldc != N, true)
		b.d.blas.sgemmRM(transA, transB, M, N, K, alpha, pa, lda, pb, ldb, beta, pc, ldc)
	})
}

// SgemmStridedBatched is Sgemm over count products whose operands start
// strideA, strideB, strideC floats apart (cublasSgemmStridedBatched).
func (b *Backend) SgemmStridedBatched(transA, transB bool, M, N, K int, alpha float32, A []float32, lda, strideA int,
	B []float32, ldb, strideB int, beta float32, C []float32, ldc, strideC, count int) {
	if count <= 0 {
		return
	}
	last := count - 1
	b.d.run("SgemmStridedBatched", func(a *arena) {
		pa := a.in(A, last*strideA+extent(transA, M, K, lda))
		pb := a.in(B, last*strideB+extent(!transB, N, K, ldb))
		pc := a.f32(C, last*strideC+extent(false, M, N, ldc), true, true)
		b.d.blas.sgemmStridedBatchedRM(transA, transB, M, N, K, alpha, pa, lda, strideA, pb, ldb, strideB,
			beta, pc, ldc, strideC, count)
	})
}

// GemmEx is Sgemm on fp32 operands with a compute type of the caller's
// choice (cublasGemmEx), e.g. Compute32FTF32 for tensor cores.
func (b *Backend) GemmEx(transA, transB bool, M, N, K int, alpha float32, A []float32, lda int,
	B []float32, ldb int, beta float32, C []float32, ldc int, compute ComputeType) {
	b.d.run("GemmEx", func(a *arena) {
		pa := a.in(A, extent(transA, M, K, lda))
		pb := a.in(B, extent(!transB, N, K, ldb))
		pc := a.f32(C, extent(false, M, N, ldc), beta != 0 || ldc != N, true)
		b.d.blas.gemmExRM(transA, transB, M, N, K, alpha, pa, R32F, lda, pb, R32F, ldb, beta, pc, R32F, ldc, compute)
	})
}

// MatmulForward: out [N,OC] = inp [N,C] weight^T + bias, the product in
// the backend's precision (SetPrecision; bf16.go), the bias in fp32. In
// BF16 inp's bfloat16 copy is the shared activation copy (bf16.go), so
// products that read the same unchanged inp in turn convert it once.
func (b *Backend) MatmulForward(out, inp, weight, bias []float32, N, C, OC int) {
	d := b.d
	d.run("MatmulForward", func(a *arena) {
		po, pi, pw := a.out(out, N*OC), a.in(inp, N*C), a.in(weight, OC*C)
		var pib, pwb dptr
		if d.prec == BF16 {
			pib, pwb = d.activationBF16(a, inp, pi, N*C), d.weightBF16(a, weight, OC*C)
		}
		d.gemm(false, true, N, OC, C, pi, pib, C, pw, pwb, C, 0, po, OC)
		if bias != nil {
			d.launch("add_bias", gridFor(N*OC), ptr(po), ptr(a.in(bias, OC)), i64(N), i64(OC))
		}
	})
}

// plantMatmulOverwrite makes MatmulBackward overwrite dinp where it should
// accumulate into it (beta 0 for beta 1): a planted bug for the checks
// (matmul_emu_test.go), never set otherwise.
var plantMatmulOverwrite bool

// MatmulBackward: dinp = dout weight (with accumulate dinp += dout weight:
// the product's beta 1, so in BF16 and TF32 too the sum is fp32); dweight
// += dout^T inp; dbias += column sums. The products in the backend's
// precision (in BF16 dout, inp and weight rounded; dinp and dweight fp32;
// dout once for both products, from the gradient copy its producer wrote
// or into the staging arena, inp through the shared activation copy), the
// bias gradient in fp32 from the fp32 dout.
func (b *Backend) MatmulBackward(dinp, dweight, dbias []float32, dout, inp, weight []float32, N, C, OC int, accumulate bool) {
	d := b.d
	d.run("MatmulBackward", func(a *arena) {
		pd := a.in(dout, N*OC)
		var pdb dptr
		if d.prec == BF16 && (dinp != nil || dweight != nil) {
			pdb = d.gradientBF16(a, pd, N*OC)
		}
		if dinp != nil {
			pw := a.in(weight, OC*C)
			var pwb dptr
			if d.prec == BF16 {
				pwb = d.weightBF16(a, weight, OC*C)
			}
			var pdi dptr
			var beta float32
			switch {
			case !accumulate:
				pdi = a.out(dinp, N*C)
			case plantMatmulOverwrite:
				pdi = a.inout(dinp, N*C) // beta stays 0
			default:
				pdi, beta = a.inout(dinp, N*C), 1
			}
			d.gemm(false, false, N, C, OC, pd, pdb, OC, pw, pwb, C, beta, pdi, C)
		}
		if dweight != nil {
			pi := a.in(inp, N*C)
			var pib dptr
			if d.prec == BF16 {
				pib = d.activationBF16(a, inp, pi, N*C)
			}
			d.gemm(true, false, OC, C, N, pd, pdb, OC, pi, pib, C, 1, a.inout(dweight, OC*C), C)
		}
		if dbias != nil {
			d.colsums(a, "bias_backward", a.inout(dbias, OC), N, OC, ptr(pd), i64(N), i64(OC))
		}
	})
}
