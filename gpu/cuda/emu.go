//go:build cudaemu && !cuda

package cuda

// #cgo CXXFLAGS: -std=c++20 -O2
// #cgo LDFLAGS: -lstdc++ -lpthread
// #include <stdint.h>
// #include <stdlib.h>
// int rl_emu_launch(const char *name, long long grid, const uint64_t *args, int nargs);
import "C"

import (
	"embed"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// OpenEmulator returns a Backend whose kernels are kernels/kernels.cu
// compiled for the CPU and run with each GPU thread a fiber (emu.cc), with device memory
// in the C heap and cuBLAS replaced by its column-major definition. It is slow and only
// for tests (build tag cudaemu): it runs the kernels' own code where there
// is no GPU, so that everything but the PTX compilation and the hardware is
// checked against the CPU reference.
func OpenEmulator() *Backend {
	return &Backend{d: &device{drv: emuDriver{}, blas: rowMajor{emuBlas{}}, name: "emulator", cc: [2]int{8, 0}}}
}

// kernelSources are embedded only so that the Go build cache rebuilds the
// emulator when a kernel changes: cgo does not track files that emu.cc
// includes from another directory.
//
//go:embed kernels/*.cu kernels/*.cuh
var kernelSources embed.FS

type emuDriver struct{}

// hostPtr is the address of emulated device memory (C heap) as a pointer.
func hostPtr(p dptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func (emuDriver) lock() (func(), error) { return func() {}, nil }

// The emulated device memory is one reserved range of address space that is
// readable only while an op runs (device.run calls enter and leave): like
// device memory on a GPU, the host faults if it touches a tensor outside
// Upload and Download, so a test on the emulator catches a host read or
// write that would crash on a GPU. Allocation bumps a pointer; freed blocks
// go back to the backend's pool, not here.
const emuMemSize = 4 << 30

type emuMemT struct {
	sync.Mutex
	region []byte
	used   int
	depth  int // nested enter calls
}

var emuMem emuMemT

func (emuDriver) malloc(bytes int64) (dptr, error) {
	m := &emuMem
	m.Lock()
	defer m.Unlock()
	if m.region == nil {
		r, err := syscall.Mmap(-1, 0, emuMemSize, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
		if err != nil {
			return 0, fmt.Errorf("reserve emulated device memory: %w", err)
		}
		m.region = r
	}
	n := (int(bytes) + 255) &^ 255
	if m.used+n > len(m.region) {
		return 0, fmt.Errorf("out of memory (%d bytes; the emulator's device has %d)", bytes, emuMemSize)
	}
	p := unsafe.Pointer(&m.region[m.used])
	m.used += n
	if err := m.protect(); err != nil {
		return 0, err
	}
	clear(m.region[m.used-n : m.used])
	return dptr(uintptr(p)), nil
}

// protect makes the used range readable inside an op and inaccessible outside.
func (m *emuMemT) protect() error {
	if m.used == 0 {
		return nil
	}
	prot := syscall.PROT_NONE
	if m.depth > 0 {
		prot = syscall.PROT_READ | syscall.PROT_WRITE
	}
	end := (m.used + os.Getpagesize() - 1) &^ (os.Getpagesize() - 1)
	return syscall.Mprotect(m.region[:end], prot)
}

func (emuDriver) enter() {
	emuMem.Lock()
	defer emuMem.Unlock()
	emuMem.depth++
	if emuMem.depth == 1 {
		must(emuMem.protect())
	}
}

func (emuDriver) leave() {
	emuMem.Lock()
	defer emuMem.Unlock()
	emuMem.depth--
	if emuMem.depth == 0 {
		must(emuMem.protect())
	}
}

func (emuDriver) free(p dptr) error { return nil }

func (emuDriver) htod(dst dptr, src unsafe.Pointer, bytes int64) error {
	copy(unsafe.Slice((*byte)(hostPtr(dst)), bytes), unsafe.Slice((*byte)(src), bytes))
	return nil
}

func (emuDriver) dtoh(dst unsafe.Pointer, src dptr, bytes int64) error {
	copy(unsafe.Slice((*byte)(dst), bytes), unsafe.Slice((*byte)(hostPtr(src)), bytes))
	return nil
}

// emuPlanted names, per kernel, a planted defect to run in its place (the
// emulator's build of it registered as "kernel/defect" in emu.cc): the
// tests set it to prove that a check fails on a broken kernel.
var emuPlanted = map[string]string{}

func (emuDriver) launch(kernel string, grid int, args []uint64) error {
	if p := emuPlanted[kernel]; p != "" {
		kernel += "/" + p
	}
	name := C.CString(kernel)
	defer C.free(unsafe.Pointer(name))
	slots := (*C.uint64_t)(C.malloc(C.size_t(8 * max(1, len(args)))))
	defer C.free(unsafe.Pointer(slots))
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(slots)), len(args)), args)
	switch r := C.rl_emu_launch(name, C.longlong(grid), slots, C.int(len(args))); {
	case r == -1:
		return fmt.Errorf("no kernel %s", kernel)
	case r == -2:
		return fmt.Errorf("kernel %s deadlocked: threads wait at barriers the others never reach", kernel)
	case r != 0:
		return fmt.Errorf("kernel %s takes %d arguments, %d given", kernel, int(r), len(args))
	}
	return nil
}

func (emuDriver) sync() error { return nil }

// memInfo reports the emulator's device as 1 GiB with nothing free beyond what it has.
func (emuDriver) memInfo() (free, total int64, err error) { return 0, 1 << 30, nil }

func (emuDriver) dtod(dst, src dptr, bytes int64) error {
	copy(unsafe.Slice((*byte)(hostPtr(dst)), bytes), unsafe.Slice((*byte)(hostPtr(src)), bytes))
	return nil
}

func (emuDriver) zero(p dptr, bytes int64) error {
	clear(unsafe.Slice((*byte)(hostPtr(p)), bytes))
	return nil
}

// emuBlas is cuBLAS's column-major products by their definition (float64
// sums): C = alpha op(A) op(B) + beta C with element (i,j) of a matrix X at
// X[i + j*ldx], op(X) = X^T when trans. It shares no code with the row-major
// mapping (blas.go) or gpu/cpu, so the checks test that mapping.
type emuBlas struct{}

func floats(p dptr, n int) []float32 {
	if n <= 0 {
		return nil
	}
	return unsafe.Slice((*float32)(hostPtr(p)), n)
}

// colExtent is the floats spanned by a column-major [rows, cols] operand
// with leading dimension ld.
func colExtent(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return (cols-1)*ld + rows
}

// gemmShapes are the stored shapes [ar, ac] of A and [br, bc] of B of the
// column-major product C[m,n] = op(A)[m,k] op(B)[k,n], and the error cuBLAS
// (function fn) returns when a leading dimension is below its operand's rows.
func gemmShapes(fn string, transA, transB bool, m, n, k, lda, ldb, ldc int) (ar, ac, br, bc int, err error) {
	ar, ac = m, k
	if transA {
		ar, ac = k, m
	}
	br, bc = k, n
	if transB {
		br, bc = n, k
	}
	if lda < max(1, ar) || ldb < max(1, br) || ldc < max(1, m) {
		err = fmt.Errorf("%s: CUBLAS_STATUS_INVALID_VALUE (leading dimension below the rows)", fn)
	}
	return ar, ac, br, bc, err
}

func (emuBlas) sgemm(transA, transB bool, m, n, k int, alpha float32, A dptr, lda int,
	B dptr, ldb int, beta float32, Cp dptr, ldc int) error {
	ar, ac, br, bc, err := gemmShapes("cublasSgemm", transA, transB, m, n, k, lda, ldb, ldc)
	if err != nil {
		return err
	}
	a, b, c := floats(A, colExtent(ar, ac, lda)), floats(B, colExtent(br, bc, ldb)), floats(Cp, colExtent(m, n, ldc))
	at := func(i, p int) float64 { // op(A)(i,p)
		if transA {
			return float64(a[p+i*lda])
		}
		return float64(a[i+p*lda])
	}
	bt := func(p, j int) float64 { // op(B)(p,j)
		if transB {
			return float64(b[j+p*ldb])
		}
		return float64(b[p+j*ldb])
	}
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s float64
			for p := 0; p < k; p++ {
				s += at(i, p) * bt(p, j)
			}
			v := float64(alpha) * s
			if beta != 0 {
				v += float64(beta) * float64(c[i+j*ldc])
			}
			c[i+j*ldc] = float32(v)
		}
	}
	return nil
}

func (e emuBlas) sgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
	A dptr, lda, strideA int, B dptr, ldb, strideB int, beta float32, Cp dptr, ldc, strideC, count int) error {
	for i := 0; i < count; i++ {
		if err := e.sgemm(transA, transB, m, n, k, alpha, A+dptr(4*i*strideA), lda, B+dptr(4*i*strideB), ldb,
			beta, Cp+dptr(4*i*strideC), ldc); err != nil {
			return err
		}
	}
	return nil
}

// gemmEx is cublasGemmEx for the combinations the backend uses, with
// their arithmetic: fp32 operands with CUBLAS_COMPUTE_32F (sgemm);
// fp32 operands with CUBLAS_COMPUTE_32F_FAST_TF32, each operand rounded to
// TF32 (tf32Round: a 10-bit mantissa, nearest, ties away) and the exact
// products summed in fp32; bfloat16 operands (CUDA_R_16BF, taken as they
// are: the device's f32_to_bf16 made them) with CUBLAS_COMPUTE_32F and an
// fp32 C, the exact products summed in fp32 in order of k. Then
// C = alpha*sum + beta*C in fp32. Other combinations are refused, as
// cuBLAS refuses what it does not support.
func (e emuBlas) gemmEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda int, B dptr, bt DataType, ldb int, beta float32,
	Cp dptr, ct DataType, ldc int, compute ComputeType) error {
	switch {
	case at == R32F && bt == R32F && ct == R32F && compute == Compute32F:
		return e.sgemm(transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, Cp, ldc)
	case at == R32F && bt == R32F && ct == R32F && compute == Compute32FTF32,
		at == R16BF && bt == R16BF && ct == R32F && compute == Compute32F:
	default:
		return fmt.Errorf("cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED (operand types %d, %d, %d, compute type %d)", at, bt, ct, compute)
	}
	ar, ac, br, bc, err := gemmShapes("cublasGemmEx", transA, transB, m, n, k, lda, ldb, ldc)
	if err != nil {
		return err
	}
	// element i of a column-major operand, rounded as the compute type reads it
	elem := func(p dptr, t DataType, rows, cols, ld int) func(i int) float32 {
		if t == R16BF {
			h := unsafe.Slice((*uint16)(hostPtr(p)), colExtent(rows, cols, ld))
			return func(i int) float32 { return bf16Float(h[i]) }
		}
		f := floats(p, colExtent(rows, cols, ld))
		return func(i int) float32 { return tf32Round(f[i]) }
	}
	a, b, c := elem(A, at, ar, ac, lda), elem(B, bt, br, bc, ldb), floats(Cp, colExtent(m, n, ldc))
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s float32
			for p := 0; p < k; p++ {
				ia, ib := i+p*lda, p+j*ldb
				if transA {
					ia = p + i*lda
				}
				if transB {
					ib = j + p*ldb
				}
				s += a(ia) * b(ib) // exact: at most 11+11 significant bits
			}
			v := alpha * s
			if beta != 0 {
				v += beta * c[i+j*ldc]
			}
			c[i+j*ldc] = v
		}
	}
	return nil
}

// gemmStridedBatchedEx is gemmEx over count problems whose operands start
// strideA, strideB, strideC elements apart.
func (e emuBlas) gemmStridedBatchedEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda, strideA int, B dptr, bt DataType, ldb, strideB int, beta float32,
	Cp dptr, ct DataType, ldc, strideC, count int, compute ComputeType) error {
	size := func(t DataType) int {
		if t == R16BF {
			return 2
		}
		return 4
	}
	for i := 0; i < count; i++ {
		if err := e.gemmEx(transA, transB, m, n, k, alpha, A+dptr(size(at)*i*strideA), at, lda,
			B+dptr(size(bt)*i*strideB), bt, ldb, beta, Cp+dptr(size(ct)*i*strideC), ct, ldc, compute); err != nil {
			return err
		}
	}
	return nil
}

func (emuBlas) library() string { return "column-major reference products (emulator)" }
