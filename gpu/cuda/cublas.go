//go:build cuda

package cuda

// #cgo LDFLAGS: -ldl
// #include <dlfcn.h>
// #include <stdint.h>
// #include <stdlib.h>
//
// // cuBLAS v2 entry points, declared here so that no cuBLAS header or
// // library is needed at build time; the enums are ints in the cuBLAS ABI.
// typedef int (*rl_create_t)(void **);
// typedef int (*rl_destroy_t)(void *);
// typedef int (*rl_setstream_t)(void *, void *);
// typedef int (*rl_setworkspace_t)(void *, void *, size_t);
// typedef int (*rl_sgemm_t)(void *, int, int, int, int, int, const float *, const float *, int,
//                           const float *, int, const float *, float *, int);
// typedef int (*rl_sgemm_sb_t)(void *, int, int, int, int, int, const float *, const float *, int, long long,
//                              const float *, int, long long, const float *, float *, int, long long, int);
// typedef int (*rl_gemmex_t)(void *, int, int, int, int, int, const void *, const void *, int, int,
//                            const void *, int, int, const void *, void *, int, int, int, int);
// typedef int (*rl_gemmex_sb_t)(void *, int, int, int, int, int, const void *, const void *, int, int, long long,
//                               const void *, int, int, long long, const void *, void *, int, int, long long,
//                               int, int, int);
//
// static int rl_create(void *f, uintptr_t *h) { void *p = 0; int r = ((rl_create_t)f)(&p); *h = (uintptr_t)p; return r; }
// static int rl_destroy(void *f, uintptr_t h) { return ((rl_destroy_t)f)((void *)h); }
// static int rl_setstream(void *f, uintptr_t h, uintptr_t s) { return ((rl_setstream_t)f)((void *)h, (void *)s); }
// static int rl_setworkspace(void *f, uintptr_t h, uintptr_t p, size_t n) {
//     return ((rl_setworkspace_t)f)((void *)h, (void *)p, n);
// }
// static int rl_sgemm(void *f, uintptr_t h, int ta, int tb, int m, int n, int k, float alpha,
//                     uintptr_t A, int lda, uintptr_t B, int ldb, float beta, uintptr_t C, int ldc) {
//     return ((rl_sgemm_t)f)((void *)h, ta, tb, m, n, k, &alpha, (const float *)A, lda, (const float *)B, ldb,
//                            &beta, (float *)C, ldc);
// }
// static int rl_sgemm_sb(void *f, uintptr_t h, int ta, int tb, int m, int n, int k, float alpha,
//                        uintptr_t A, int lda, long long sa, uintptr_t B, int ldb, long long sb, float beta,
//                        uintptr_t C, int ldc, long long sc, int count) {
//     return ((rl_sgemm_sb_t)f)((void *)h, ta, tb, m, n, k, &alpha, (const float *)A, lda, sa,
//                               (const float *)B, ldb, sb, &beta, (float *)C, ldc, sc, count);
// }
// static int rl_gemmex(void *f, uintptr_t h, int ta, int tb, int m, int n, int k, float alpha,
//                      uintptr_t A, int atype, int lda, uintptr_t B, int btype, int ldb, float beta,
//                      uintptr_t C, int ctype, int ldc, int compute, int algo) {
//     return ((rl_gemmex_t)f)((void *)h, ta, tb, m, n, k, &alpha, (const void *)A, atype, lda,
//                             (const void *)B, btype, ldb, &beta, (void *)C, ctype, ldc, compute, algo);
// }
// static int rl_gemmex_sb(void *f, uintptr_t h, int ta, int tb, int m, int n, int k, float alpha,
//                         uintptr_t A, int atype, int lda, long long sa, uintptr_t B, int btype, int ldb, long long sb,
//                         float beta, uintptr_t C, int ctype, int ldc, long long sc, int count, int compute, int algo) {
//     return ((rl_gemmex_sb_t)f)((void *)h, ta, tb, m, n, k, &alpha, (const void *)A, atype, lda, sa,
//                                (const void *)B, btype, ldb, sb, &beta, (void *)C, ctype, ldc, sc, count, compute, algo);
// }
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"gorgonia.org/cu"
)

// cuBLAS enum values (cublas_api.h, library_types.h; stable since CUDA 11).
const (
	opN = 0 // CUBLAS_OP_N
	opT = 1 // CUBLAS_OP_T

	gemmDefault = -1 // CUBLAS_GEMM_DEFAULT
)

// cublas is a cuBLAS handle bound to the backend's stream, with the entry
// points found by dlsym.
type cublas struct {
	lib                                      unsafe.Pointer
	path                                     string
	handle                                   C.uintptr_t
	create, destroy, setStream               unsafe.Pointer
	fnSgemm, fnSgemmStridedBatched, fnGemmEx unsafe.Pointer
	fnGemmStridedBatchedEx                   unsafe.Pointer
}

// cublasWorkspace is the bytes of the workspace the handle gets
// (cublasSetWorkspace): cuBLAS's own default on Hopper, and a buffer of
// the backend's, so that no product allocates one while a stream is
// captured (graph.go).
const cublasWorkspace = 32 << 20

// setWorkspace gives the handle the workspace [p, p+bytes) (after
// cublasSetStream, which resets it).
func (b *cublas) setWorkspace(p dptr, bytes int64) error {
	cs := C.CString("cublasSetWorkspace_v2")
	f := C.dlsym(b.lib, cs)
	C.free(unsafe.Pointer(cs))
	if f == nil {
		return fmt.Errorf("%s has no symbol cublasSetWorkspace_v2", b.path)
	}
	return status("cublasSetWorkspace", C.rl_setworkspace(f, b.handle, C.uintptr_t(p), C.size_t(bytes)))
}

func openCublas(stream cu.Stream) (*cublas, error) {
	b := &cublas{}
	tried := defaultCublasSearch().Candidates()
	var why []string
	for _, name := range tried {
		cs := C.CString(name)
		b.lib = C.dlopen(cs, C.RTLD_NOW|C.RTLD_LOCAL)
		C.free(unsafe.Pointer(cs))
		if b.lib != nil {
			b.path = name
			break
		}
		if strings.ContainsRune(name, '/') { // a file that exists but does not load: say why
			why = append(why, C.GoString(C.dlerror()))
		}
	}
	if b.lib == nil {
		msg := "cuda: cuBLAS not found: no libcublas.so.13, .12 or .11 loads from LD_LIBRARY_PATH, the system library paths " +
			"or the pip layouts (site-packages/nvidia/cu13/lib, nvidia/cublas/lib) of the Pythons on PATH; " +
			"install cuBLAS (pip install nvidia-cublas, or the CUDA toolkit) or add its directory to LD_LIBRARY_PATH"
		if len(why) > 0 {
			msg += " (" + strings.Join(why, "; ") + ")"
		}
		return nil, errors.New(msg)
	}
	for _, s := range []struct {
		name string
		p    *unsafe.Pointer
	}{
		{"cublasCreate_v2", &b.create}, {"cublasDestroy_v2", &b.destroy}, {"cublasSetStream_v2", &b.setStream},
		{"cublasSgemm_v2", &b.fnSgemm}, {"cublasSgemmStridedBatched", &b.fnSgemmStridedBatched}, {"cublasGemmEx", &b.fnGemmEx},
		{"cublasGemmStridedBatchedEx", &b.fnGemmStridedBatchedEx},
	} {
		cs := C.CString(s.name)
		*s.p = C.dlsym(b.lib, cs)
		C.free(unsafe.Pointer(cs))
		if *s.p == nil {
			return nil, fmt.Errorf("cuda: %s has no symbol %s (cuBLAS 11 or later is needed)", b.path, s.name)
		}
	}
	if r := C.rl_create(b.create, &b.handle); r != 0 {
		return nil, &Error{"cublasCreate", cublasStatus(r)}
	}
	if r := C.rl_setstream(b.setStream, b.handle, C.uintptr_t(uintptr(unsafe.Pointer(stream.C())))); r != 0 {
		return nil, &Error{"cublasSetStream", cublasStatus(r)}
	}
	return b, nil
}

// cublasStatus is a cublasStatus_t that is not CUBLAS_STATUS_SUCCESS.
type cublasStatus C.int

func (s cublasStatus) Error() string {
	names := map[int]string{1: "NOT_INITIALIZED", 3: "ALLOC_FAILED", 7: "INVALID_VALUE", 8: "ARCH_MISMATCH",
		11: "MAPPING_ERROR", 13: "EXECUTION_FAILED", 14: "INTERNAL_ERROR", 15: "NOT_SUPPORTED", 16: "LICENSE_ERROR"}
	if n, ok := names[int(s)]; ok {
		return "CUBLAS_STATUS_" + n
	}
	return fmt.Sprintf("cublasStatus %d", int(s))
}

func (b *cublas) library() string { return b.path }

func status(what string, r C.int) error {
	if r != 0 {
		return fmt.Errorf("%s: %w", what, cublasStatus(r))
	}
	return nil
}

func bop(trans bool) C.int {
	if trans {
		return opT
	}
	return opN
}

// The methods below are cuBLAS's own column-major calls (colMajorBlas);
// blas.go maps the row-major products of the ops onto them.

func (b *cublas) sgemm(transA, transB bool, m, n, k int, alpha float32, A dptr, lda int,
	B dptr, ldb int, beta float32, Cp dptr, ldc int) error {
	return status("cublasSgemm", C.rl_sgemm(b.fnSgemm, b.handle, bop(transA), bop(transB), C.int(m), C.int(n), C.int(k),
		C.float(alpha), C.uintptr_t(A), C.int(lda), C.uintptr_t(B), C.int(ldb), C.float(beta), C.uintptr_t(Cp), C.int(ldc)))
}

func (b *cublas) sgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
	A dptr, lda, strideA int, B dptr, ldb, strideB int, beta float32,
	Cp dptr, ldc, strideC, count int) error {
	return status("cublasSgemmStridedBatched", C.rl_sgemm_sb(b.fnSgemmStridedBatched, b.handle, bop(transA), bop(transB),
		C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.uintptr_t(A), C.int(lda), C.longlong(strideA), C.uintptr_t(B), C.int(ldb), C.longlong(strideB),
		C.float(beta), C.uintptr_t(Cp), C.int(ldc), C.longlong(strideC), C.int(count)))
}

func (b *cublas) gemmEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda int, B dptr, bt DataType, ldb int, beta float32,
	Cp dptr, ct DataType, ldc int, compute ComputeType) error {
	return status("cublasGemmEx", C.rl_gemmex(b.fnGemmEx, b.handle, bop(transA), bop(transB), C.int(m), C.int(n), C.int(k),
		C.float(alpha), C.uintptr_t(A), C.int(at), C.int(lda), C.uintptr_t(B), C.int(bt), C.int(ldb),
		C.float(beta), C.uintptr_t(Cp), C.int(ct), C.int(ldc), C.int(compute), gemmDefault))
}

func (b *cublas) gemmStridedBatchedEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda, strideA int, B dptr, bt DataType, ldb, strideB int, beta float32,
	Cp dptr, ct DataType, ldc, strideC, count int, compute ComputeType) error {
	return status("cublasGemmStridedBatchedEx", C.rl_gemmex_sb(b.fnGemmStridedBatchedEx, b.handle, bop(transA), bop(transB),
		C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.uintptr_t(A), C.int(at), C.int(lda), C.longlong(strideA), C.uintptr_t(B), C.int(bt), C.int(ldb), C.longlong(strideB),
		C.float(beta), C.uintptr_t(Cp), C.int(ct), C.int(ldc), C.longlong(strideC), C.int(count), C.int(compute), gemmDefault))
}
