package cudacheck

// Checks of the matmul family against the CPU reference gpu/cpu (matmul.go).

import (
	"fmt"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

func checkSgemm(b Device) error {
	r := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		ta, tb      bool
		M, N, K     int
		alpha, beta float32
	}{
		{false, false, 17, 33, 65, 1, 0}, {false, true, 64, 48, 32, 0.5, 1}, {true, false, 31, 7, 129, 1, 0.25}, {true, true, 5, 70, 9, -1, 1},
	} {
		lda, ldb, ldc := tc.K+3, tc.N+1, tc.N+2
		if tc.ta {
			lda = tc.M + 3
		}
		if tc.tb {
			ldb = tc.K + 1
		}
		rowsA, rowsB := tc.M, tc.K
		if tc.ta {
			rowsA = tc.K
		}
		if tc.tb {
			rowsB = tc.N
		}
		A, B := checkutil.Randn(r, rowsA*lda, 1), checkutil.Randn(r, rowsB*ldb, 1)
		C := checkutil.Randn(r, tc.M*ldc, 1)
		want, got := checkutil.Clone(C), checkutil.Clone(C)
		checkutil.Ref.Sgemm(tc.ta, tc.tb, tc.M, tc.N, tc.K, tc.alpha, A, lda, B, ldb, tc.beta, want, ldc)
		b.Sgemm(tc.ta, tc.tb, tc.M, tc.N, tc.K, tc.alpha, A, lda, B, ldb, tc.beta, got, ldc)
		if err := checkutil.Compare(fmt.Sprintf("C(transA=%v transB=%v %dx%dx%d)", tc.ta, tc.tb, tc.M, tc.N, tc.K), got, want, 1e-5); err != nil {
			return err
		}
	}
	return nil
}

// checkSgemmStridedBatched: count products of [M,K] x [K,N]^T at strides,
// against one CPU sgemm per product.
func checkSgemmStridedBatched(b Device) error {
	r := rand.New(rand.NewPCG(2, 2))
	const M, N, K, count = 19, 23, 40, 5
	A, B, C := checkutil.Randn(r, count*M*K, 1), checkutil.Randn(r, count*N*K, 1), checkutil.Randn(r, count*M*N, 1)
	want := checkutil.Clone(C)
	for i := 0; i < count; i++ {
		checkutil.Ref.Sgemm(false, true, M, N, K, 0.5, A[i*M*K:], K, B[i*N*K:], K, 1, want[i*M*N:], N)
	}
	got := checkutil.Clone(C)
	b.SgemmStridedBatched(false, true, M, N, K, 0.5, A, K, M*K, B, K, N*K, 1, got, N, M*N, count)
	return checkutil.Compare("C", got, want, 1e-5)
}

// checkGemmEx: fp32 operands with TF32 tensor-core compute (10-bit mantissa
// products), so the tolerance is TF32's.
func checkGemmEx(b Device) error {
	r := rand.New(rand.NewPCG(3, 3))
	const M, N, K = 64, 96, 128
	A, B := checkutil.Randn(r, M*K, 1), checkutil.Randn(r, K*N, 1)
	want, got := make([]float32, M*N), make([]float32, M*N)
	checkutil.Ref.Sgemm(false, false, M, N, K, 1, A, K, B, N, 0, want, N)
	b.GemmEx(false, false, M, N, K, 1, A, K, B, N, 0, got, N, cuda.Compute32FTF32)
	return checkutil.Compare("C", got, want, 5e-3)
}

// CheckMatmul at 21 rows and at 531 (the bias gradient's column sums in
// three chunks of 256 rows, 80 columns: a partial tile of 32).
func CheckMatmul(b Device) error {
	for _, N := range []int{21, 531} {
		if err := checkMatmulN(b, N); err != nil {
			return fmt.Errorf("N=%d: %w", N, err)
		}
	}
	return nil
}

func checkMatmulN(b Device, N int) error {
	r := rand.New(rand.NewPCG(6, 6))
	const C, OC = 64, 80
	inp, w, bias := checkutil.Randn(r, N*C, 1), checkutil.Randn(r, OC*C, 0.1), checkutil.Randn(r, OC, 1)
	o1, o2 := make([]float32, N*OC), make([]float32, N*OC)
	checkutil.Ref.MatmulForward(o1, inp, w, bias, N, C, OC)
	b.MatmulForward(o2, inp, w, bias, N, C, OC)
	if err := checkutil.Compare("out", o2, o1, 1e-5); err != nil {
		return err
	}
	dout := checkutil.Randn(r, N*OC, 1)
	dw0, db0 := checkutil.Randn(r, OC*C, 1), checkutil.Randn(r, OC, 1)
	di1, di2 := make([]float32, N*C), make([]float32, N*C)
	dw1, dw2, db1, db2 := checkutil.Clone(dw0), checkutil.Clone(dw0), checkutil.Clone(db0), checkutil.Clone(db0)
	checkutil.Ref.MatmulBackward(di1, dw1, db1, dout, inp, w, N, C, OC, false)
	b.MatmulBackward(di2, dw2, db2, dout, inp, w, N, C, OC, false)
	if err := checkutil.CompareAll(1e-5, "dinp", di2, di1, "dweight", dw2, dw1, "dbias", db2, db1); err != nil {
		return err
	}
	return checkAccumulate(b, "", di1, dout, inp, w, N, C, OC, 1e-5)
}

// checkAccumulate runs MatmulBackward with accumulate into a dinp that
// holds other values, as the model sums the input gradients of q, k and v
// (gate and up, an adapter and its base) in one tensor: the device must add
// the product (prod, the reference's dinp of the same operands) to what was
// there, and accumulate dweight and dbias as without it. The sum is made
// here on the host, not by the reference's own accumulate.
func checkAccumulate(b Device, name string, prod, dout, inp, weight []float32, N, C, OC int, tol float64) error {
	r := rand.New(rand.NewPCG(7, 7))
	prior := checkutil.Randn(r, N*C, 1)
	want := checkutil.Clone(prior)
	for i := range want {
		want[i] += prod[i]
	}
	got := checkutil.Clone(prior)
	b.MatmulBackward(got, nil, nil, dout, inp, weight, N, C, OC, true)
	return checkutil.Compare(name+"dinp (accumulated)", got, want, tol)
}
