package cuda

// rowMajor maps the ROW-MAJOR products of gpu.Backend onto column-major
// cuBLAS: row-major C = op(A) op(B) is, read column-major, C^T = op(B)^T
// op(A)^T, so the operands and M, N swap places and the leading dimensions
// are the row strides. Failures panic with an *Error (ops return no errors).
//
// d, when set, times each call as its launches (Counters.EnqueueTime).
type rowMajor struct {
	api colMajorBlas
	d   *device
}

// start is d.enqStart: the clock before a call, 0 when it is not timed.
func (r rowMajor) start() int64 {
	if r.d == nil {
		return 0
	}
	return r.d.enqStart()
}

// timed is err after d.enqEnd(t).
func (r rowMajor) timed(t int64, err error) error {
	if r.d != nil {
		r.d.enqEnd(t)
	}
	return err
}

// sgemmRM: C [M,N] = alpha op(A) op(B) + beta C, device pointers, row strides lda, ldb, ldc.
func (r rowMajor) sgemmRM(transA, transB bool, M, N, K int, alpha float32, A dptr, lda int,
	B dptr, ldb int, beta float32, C dptr, ldc int) {
	t := r.start()
	must(r.timed(t, r.api.sgemm(transB, transA, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc)))
}

// sgemmStridedBatchedRM is sgemmRM over count problems whose operands start
// strideA, strideB, strideC floats apart.
func (r rowMajor) sgemmStridedBatchedRM(transA, transB bool, M, N, K int, alpha float32,
	A dptr, lda, strideA int, B dptr, ldb, strideB int, beta float32, C dptr, ldc, strideC, count int) {
	t := r.start()
	must(r.timed(t, r.api.sgemmStridedBatched(transB, transA, N, M, K, alpha, B, ldb, strideB, A, lda, strideA,
		beta, C, ldc, strideC, count)))
}

// gemmExRM is sgemmRM with operand types (e.g. bf16 inputs, fp32 output)
// and a compute type (e.g. TF32 tensor cores) of the caller's choice.
func (r rowMajor) gemmExRM(transA, transB bool, M, N, K int, alpha float32,
	A dptr, at DataType, lda int, B dptr, bt DataType, ldb int, beta float32,
	C dptr, ct DataType, ldc int, compute ComputeType) {
	t := r.start()
	must(r.timed(t, r.api.gemmEx(transB, transA, N, M, K, alpha, B, bt, ldb, A, at, lda, beta, C, ct, ldc, compute)))
}

// gemmStridedBatchedExRM is gemmExRM over count problems whose operands
// start strideA, strideB, strideC elements apart.
func (r rowMajor) gemmStridedBatchedExRM(transA, transB bool, M, N, K int, alpha float32,
	A dptr, at DataType, lda, strideA int, B dptr, bt DataType, ldb, strideB int, beta float32,
	C dptr, ct DataType, ldc, strideC, count int, compute ComputeType) {
	t := r.start()
	must(r.timed(t, r.api.gemmStridedBatchedEx(transB, transA, N, M, K, alpha, B, bt, ldb, strideB, A, at, lda, strideA,
		beta, C, ct, ldc, strideC, count, compute)))
}

func must(err error) {
	if err != nil {
		panic(&Error{"", err})
	}
}
