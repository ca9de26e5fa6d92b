package cuda

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
)

// blockSize is BLOCK of kernels.cu: the block size of every launch.
const blockSize = 256

// dptr is a device address.
type dptr uintptr

// driver is what the ops need from a device: memory, copies, kernel
// launches by name, and a way to make the device current for one op. The
// CUDA driver implements it with -tags cuda (internal/cudrv, cudadrv.go); the emulator that
// runs kernels.cu on the CPU implements it with -tags cudaemu (emu.go over internal/emu).
type driver interface {
	lock() (unlock func(), err error) // make the device current on this goroutine's thread
	malloc(bytes int64) (dptr, error)
	free(p dptr) error
	memInfo() (free, total int64, err error)
	// htod queues a copy from the host on the stream; the host memory may
	// be reused when it returns (pageable memory is staged by the driver).
	htod(dst dptr, src unsafe.Pointer, bytes int64) error
	// dtoh copies to the host once the stream's queued work has finished.
	dtoh(dst unsafe.Pointer, src dptr, bytes int64) error
	dtod(dst, src dptr, bytes int64) error               // queued on the stream
	zero(p dptr, bytes int64) error                      // queued on the stream; bytes % 4 == 0
	launch(kernel string, grid int, args []uint64) error // blockSize threads per block
	sync() error                                         // wait for every launch and copy
}

// guard is implemented by a driver whose memory the host may touch only
// inside an op (the emulator: it faults outside, as device memory would).
type guard interface {
	enter()
	leave()
}

// colMajorBlas is cuBLAS as it is: column-major operands, errors returned.
// The CUDA build implements it with the real library (cublas.go), the
// emulator with the textbook definition of the products (internal/emu), so that
// the row-major mapping of blas.go is tested without a GPU.
type colMajorBlas interface {
	sgemm(transA, transB bool, m, n, k int, alpha float32, A dptr, lda int,
		B dptr, ldb int, beta float32, C dptr, ldc int) error
	sgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
		A dptr, lda, strideA int, B dptr, ldb, strideB int, beta float32,
		C dptr, ldc, strideC, count int) error
	gemmEx(transA, transB bool, m, n, k int, alpha float32,
		A dptr, at DataType, lda int, B dptr, bt DataType, ldb int, beta float32,
		C dptr, ct DataType, ldc int, compute ComputeType) error
	gemmStridedBatchedEx(transA, transB bool, m, n, k int, alpha float32,
		A dptr, at DataType, lda, strideA int, B dptr, bt DataType, ldb, strideB int, beta float32,
		C dptr, ct DataType, ldc, strideC, count int, compute ComputeType) error
	library() string
}

// device is the state of a Backend: its driver and cuBLAS, the tensors it
// owns, the staging arena for host slices and the transfer counters. mu
// serialises ops.
type device struct {
	mu    sync.Mutex
	drv   driver
	blas  rowMajor
	name  string
	cc    [2]int
	arena arena
	mem   tensors
	count Counters
	prec  Precision  // of MatmulForward and MatmulBackward (SetPrecision)
	bf16  []bf16Copy // resident bfloat16 copies of weight tensors (BF16)
	act   actCopy    // the shared bfloat16 copy of the last activation operand converted or produced (BF16)
	grad  [2]actCopy // the bfloat16 copies of output gradients their producers wrote (BF16)
	conv  convCounts // the f32_to_bf16 conversions since the last ResetCounters
	// unsharedBF16 converts every product's activation operand into the
	// op's staging arena, as the backend did before the copies were shared
	// (the reference path of the tests; never set otherwise).
	unsharedBF16 bool
	// checkShared makes every product that reuses the shared activation
	// copy convert the operand again and compare the two bit for bit,
	// failing the op on a difference (a stale copy): tests only, it
	// synchronises and downloads both.
	checkShared bool
	// plantBF16 names a defect planted in the bf16 products (bf16.go; a
	// planted bug for the checks, never set otherwise).
	plantBF16 string
	// stageHost makes every op stage its operands through the host, as
	// the backend did before tensors were resident (a planted bug for the
	// transfer tests; never set otherwise).
	stageHost bool
	// stageNamed does the same for the operands that lie in tensors whose
	// name starts with it (e.g. "LoRA": adapters kept on the host, as they
	// were before); a planted bug for the transfer tests, never set otherwise.
	stageNamed string
	// sampleHook, when set, may sample instead of the kernels and says
	// whether it did: for the tests alone (the transfer tests' planted bug
	// that downloads the logits and samples on the host; on the emulator,
	// sample_tokens_hist for calls the split path would take); never set
	// otherwise.
	sampleHook func(a *arena, tokens []int32, logp, logits []float32, params []gpu.SampleParams, M, V int) bool
	closed     bool // Close ran: every op fails
	// prof times every launch, cuBLAS call and copy while profiling is on
	// (EnableProfile: drv and blas.api are then wrapped); nil when off.
	// profAgg is the times resolved so far (Profile).
	prof    *profiler
	profAgg profileAgg
	slots   []uint64   // the argument slots of the launch being queued (launch)
	graphs  graphs     // decode graphs (graph.go)
	pin     pinned     // the page-locked upload buffer (pinned.go)
	queue   queueLimit // the bound on the ops queued ahead of the stream (queue.go)
	dl      downloads  // the queued copies of samples to the host (overlap.go)
	// enqTiming times the calls that queue work (SetEnqueueTiming)
	enqTiming bool
}

// run executes one op on the device: the context is made current on a
// locked OS thread and f queues work on the stream, staging host slices
// through the arena. The stream is synchronised only when f staged an
// output to the host (it is copied back then); otherwise the op returns
// with its work queued. A failure panics with an *Error naming op.
func (d *device) run(op string, f func(a *arena)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		panic(&Error{op, ErrClosed})
	}
	unlock, err := d.drv.lock()
	if err != nil {
		panic(&Error{op, err})
	}
	defer unlock()
	if g, ok := d.drv.(guard); ok {
		g.enter()
		defer g.leave()
	}
	a := &d.arena
	a.reset(d)
	// Every tensor the op wrote is marked written again once it returns:
	// staging an output marks it when the op starts, and a copy the op
	// made of a tensor it also writes predates the write.
	defer a.endWrites()
	defer func() {
		if r := recover(); r != nil {
			a.abort()
			if e, ok := r.(*Error); ok && e.Op == "" {
				e.Op = op
			}
			panic(r)
		}
	}()
	f(a)
	if !a.hasBack() {
		a.staged = a.staged[:0]
		return
	}
	if err := d.sync(); err != nil {
		panic(&Error{op, err})
	}
	if err := a.copyBack(); err != nil {
		panic(&Error{op, err})
	}
}

// sync waits for the stream, counted and timed.
func (d *device) sync() error {
	d.count.Syncs++
	start := time.Now()
	err := d.drv.sync()
	d.count.SyncWait += time.Since(start)
	if err == nil {
		d.pin.synced()
		d.queue.synced()
	}
	return err
}

// dtod copies within the device (queued), counted apart from the host's
// copies (htod, the host's: pinned.go).
func (d *device) dtod(dst, src dptr, bytes int64) error {
	d.count.DeviceCopies++
	d.count.DeviceToDevice += bytes
	t := d.enqStart()
	err := d.drv.dtod(dst, src, bytes)
	d.enqEnd(t)
	return err
}

// dtoh copies to the host after synchronising the stream.
func (d *device) dtoh(dst unsafe.Pointer, src dptr, bytes int64) error {
	if err := d.sync(); err != nil {
		return err
	}
	d.count.Downloads++
	d.count.DeviceToHost += bytes
	d.count.Largest = max(d.count.Largest, bytes)
	start := time.Now() // the copy itself blocks the host too
	err := d.drv.dtoh(dst, src, bytes)
	d.count.SyncWait += time.Since(start)
	return err
}

// launch runs kernel name over grid blocks of blockSize threads. args are
// the kernel's arguments as 8-byte slots (see arg helpers). They are
// copied into the device's slot buffer for the driver, so that args itself
// does not escape: a call queues no allocation.
func (d *device) launch(name string, grid int, args ...uint64) {
	if grid <= 0 {
		return
	}
	d.count.Launches++
	d.slots = append(d.slots[:0], args...)
	t := d.enqStart()
	err := d.drv.launch(name, grid, d.slots)
	d.enqEnd(t)
	if err != nil {
		panic(&Error{"", fmt.Errorf("launch %s: %w", name, err)})
	}
}

// nanotime is the runtime's monotonic clock in nanoseconds, read around
// the calls that queue work (Counters.EnqueueTime): cheaper than
// time.Now, which reads the wall clock too (49 and 91 ns on the dev VM).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// enqStart and enqEnd time a call that queues work (Counters.EnqueueTime)
// while the timing is on (SetEnqueueTiming), outside decode-graph
// regions: inside one the recorder takes the calls (a comparison or a
// capture, no work queued). enqStart returns 0 when it does not time.
// enqStart also makes room for the call in the queue (queue.go).
func (d *device) enqStart() int64 {
	d.queueRoom()
	if !d.enqTiming || d.graphs.mode != graphIdle {
		return 0
	}
	return nanotime()
}

// enqEnd also counts the call as one op queued (queue.go).
func (d *device) enqEnd(t int64) {
	if t != 0 {
		d.count.EnqueueTime += time.Duration(nanotime() - t)
	}
	d.queued()
}

// colsumRows is COLSUM_ROWS of kernels/common.cuh: the rows of a chunk of
// a two-pass column sum.
const colsumRows = 256

// colsums adds the column sums of an [N,C] quantity to out [C] in two
// passes (kernels/common.cuh): kernel (bias_backward,
// rmsnorm_backward_dweight) writes each chunk's sums to scratch, its
// arguments after that scratch pointer being args, over 32-column tiles x
// chunks of colsumRows rows; colsum_finish adds the chunks in order.
func (d *device) colsums(a *arena, kernel string, out dptr, N, C int, args ...uint64) {
	if N == 0 || C == 0 {
		return
	}
	chunks := (N + colsumRows - 1) / colsumRows
	part := a.alloc(int64(chunks) * int64(C) * 4)
	var slots [16]uint64
	d.launch(kernel, (C+31)/32*chunks, append(append(slots[:0], ptr(part)), args...)...)
	d.launch("colsum_finish", gridFor(C), ptr(out), ptr(part), i64(chunks), i64(C))
}

// gridFor is the grid of a grid-stride elementwise kernel over n items.
func gridFor(n int) int {
	g := (n + blockSize - 1) / blockSize
	return min(g, 65535)
}

// Argument slots: every kernel argument is 8 bytes (gorgonia.org/cu's Launch
// copies 8 bytes per argument); a float sits in the low 4 bytes.
func i64(n int) uint64     { return uint64(int64(n)) }
func f32(x float32) uint64 { return uint64(math.Float32bits(x)) }
func ptr(p dptr) uint64    { return uint64(p) }

// ---------------------------------------------------------------------------
// staging arena

// arena hands out device memory for one op from chunks that are kept between
// ops: after an op that needed more than the first chunk, the chunks are
// replaced by one of the total size. Host slices are staged by their address,
// so a slice passed twice (out aliasing inp) shares one device buffer.
type arena struct {
	d      *device
	chunks []chunk
	used   int64 // bytes used in this op (all chunks)
	staged []staging
	writes []dptr // the live tensors this op writes (outputs staged with back)
	// produced are the bfloat16 copies the op's kernels write beside their
	// outputs (bf16.go), made valid when the op ends
	produced []produced
}

type chunk struct {
	p        dptr
	size, at int64
}

type staging struct {
	host  unsafe.Pointer
	bytes int64
	dev   dptr
	back  bool // copy to the host after the op
}

func (a *arena) reset(d *device) {
	a.d = d
	if len(a.chunks) > 1 {
		total := a.used
		d.sync() // queued ops may still read the chunks
		for _, c := range a.chunks {
			a.d.drv.free(c.p)
		}
		a.chunks = a.chunks[:0]
		if p, err := a.d.drv.malloc(total); err == nil {
			a.chunks = append(a.chunks, chunk{p: p, size: total})
		}
	}
	for i := range a.chunks {
		a.chunks[i].at = 0
	}
	a.used = 0
	a.staged = a.staged[:0]
	a.writes = a.writes[:0]
	a.produced = a.produced[:0]
}

// abort forgets the op's staged operands and the copies its kernels were
// to write (a failed op leaves them invalid).
func (a *arena) abort() {
	a.staged = a.staged[:0]
	a.produced = a.produced[:0]
}

// endWrites marks every tensor the op wrote as written (device.wrote): their
// bfloat16 copies, made before the op's writes or during the op, are stale;
// then the copies the op's kernels wrote of their outputs become valid
// (device.producedValid).
func (a *arena) endWrites() {
	for _, t := range a.writes {
		a.d.wrote(t)
	}
	for _, p := range a.produced {
		a.d.producedValid(p, a.writes)
	}
	a.writes = a.writes[:0]
	a.produced = a.produced[:0]
}

// alloc returns bytes of device memory, 256-byte aligned, valid until the op ends.
func (a *arena) alloc(bytes int64) dptr {
	bytes = (bytes + 255) &^ 255
	a.used += bytes
	if n := len(a.chunks); n > 0 {
		c := &a.chunks[n-1]
		if c.at+bytes <= c.size {
			p := c.p + dptr(c.at)
			c.at += bytes
			return p
		}
	}
	size := max(bytes, 64<<20)
	if n := len(a.chunks); n > 0 {
		size = max(size, 2*a.chunks[n-1].size)
	}
	p, err := a.d.malloc("staging buffer for host operands", size)
	if err != nil {
		panic(err)
	}
	a.chunks = append(a.chunks, chunk{p: p, size: size, at: bytes})
	return p
}

// stage returns the device address of [host, host+bytes): a tensor the
// backend owns (Alloc) as it is, host memory through a buffer, filled from
// the host if in, copied back after the op if back.
func (a *arena) stage(host unsafe.Pointer, bytes int64, in, back bool) dptr {
	if bytes == 0 {
		return 0
	}
	if p, t := a.d.mem.find(host, bytes); t != nil {
		if back {
			a.d.wrote(t.p)
			a.writes = append(a.writes, t.p)
		}
		if !a.d.stageHost && (a.d.stageNamed == "" || !strings.HasPrefix(t.name, a.d.stageNamed)) {
			return p
		}
		// planted bug (transfer tests): the operand goes through the host
		h := make([]byte, bytes)
		if err := a.d.dtoh(unsafe.Pointer(&h[0]), p, bytes); err != nil {
			panic(&Error{"", err})
		}
		if err := a.d.htod(p, unsafe.Pointer(&h[0]), bytes); err != nil {
			panic(&Error{"", err})
		}
		return p
	}
	for i := range a.staged {
		s := &a.staged[i]
		if s.host == host && s.bytes == bytes {
			s.back = s.back || back
			return s.dev
		}
	}
	p := a.alloc(bytes)
	if in {
		if err := a.d.htod(p, host, bytes); err != nil {
			panic(&Error{"", fmt.Errorf("copy %d bytes to the device: %w", bytes, err)})
		}
	}
	a.staged = append(a.staged, staging{host: host, bytes: bytes, dev: p, back: back})
	return p
}

func (a *arena) hasBack() bool {
	for _, s := range a.staged {
		if s.back {
			return true
		}
	}
	return false
}

// copyBack copies the staged outputs to the host (the stream was synchronised).
func (a *arena) copyBack() error {
	for _, s := range a.staged {
		if s.back {
			a.d.count.Downloads++
			a.d.count.DeviceToHost += s.bytes
			a.d.count.Largest = max(a.d.count.Largest, s.bytes)
			if err := a.d.drv.dtoh(s.host, s.dev, s.bytes); err != nil {
				return fmt.Errorf("copy %d bytes to the host: %w", s.bytes, err)
			}
		}
	}
	a.staged = a.staged[:0]
	return nil
}

// in stages x [n] as an input, out as an overwritten output, inout as an
// accumulated output (read and written).
func (a *arena) in(x []float32, n int) dptr    { return a.f32(x, n, true, false) }
func (a *arena) out(x []float32, n int) dptr   { return a.f32(x, n, false, true) }
func (a *arena) inout(x []float32, n int) dptr { return a.f32(x, n, true, true) }

func (a *arena) f32(x []float32, n int, in, back bool) dptr {
	if n == 0 || x == nil {
		return 0
	}
	if len(x) < n {
		panic(&Error{"", fmt.Errorf("tensor of %d floats where %d are needed", len(x), n)})
	}
	return a.stage(unsafe.Pointer(&x[0]), int64(n)*4, in, back)
}

// ints stages the int32 tensor x [n] as an input.
func (a *arena) ints(x []int32, n int) dptr {
	if n == 0 {
		return 0
	}
	if len(x) < n {
		panic(&Error{"", fmt.Errorf("index tensor of %d where %d are needed", len(x), n)})
	}
	return a.stage(unsafe.Pointer(&x[0]), int64(n)*4, true, false)
}
