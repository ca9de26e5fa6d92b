//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/internal/emu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/round"
)

// OpenEmulator returns a Backend whose kernels are kernels/kernels.cu
// compiled for the CPU and run with each GPU thread a fiber (internal/emu), with device memory
// a reserved range of its own (emuMemory) and cuBLAS replaced by its
// column-major definition. Close gives all of its memory back. It is slow and only
// for tests (build tag cudaemu): it runs the kernels' own code where there
// is no GPU, so that everything but the PTX compilation and the hardware is
// checked against the CPU reference.
//
// Decode graphs are on unless RLHOST_CUDA_GRAPHS=0, uploads through
// page-locked memory unless RLHOST_CUDA_PINNED=0 (any other value: on).
func OpenEmulator() *Backend {
	m := &emuMemory{}
	d := &device{drv: emuDriver{m}, blas: rowMajor{api: emuBlas{m}}, name: "emulator", cc: [2]int{8, 0}}
	d.blas.d = d
	d.graphs.off, _ = graphsOffFromEnv()
	d.pin.off, _ = pinnedOffFromEnv()
	d.dl.off, _ = overlapOffFromEnv()
	if n, err := queueDepthFromEnv(); err == nil {
		d.queue.depth = n
	}
	return &Backend{d: d}
}

// emuDriver is one emulated device: its memory, and the kernels of
// internal/emu, which every emulated device shares (launches run one at a time).
type emuDriver struct{ m *emuMemory }

// hostPtr is the address of emulated device memory as a pointer.
func hostPtr(p dptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func (emuDriver) lock() (func(), error) { return func() {}, nil }

// emuMemSize is the address space each emulated device reserves.
const emuMemSize = 4 << 30

// emuMemory is an emulated device's memory: a reserved range of address
// space of its own, accessible only while an op of that device runs
// (device.run calls enter and leave). As device memory on a GPU, the host
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
type emuMemory struct {
	sync.Mutex
	region []byte       // reserved on the first malloc; nil before and after close
	top    int          // [0, top) holds every live block
	clean  int          // every byte from clean on is zero (clean >= top)
	prot   int          // [0, prot) is the page-rounded range whose protection follows depth
	spans  []emuSpan    // free blocks below top, by address, none adjacent
	live   map[dptr]int // the blocks handed out: size by address
	depth  int          // nested enter calls
	closed bool
	// the stream's capture (emuDriver.beginCapture): the calls queued
	// while capturing, and the error that invalidated the capture
	capturing  bool
	captured   []func() error
	captureErr error
	// refuse names a kernel whose launch a capture refuses (as the CUDA
	// driver refuses what cannot be captured): tests only
	refuse string
	// page-locked host memory handed out (hostAlloc), and the copies from
	// it queued and not yet run (pinned.go: they run when the stream
	// reaches them)
	pinned  [][]byte
	pending []emuCopy
}

// emuCopy is a copy from page-locked memory to the device, queued.
type emuCopy struct {
	dst   dptr
	src   unsafe.Pointer
	bytes int64
}

type emuSpan struct{ at, n int }

// emuStats is every emulated device's memory together: regions mapped,
// blocks and bytes handed out and not freed; emuStatsNow reads it (the
// tests check that closed devices leave nothing behind).
var emuStats struct {
	sync.Mutex
	regions, blocks int
	bytes           int64
}

type emuMemoryStats struct {
	Regions, Blocks int
	Bytes           int64
}

func emuStatsNow() emuMemoryStats {
	emuStats.Lock()
	defer emuStats.Unlock()
	return emuMemoryStats{emuStats.regions, emuStats.blocks, emuStats.bytes}
}

func emuCount(regions, blocks int, bytes int64) {
	emuStats.Lock()
	defer emuStats.Unlock()
	emuStats.regions += regions
	emuStats.blocks += blocks
	emuStats.bytes += bytes
}

var pageSize = os.Getpagesize()

func pageUp(n int) int { return (n + pageSize - 1) &^ (pageSize - 1) }

func (e emuDriver) malloc(bytes int64) (dptr, error) {
	m := e.m
	m.Lock()
	defer m.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	if m.region == nil {
		r, err := syscall.Mmap(-1, 0, emuMemSize, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
		if err != nil {
			return 0, fmt.Errorf("reserve emulated device memory: %w", err)
		}
		m.region, m.live = r, map[dptr]int{}
		emuCount(1, 0, 0)
	}
	n := max(256, (int(bytes)+255)&^255) // never 0: each block has its own address
	at := -1
	for i, s := range m.spans { // first fit, lowest address
		if s.n >= n {
			at = s.at
			if s.n == n {
				m.spans = slices.Delete(m.spans, i, i+1)
			} else {
				m.spans[i] = emuSpan{s.at + n, s.n - n}
			}
			break
		}
	}
	if at < 0 {
		if m.top+n > len(m.region) {
			return 0, fmt.Errorf("out of memory (%d bytes; the emulator's device has %d)", bytes, emuMemSize)
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
	p := dptr(uintptr(unsafe.Pointer(&m.region[at])))
	m.live[p] = n
	emuCount(0, 1, int64(n))
	return p, nil
}

func (e emuDriver) free(p dptr) error {
	m := e.m
	m.Lock()
	defer m.Unlock()
	n, ok := m.live[p]
	if !ok {
		return fmt.Errorf("free of %#x: not a block of this emulated device", uintptr(p))
	}
	delete(m.live, p)
	emuCount(0, -1, -int64(n))
	at := int(uintptr(p) - uintptr(unsafe.Pointer(&m.region[0])))
	i, _ := slices.BinarySearchFunc(m.spans, at, func(s emuSpan, at int) int { return s.at - at })
	s := emuSpan{at, n}
	if i < len(m.spans) && m.spans[i].at == at+n { // merge with the next
		s.n += m.spans[i].n
		m.spans = slices.Delete(m.spans, i, i+1)
	}
	if i > 0 && m.spans[i-1].at+m.spans[i-1].n == at { // and the previous
		i--
		s = emuSpan{m.spans[i].at, m.spans[i].n + s.n}
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

// close unmaps the device's memory: every block, freed or not.
func (e emuDriver) close() error {
	m := e.m
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
	emuCount(-1, -len(m.live), -bytes)
	err := syscall.Munmap(m.region)
	m.region, m.live, m.spans, m.top, m.clean, m.prot = nil, nil, nil, 0, 0, 0
	return err
}

// protect sets the protection of [from, to) of the region (page-aligned):
// readable and writable inside an op, inaccessible outside.
func (m *emuMemory) protect(from, to int) error {
	if from >= to {
		return nil
	}
	prot := syscall.PROT_NONE
	if m.depth > 0 {
		prot = syscall.PROT_READ | syscall.PROT_WRITE
	}
	return syscall.Mprotect(m.region[from:to], prot)
}

func (e emuDriver) enter() {
	m := e.m
	m.Lock()
	defer m.Unlock()
	m.depth++
	if m.depth == 1 && m.region != nil {
		must(m.protect(0, m.prot))
	}
}

func (e emuDriver) leave() {
	m := e.m
	m.Lock()
	defer m.Unlock()
	m.depth--
	if m.depth == 0 && m.region != nil {
		must(m.protect(0, m.prot))
	}
}

// htod copies at once from pageable memory (the driver stages its bytes
// before it returns) and queues a copy from page-locked memory, which
// reads its bytes when the stream reaches it, as on a GPU.
func (e emuDriver) htod(dst dptr, src unsafe.Pointer, bytes int64) error {
	if err := e.m.uncapturable("a copy from the host"); err != nil {
		return err
	}
	if e.m.isPinned(src, bytes) {
		e.m.pending = append(e.m.pending, emuCopy{dst, src, bytes})
		return nil
	}
	e.m.flush()
	copy(unsafe.Slice((*byte)(hostPtr(dst)), bytes), unsafe.Slice((*byte)(src), bytes))
	return nil
}

// hostAlloc is page-locked memory: anonymous memory of the emulator's own
// (pinner).
func (e emuDriver) hostAlloc(bytes int64) (unsafe.Pointer, error) {
	b, err := syscall.Mmap(-1, 0, int(bytes), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes: %w", bytes, err)
	}
	e.m.Lock()
	e.m.pinned = append(e.m.pinned, b)
	e.m.Unlock()
	return unsafe.Pointer(&b[0]), nil
}

func (e emuDriver) hostFree(p unsafe.Pointer) error {
	m := e.m
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
func (m *emuMemory) isPinned(p unsafe.Pointer, bytes int64) bool {
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
func (m *emuMemory) flush() {
	if m == nil || len(m.pending) == 0 {
		return
	}
	e := emuDriver{m}
	e.enter()
	defer e.leave()
	for _, c := range m.pending {
		copy(unsafe.Slice((*byte)(hostPtr(c.dst)), c.bytes), unsafe.Slice((*byte)(c.src), c.bytes))
	}
	m.pending = m.pending[:0]
}

func (e emuDriver) dtoh(dst unsafe.Pointer, src dptr, bytes int64) error {
	if err := e.m.uncapturable("a copy to the host"); err != nil {
		return err
	}
	e.m.flush()
	copy(unsafe.Slice((*byte)(dst), bytes), unsafe.Slice((*byte)(hostPtr(src)), bytes))
	return nil
}

// dtohAsync copies at once: the emulator's stream has run every op queued
// before it (launches and copies run when they are queued), and a copy
// from page-locked memory still pending runs first.
func (e emuDriver) dtohAsync(dst unsafe.Pointer, src dptr, bytes int64) error {
	if err := e.m.uncapturable("a copy to the host"); err != nil {
		return err
	}
	if !e.m.isPinned(dst, bytes) {
		return fmt.Errorf("queued copy to the host into pageable memory at %p", dst)
	}
	e.m.flush()
	copy(unsafe.Slice((*byte)(dst), bytes), unsafe.Slice((*byte)(hostPtr(src)), bytes))
	return nil
}

// emuPlanted names, per kernel, a build of dev/cuda to run in its place
// (registered as "kernel/name"): a planted defect, a variant waiting for a
// GPU proof, or a former kernel kept to compare with (e.g.
// sample_tokens_hist/bisect). The tests set it (UseBuild).
var emuPlanted = map[string]string{}

// UseBuild launches dev/cuda's build "kernel/name" in kernel's place on
// every emulated device (name "": kernel itself) until restore is called,
// which puts back what was there: the tests' way to prove that a check
// fails on a planted defect, and to run a variant's checks.
func UseBuild(kernel, name string) (restore func()) {
	was, had := emuPlanted[kernel]
	if name == "" {
		delete(emuPlanted, kernel)
	} else {
		emuPlanted[kernel] = name
	}
	return func() {
		if had {
			emuPlanted[kernel] = was
		} else {
			delete(emuPlanted, kernel)
		}
	}
}

// BuildVariant is UseBuild as a switch (cudacheck.Variant): on, kernel's
// build name runs in its place; off, kernel itself.
func BuildVariant(kernel, name string) func(on bool) {
	return func(on bool) {
		if on {
			emuPlanted[kernel] = name
		} else {
			delete(emuPlanted, kernel)
		}
	}
}

func (e emuDriver) launch(kernel string, grid int, args []uint64) error {
	if e.m.capturing && kernel == e.m.refuse {
		return e.m.uncapturable("a launch of " + kernel)
	}
	if e.m.capture(func() error { return e.launch(kernel, grid, args) }, &args) {
		return nil
	}
	if p := emuPlanted[kernel]; p != "" {
		kernel += "/" + p
	}
	return emu.Launch(kernel, grid, args)
}

func (e emuDriver) sync() error {
	if err := e.m.uncapturable("a synchronisation"); err != nil {
		return err
	}
	e.m.flush()
	return nil
}

// emuEvent is a timing event of the emulator: launches and copies run
// synchronously, so an event recorded after an op passes when it is
// recorded, and the time between two events is the host's wall time.
type emuEvent struct{ at time.Time }

func (emuDriver) newEvent() (event, error) { return &emuEvent{}, nil }

func (emuDriver) record(e event) error {
	e.(*emuEvent).at = time.Now()
	return nil
}

func (emuDriver) elapsed(start, end event) (time.Duration, error) {
	s, t := start.(*emuEvent), end.(*emuEvent)
	if s.at.IsZero() || t.at.IsZero() {
		return 0, fmt.Errorf("event not recorded")
	}
	return t.at.Sub(s.at), nil
}

func (emuDriver) destroyEvent(event) error { return nil }

// The queue's events (queue.go): the stream has run everything queued
// when an event is recorded, so a wait returns at once.
func (emuDriver) newSyncEvent() (event, error) { return &emuEvent{}, nil }

func (emuDriver) waitEvent(e event) error {
	if e.(*emuEvent).at.IsZero() {
		return fmt.Errorf("wait for an event never recorded")
	}
	return nil
}

// memInfo reports the emulator's device as 1 GiB with nothing free beyond what it has.
func (emuDriver) memInfo() (free, total int64, err error) { return 0, 1 << 30, nil }

func (e emuDriver) dtod(dst, src dptr, bytes int64) error {
	if e.m.capture(func() error { return e.dtod(dst, src, bytes) }, nil) {
		return nil
	}
	copy(unsafe.Slice((*byte)(hostPtr(dst)), bytes), unsafe.Slice((*byte)(hostPtr(src)), bytes))
	return nil
}

func (e emuDriver) zero(p dptr, bytes int64) error {
	if e.m.capture(func() error { return e.zero(p, bytes) }, nil) {
		return nil
	}
	clear(unsafe.Slice((*byte)(hostPtr(p)), bytes))
	return nil
}

// emuBlas is cuBLAS's column-major products by their definition (float64
// sums): C = alpha op(A) op(B) + beta C with element (i,j) of a matrix X at
// X[i + j*ldx], op(X) = X^T when trans. It shares no code with the row-major
// mapping (blas.go) or gpu/cpu, so the checks test that mapping.
type emuBlas struct{ m *emuMemory }

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

func (e emuBlas) sgemm(transA, transB bool, m, n, k int, alpha float32, A dptr, lda int,
	B dptr, ldb int, beta float32, Cp dptr, ldc int) error {
	if e.m.capture(func() error { return e.sgemm(transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, Cp, ldc) }, nil) {
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

func (e emuBlas) sgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
	A dptr, lda, strideA int, B dptr, ldb, strideB int, beta float32, Cp dptr, ldc, strideC, count int) error {
	if e.m.capture(func() error {
		return e.sgemmStridedBatched(transA, transB, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, Cp, ldc, strideC, count)
	}, nil) {
		return nil
	}
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
// TF32 (round.TF32: a 10-bit mantissa, nearest, ties away) and the exact
// products summed in fp32; bfloat16 operands (CUDA_R_16BF, taken as they
// are: the device's f32_to_bf16 made them) with CUBLAS_COMPUTE_32F and an
// fp32 C, the exact products summed in fp32 in order of k. Then
// C = alpha*sum + beta*C in fp32. Other combinations are refused, as
// cuBLAS refuses what it does not support.
func (e emuBlas) gemmEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda int, B dptr, bt DataType, ldb int, beta float32,
	Cp dptr, ct DataType, ldc int, compute ComputeType) error {
	if e.m.capture(func() error {
		return e.gemmEx(transA, transB, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, Cp, ct, ldc, compute)
	}, nil) {
		return nil
	}
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

// gemmStridedBatchedEx is gemmEx over count problems whose operands start
// strideA, strideB, strideC elements apart.
func (e emuBlas) gemmStridedBatchedEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda, strideA int, B dptr, bt DataType, ldb, strideB int, beta float32,
	Cp dptr, ct DataType, ldc, strideC, count int, compute ComputeType) error {
	if e.m.capture(func() error {
		return e.gemmStridedBatchedEx(transA, transB, m, n, k, alpha, A, at, lda, strideA, B, bt, ldb, strideB, beta,
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
		if err := e.gemmEx(transA, transB, m, n, k, alpha, A+dptr(size(at)*i*strideA), at, lda,
			B+dptr(size(bt)*i*strideB), bt, ldb, beta, Cp+dptr(size(ct)*i*strideC), ct, ldc, compute); err != nil {
			return err
		}
	}
	return nil
}

func (emuBlas) library() string { return "column-major reference products (emulator)" }

// Stream capture (grapher), as cuStreamBeginCapture and cuGraphLaunch do
// it: while capturing, the launches, device copies, clears and products
// are recorded with their arguments instead of run; a copy between host
// and device or a synchronisation fails and invalidates the capture (the
// CUDA driver refuses them on a capturing stream). An emuGraph is the
// calls recorded, run in order by each launch.
type emuGraph struct{ calls []func() error }

// capture records f (a call with its arguments; args, if any, copied
// first) when the stream is capturing, and reports whether it did.
func (m *emuMemory) capture(f func() error, args *[]uint64) bool {
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
func (m *emuMemory) uncapturable(what string) error {
	if m == nil || !m.capturing {
		return nil
	}
	m.captureErr = fmt.Errorf("%s while the stream is capturing: not permitted (capture invalidated)", what)
	return m.captureErr
}

func (e emuDriver) beginCapture() error {
	if e.m.capturing {
		return fmt.Errorf("the stream is capturing already")
	}
	e.m.flush()
	e.m.capturing, e.m.captured, e.m.captureErr = true, nil, nil
	return nil
}

func (e emuDriver) endCapture() (graphExec, error) {
	if !e.m.capturing {
		return nil, fmt.Errorf("the stream is not capturing")
	}
	g := &emuGraph{calls: e.m.captured}
	err := e.m.captureErr
	e.m.capturing, e.m.captured, e.m.captureErr = false, nil, nil
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (e emuDriver) launchGraph(g graphExec) error {
	if e.m.capturing {
		return fmt.Errorf("graph launch while the stream is capturing")
	}
	for _, f := range g.(*emuGraph).calls {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func (emuDriver) destroyGraph(g graphExec) error {
	g.(*emuGraph).calls = nil
	return nil
}

var _ grapher = emuDriver{}
