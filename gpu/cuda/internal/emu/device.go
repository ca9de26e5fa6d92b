//go:build cudaemu && !cuda

package emu

// An emulated device's memory, copies, stream capture and products: the
// driver and cuBLAS of gpu/cuda's emulated device (OpenEmulator), whose
// launches run the kernels of Launch.

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/internal/round"
)

// ErrClosed is what an allocation on a closed device returns.
var ErrClosed = errors.New("the emulated device is closed")

// DataType and ComputeType are cuBLAS's (cudaDataType, cublasComputeType_t),
// as gpu/cuda passes them to GemmEx: the combinations it supports.
type (
	DataType    int
	ComputeType int
)

const (
	R32F           DataType    = 0  // CUDA_R_32F
	R16BF          DataType    = 14 // CUDA_R_16BF
	Compute32F     ComputeType = 68 // CUBLAS_COMPUTE_32F
	Compute32FTF32 ComputeType = 77 // CUBLAS_COMPUTE_32F_FAST_TF32
)

// Planted names, per kernel, a build of dev/cuda to run in its place
// (registered as "kernel/name"): a planted defect, a variant waiting for a
// GPU proof, or a former kernel kept to compare with. Set by the tests
// (gpu/cuda's UseBuild).
var Planted = map[string]string{}

// addr is the address of emulated device memory as a pointer.
func addr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// MemSize is the address space each emulated device reserves.
const MemSize = 4 << 30

// Memory is an emulated device's memory: a reserved range of address
// space of its own, accessible only while an op of that device runs
// (gpu/cuda's device.run calls Enter and Leave). As device memory on a GPU, the host
// faults if it touches a tensor outside Upload and Download, so a test on
// the emulator catches a host read or write that would crash on a GPU.
//
// It is a driver's allocator, as cuMemAlloc/cuMemFree: a block comes from
// the lowest freed span it fits in, else from the top of the used range;
// a freed block merges with its free neighbours, and when the top block is
// freed the used range shrinks and the pages above it go back to the
// system (madvise, and made inaccessible). Memory handed out reads as
// zeros. Close unmaps the whole range: nothing of a closed device stays.
// (The backend keeps the tensors it frees for reuse; it gives them to the
// driver only when an allocation fails or at Close.)
type Memory struct {
	sync.Mutex
	region []byte          // reserved on the first malloc; nil before and after close
	top    int             // [0, top) holds every live block
	clean  int             // every byte from clean on is zero (clean >= top)
	prot   int             // [0, prot) is the page-rounded range whose protection follows depth
	spans  []span          // free blocks below top, by address, none adjacent
	live   map[uintptr]int // the blocks handed out: size by address
	depth  int             // nested enter calls
	closed bool
	// the stream's capture (BeginCapture): the calls queued
	// while capturing, and the error that invalidated the capture
	capturing  bool
	captured   []func() error
	captureErr error
	// Refuse names a kernel whose launch a capture refuses (as the CUDA
	// driver refuses what cannot be captured): tests only
	Refuse string
	// page-locked host memory handed out (hostAlloc), and the copies from
	// it queued and not yet run (pinned.go: they run when the stream
	// reaches them)
	pinned  [][]byte
	pending []pendingCopy
}

// pendingCopy is a copy from page-locked memory to the device, queued.
type pendingCopy struct {
	dst   uintptr
	src   unsafe.Pointer
	bytes int64
}

type span struct{ at, n int }

// stats is every emulated device's memory together: regions mapped,
// blocks and bytes handed out and not freed; StatsNow reads it (the
// tests check that closed devices leave nothing behind).
var stats struct {
	sync.Mutex
	regions, blocks int
	bytes           int64
}

type MemoryStats struct {
	Regions, Blocks int
	Bytes           int64
}

// StatsNow is every emulated device's memory together: regions mapped,
// blocks and bytes handed out and not freed.
func StatsNow() MemoryStats {
	stats.Lock()
	defer stats.Unlock()
	return MemoryStats{stats.regions, stats.blocks, stats.bytes}
}

func count(regions, blocks int, bytes int64) {
	stats.Lock()
	defer stats.Unlock()
	stats.regions += regions
	stats.blocks += blocks
	stats.bytes += bytes
}

var pageSize = os.Getpagesize()

func pageUp(n int) int { return (n + pageSize - 1) &^ (pageSize - 1) }

// Malloc is cuMemAlloc: a block of at least bytes (256-byte aligned), zeroed.
func (m *Memory) Malloc(bytes int64) (uintptr, error) {
	m.Lock()
	defer m.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	if m.region == nil {
		r, err := syscall.Mmap(-1, 0, MemSize, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
		if err != nil {
			return 0, fmt.Errorf("reserve emulated device memory: %w", err)
		}
		m.region, m.live = r, map[uintptr]int{}
		count(1, 0, 0)
	}
	n := max(256, (int(bytes)+255)&^255) // never 0: each block has its own address
	at := -1
	for i, s := range m.spans { // first fit, lowest address
		if s.n >= n {
			at = s.at
			if s.n == n {
				m.spans = slices.Delete(m.spans, i, i+1)
			} else {
				m.spans[i] = span{s.at + n, s.n - n}
			}
			break
		}
	}
	if at < 0 {
		if m.top+n > len(m.region) {
			return 0, fmt.Errorf("out of memory (%d bytes; the emulator's device has %d)", bytes, MemSize)
		}
		at = m.top
		m.top += n
		if end := pageUp(m.top); end > m.prot {
			if err := m.protect(m.prot, end); err != nil {
				m.top -= n
				return 0, err
			}
			m.prot = end
		}
	}
	if at < m.clean {
		clear(m.region[at:min(at+n, m.clean)])
	}
	m.clean = max(m.clean, at+n)
	p := uintptr(uintptr(unsafe.Pointer(&m.region[at])))
	m.live[p] = n
	count(0, 1, int64(n))
	return p, nil
}

// Free is cuMemFree: p must be a block Malloc handed out.
func (m *Memory) Free(p uintptr) error {
	m.Lock()
	defer m.Unlock()
	n, ok := m.live[p]
	if !ok {
		return fmt.Errorf("free of %#x: not a block of this emulated device", uintptr(p))
	}
	delete(m.live, p)
	count(0, -1, -int64(n))
	at := int(uintptr(p) - uintptr(unsafe.Pointer(&m.region[0])))
	i, _ := slices.BinarySearchFunc(m.spans, at, func(s span, at int) int { return s.at - at })
	s := span{at, n}
	if i < len(m.spans) && m.spans[i].at == at+n { // merge with the next
		s.n += m.spans[i].n
		m.spans = slices.Delete(m.spans, i, i+1)
	}
	if i > 0 && m.spans[i-1].at+m.spans[i-1].n == at { // and the previous
		i--
		s = span{m.spans[i].at, m.spans[i].n + s.n}
		m.spans = slices.Delete(m.spans, i, i+1)
	}
	if s.at+s.n < m.top {
		m.spans = slices.Insert(m.spans, i, s)
		return nil
	}
	// the top block: the used range shrinks to s.at, and the whole pages
	// above it are given back (they read as zero when mapped again)
	m.top = s.at
	end := pageUp(m.top)
	if end < m.prot {
		if err := syscall.Madvise(m.region[end:m.prot], syscall.MADV_DONTNEED); err != nil {
			return fmt.Errorf("release emulated device memory: %w", err)
		}
		if err := syscall.Mprotect(m.region[end:m.prot], syscall.PROT_NONE); err != nil {
			return fmt.Errorf("release emulated device memory: %w", err)
		}
		m.prot = end
	}
	m.clean = max(m.top, min(m.clean, end))
	return nil
}

// Close unmaps the device's memory: every block, freed or not.
func (m *Memory) Close() error {
	m.Lock()
	defer m.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.pending = nil
	for _, b := range m.pinned { // not given back by the backend
		syscall.Munmap(b)
	}
	m.pinned = nil
	if m.region == nil {
		return nil
	}
	var bytes int64
	for _, n := range m.live {
		bytes += int64(n)
	}
	count(-1, -len(m.live), -bytes)
	err := syscall.Munmap(m.region)
	m.region, m.live, m.spans, m.top, m.clean, m.prot = nil, nil, nil, 0, 0, 0
	return err
}

// Used is the bytes from the start of the device's range to the end of its
// topmost live block.
func (m *Memory) Used() int {
	m.Lock()
	defer m.Unlock()
	return m.top
}

// protect sets the protection of [from, to) of the region (page-aligned):
// readable and writable inside an op, inaccessible outside.
func (m *Memory) protect(from, to int) error {
	if from >= to {
		return nil
	}
	prot := syscall.PROT_NONE
	if m.depth > 0 {
		prot = syscall.PROT_READ | syscall.PROT_WRITE
	}
	return syscall.Mprotect(m.region[from:to], prot)
}

// Enter makes the device's memory accessible to the host (an op runs);
// calls nest, each matched by a Leave.
func (m *Memory) Enter() {
	m.Lock()
	defer m.Unlock()
	m.depth++
	if m.depth == 1 && m.region != nil {
		if err := m.protect(0, m.prot); err != nil {
			panic(err)
		}
	}
}

// Leave ends an Enter; outside every op the memory faults on access.
func (m *Memory) Leave() {
	m.Lock()
	defer m.Unlock()
	m.depth--
	if m.depth == 0 && m.region != nil {
		if err := m.protect(0, m.prot); err != nil {
			panic(err)
		}
	}
}

// HtoD copies at once from pageable memory (the driver stages its bytes
// before it returns) and queues a copy from page-locked memory, which
// reads its bytes when the stream reaches it, as on a GPU.
func (m *Memory) HtoD(dst uintptr, src unsafe.Pointer, bytes int64) error {
	if err := m.uncapturable("a copy from the host"); err != nil {
		return err
	}
	if m.isPinned(src, bytes) {
		m.pending = append(m.pending, pendingCopy{dst, src, bytes})
		return nil
	}
	m.flush()
	copy(unsafe.Slice((*byte)(addr(dst)), bytes), unsafe.Slice((*byte)(src), bytes))
	return nil
}

// HostAlloc is page-locked memory: anonymous memory of the emulator's own
// (pinner).
func (m *Memory) HostAlloc(bytes int64) (unsafe.Pointer, error) {
	b, err := syscall.Mmap(-1, 0, int(bytes), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes: %w", bytes, err)
	}
	m.Lock()
	m.pinned = append(m.pinned, b)
	m.Unlock()
	return unsafe.Pointer(&b[0]), nil
}

// HostFree gives back page-locked memory of HostAlloc, after the copies
// queued from it have run.
func (m *Memory) HostFree(p unsafe.Pointer) error {
	m.flush()
	m.Lock()
	defer m.Unlock()
	for i, b := range m.pinned {
		if unsafe.Pointer(&b[0]) == p {
			m.pinned = slices.Delete(m.pinned, i, i+1)
			return syscall.Munmap(b)
		}
	}
	return fmt.Errorf("free of %p: not page-locked memory of the emulator", p)
}

// isPinned reports whether [p, p+bytes) lies in page-locked memory.
func (m *Memory) isPinned(p unsafe.Pointer, bytes int64) bool {
	m.Lock()
	defer m.Unlock()
	a := uintptr(p)
	for _, b := range m.pinned {
		lo := uintptr(unsafe.Pointer(&b[0]))
		if a >= lo && a+uintptr(bytes) <= lo+uintptr(len(b)) {
			return true
		}
	}
	return false
}

// flush runs the queued copies from page-locked memory, in order: the
// stream reached them (a launch, product, device copy, clear, copy to the
// host or synchronisation comes next).
func (m *Memory) flush() {
	if m == nil || len(m.pending) == 0 {
		return
	}
	m.Enter()
	defer m.Leave()
	for _, c := range m.pending {
		copy(unsafe.Slice((*byte)(addr(c.dst)), c.bytes), unsafe.Slice((*byte)(c.src), c.bytes))
	}
	m.pending = m.pending[:0]
}

// DtoH copies to the host once the queued copies have run.
func (m *Memory) DtoH(dst unsafe.Pointer, src uintptr, bytes int64) error {
	if err := m.uncapturable("a copy to the host"); err != nil {
		return err
	}
	m.flush()
	copy(unsafe.Slice((*byte)(dst), bytes), unsafe.Slice((*byte)(addr(src)), bytes))
	return nil
}

// DtoHAsync copies at once: the emulator's stream has run every op queued
// before it (launches and copies run when they are queued), and a copy
// from page-locked memory still pending runs first.
func (m *Memory) DtoHAsync(dst unsafe.Pointer, src uintptr, bytes int64) error {
	if err := m.uncapturable("a copy to the host"); err != nil {
		return err
	}
	if !m.isPinned(dst, bytes) {
		return fmt.Errorf("queued copy to the host into pageable memory at %p", dst)
	}
	m.flush()
	copy(unsafe.Slice((*byte)(dst), bytes), unsafe.Slice((*byte)(addr(src)), bytes))
	return nil
}

// Launch runs kernel (or the build Planted names in its place) over grid
// blocks, or records it while the stream captures.
func (m *Memory) Launch(kernel string, grid int, args []uint64) error {
	if m.capturing && kernel == m.Refuse {
		return m.uncapturable("a launch of " + kernel)
	}
	if m.capture(func() error { return m.Launch(kernel, grid, args) }, &args) {
		return nil
	}
	if p := Planted[kernel]; p != "" {
		kernel += "/" + p
	}
	return Launch(kernel, grid, args)
}

// Sync waits for the stream: the queued copies run.
func (m *Memory) Sync() error {
	if err := m.uncapturable("a synchronisation"); err != nil {
		return err
	}
	m.flush()
	return nil
}

// DtoD copies between device blocks (recorded while capturing).
func (m *Memory) DtoD(dst, src uintptr, bytes int64) error {
	if m.capture(func() error { return m.DtoD(dst, src, bytes) }, nil) {
		return nil
	}
	copy(unsafe.Slice((*byte)(addr(dst)), bytes), unsafe.Slice((*byte)(addr(src)), bytes))
	return nil
}

// Zero clears bytes at p (recorded while capturing).
func (m *Memory) Zero(p uintptr, bytes int64) error {
	if m.capture(func() error { return m.Zero(p, bytes) }, nil) {
		return nil
	}
	clear(unsafe.Slice((*byte)(addr(p)), bytes))
	return nil
}

// The products (Sgemm, SgemmStridedBatched, GemmEx, GemmStridedBatchedEx)
// are cuBLAS's column-major products by their definition (float64 sums):
// C = alpha op(A) op(B) + beta C with element (i,j) of a matrix X at
// X[i + j*ldx], op(X) = X^T when trans. They share no code with gpu/cuda's
// row-major mapping (blas.go) or gpu/cpu, so the checks test that mapping.

func floats(p uintptr, n int) []float32 {
	if n <= 0 {
		return nil
	}
	return unsafe.Slice((*float32)(addr(p)), n)
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

// Sgemm is cublasSgemm.
func (d *Memory) Sgemm(transA, transB bool, m, n, k int, alpha float32, A uintptr, lda int,
	B uintptr, ldb int, beta float32, Cp uintptr, ldc int) error {
	if d.capture(func() error { return d.Sgemm(transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, Cp, ldc) }, nil) {
		return nil
	}
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

// SgemmStridedBatched is cublasSgemmStridedBatched.
func (d *Memory) SgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
	A uintptr, lda, strideA int, B uintptr, ldb, strideB int, beta float32, Cp uintptr, ldc, strideC, count int) error {
	if d.capture(func() error {
		return d.SgemmStridedBatched(transA, transB, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, Cp, ldc, strideC, count)
	}, nil) {
		return nil
	}
	for i := 0; i < count; i++ {
		if err := d.Sgemm(transA, transB, m, n, k, alpha, A+uintptr(4*i*strideA), lda, B+uintptr(4*i*strideB), ldb,
			beta, Cp+uintptr(4*i*strideC), ldc); err != nil {
			return err
		}
	}
	return nil
}

// GemmEx is cublasGemmEx for the combinations the backend uses, with
// their arithmetic: fp32 operands with CUBLAS_COMPUTE_32F (sgemm);
// fp32 operands with CUBLAS_COMPUTE_32F_FAST_TF32, each operand rounded to
// TF32 (round.TF32: a 10-bit mantissa, nearest, ties away) and the exact
// products summed in fp32; bfloat16 operands (CUDA_R_16BF, taken as they
// are: the device's f32_to_bf16 made them) with CUBLAS_COMPUTE_32F and an
// fp32 C, the exact products summed in fp32 in order of k. Then
// C = alpha*sum + beta*C in fp32. Other combinations are refused, as
// cuBLAS refuses what it does not support.
func (d *Memory) GemmEx(transA, transB bool, m, n, k int, alpha float32,
	A uintptr, at DataType, lda int, B uintptr, bt DataType, ldb int, beta float32,
	Cp uintptr, ct DataType, ldc int, compute ComputeType) error {
	if d.capture(func() error {
		return d.GemmEx(transA, transB, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, Cp, ct, ldc, compute)
	}, nil) {
		return nil
	}
	switch {
	case at == R32F && bt == R32F && ct == R32F && compute == Compute32F:
		return d.Sgemm(transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, Cp, ldc)
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
	elem := func(p uintptr, t DataType, rows, cols, ld int) func(i int) float32 {
		if t == R16BF {
			h := unsafe.Slice((*uint16)(addr(p)), colExtent(rows, cols, ld))
			return func(i int) float32 { return round.BF16Float(h[i]) }
		}
		f := floats(p, colExtent(rows, cols, ld))
		return func(i int) float32 { return round.TF32(f[i]) }
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

// GemmStridedBatchedEx is GemmEx over count problems whose operands start
// strideA, strideB, strideC elements apart.
func (d *Memory) GemmStridedBatchedEx(transA, transB bool, m, n, k int, alpha float32,
	A uintptr, at DataType, lda, strideA int, B uintptr, bt DataType, ldb, strideB int, beta float32,
	Cp uintptr, ct DataType, ldc, strideC, count int, compute ComputeType) error {
	if d.capture(func() error {
		return d.GemmStridedBatchedEx(transA, transB, m, n, k, alpha, A, at, lda, strideA, B, bt, ldb, strideB, beta,
			Cp, ct, ldc, strideC, count, compute)
	}, nil) {
		return nil
	}
	size := func(t DataType) int {
		if t == R16BF {
			return 2
		}
		return 4
	}
	for i := 0; i < count; i++ {
		if err := d.GemmEx(transA, transB, m, n, k, alpha, A+uintptr(size(at)*i*strideA), at, lda,
			B+uintptr(size(bt)*i*strideB), bt, ldb, beta, Cp+uintptr(size(ct)*i*strideC), ct, ldc, compute); err != nil {
			return err
		}
	}
	return nil
}

// Stream capture, as cuStreamBeginCapture and cuGraphLaunch do
// it: while capturing, the launches, device copies, clears and products
// are recorded with their arguments instead of run; a copy between host
// and device or a synchronisation fails and invalidates the capture (the
// CUDA driver refuses them on a capturing stream). An Graph is the
// calls recorded, run in order by each launch.
type Graph struct{ calls []func() error }

// capture records f (a call with its arguments; args, if any, copied
// first) when the stream is capturing, and reports whether it did.
func (m *Memory) capture(f func() error, args *[]uint64) bool {
	m.flush() // the copies queued before this call run first
	if m == nil || !m.capturing {
		return false
	}
	if args != nil {
		*args = slices.Clone(*args)
	}
	m.captured = append(m.captured, f)
	return true
}

// uncapturable fails what cannot be captured, invalidating the capture.
func (m *Memory) uncapturable(what string) error {
	if m == nil || !m.capturing {
		return nil
	}
	m.captureErr = fmt.Errorf("%s while the stream is capturing: not permitted (capture invalidated)", what)
	return m.captureErr
}

// BeginCapture is cuStreamBeginCapture.
func (m *Memory) BeginCapture() error {
	if m.capturing {
		return fmt.Errorf("the stream is capturing already")
	}
	m.flush()
	m.capturing, m.captured, m.captureErr = true, nil, nil
	return nil
}

// EndCapture is cuStreamEndCapture and its graph's instantiation: the
// calls recorded, or the error that invalidated the capture.
func (m *Memory) EndCapture() (*Graph, error) {
	if !m.capturing {
		return nil, fmt.Errorf("the stream is not capturing")
	}
	g := &Graph{calls: m.captured}
	err := m.captureErr
	m.capturing, m.captured, m.captureErr = false, nil, nil
	if err != nil {
		return nil, err
	}
	return g, nil
}

// LaunchGraph is cuGraphLaunch: g's calls, in order.
func (m *Memory) LaunchGraph(g *Graph) error {
	if m.capturing {
		return fmt.Errorf("graph launch while the stream is capturing")
	}
	for _, f := range g.calls {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// DestroyGraph forgets g's calls.
func (m *Memory) DestroyGraph(g *Graph) error {
	g.calls = nil
	return nil
}
