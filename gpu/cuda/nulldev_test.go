//go:build linux

package cuda

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/internal/launch"
)

// The null device: a driver and a cuBLAS on which nothing runs, so that
// the host's own cost of queueing an op (the backend's Go code: staging,
// tensor and bfloat16-copy lookups, argument slots, the driver wrapper's Go
// side) can be measured without a GPU (BenchmarkHostCost). Kernels and
// products do nothing; memory is a reserved range of address space that is
// never mapped (PROT_NONE), so tensors have distinct device addresses as
// on a GPU and the host faults if it touches one outside a copy, as it
// would on a GPU; copies to the device do nothing, copies to the host
// write zeros. It counts every call it is given: the ops the host queued.

// nullDriver is the null device's driver.
type nullDriver struct {
	region []byte                   // reserved, PROT_NONE
	top    int                      // [0, top) handed out
	live   map[dptr]int64           // blocks handed out: size by address
	freed  map[int64][]dptr         // freed blocks by size, reused first
	fn     *launch.KernelTable[int] // the kernels, resolved as the CUDA driver resolves them
	params launch.SlotPointers      // as the CUDA driver's
	ops    nullOps
	pinned [][]byte // page-locked memory handed out (ordinary memory here)
}

// nullOps counts the calls the null device was given.
type nullOps struct {
	launches, blas, htod, dtoh, dtod, zero, syncs, mallocs, graphs, waits int64
	// passed is the ops the host knows the stream has run: those queued
	// before its last synchronisation or the last event it waited for;
	// maxAhead the most ops it had queued beyond them (queue.go's bound).
	passed, maxAhead int64
}

// sub is the counts from o0 to o (passed and maxAhead: o's).
func (o nullOps) sub(o0 nullOps) nullOps {
	return nullOps{launches: o.launches - o0.launches, blas: o.blas - o0.blas, htod: o.htod - o0.htod,
		dtoh: o.dtoh - o0.dtoh, dtod: o.dtod - o0.dtod, zero: o.zero - o0.zero, syncs: o.syncs - o0.syncs,
		mallocs: o.mallocs - o0.mallocs, graphs: o.graphs - o0.graphs, waits: o.waits - o0.waits,
		passed: o.passed, maxAhead: o.maxAhead}
}

// queue notes one more op queued (after its count).
func (o *nullOps) queue() { o.maxAhead = max(o.maxAhead, o.queued()-o.passed) }

// queued is every op the host queued on the stream: launches, cuBLAS
// calls, copies (device->host copies included; they block) and graph
// launches.
func (o nullOps) queued() int64 {
	return o.launches + o.blas + o.htod + o.dtoh + o.dtod + o.zero + o.graphs
}

// nullMemSize is the address space the null device reserves: room for a
// Qwen2.5-0.5B-shaped training step's tensors (none of it is ever backed).
const nullMemSize = 1 << 40

func newNullDriver() (*nullDriver, error) {
	r, err := syscall.Mmap(-1, 0, nullMemSize, syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("reserve the null device's address space: %w", err)
	}
	n := &nullDriver{region: r, live: map[dptr]int64{}, freed: map[int64][]dptr{}, fn: launch.NewKernelTable[int]()}
	for i, k := range kernelNames {
		n.fn.Add(k, i)
	}
	return n, nil
}

func nullUnlock() {}

func (n *nullDriver) lock() (func(), error) { return nullUnlock, nil }

func (n *nullDriver) malloc(bytes int64) (dptr, error) {
	bytes = max(256, (bytes+255)&^255)
	n.ops.mallocs++
	var p dptr
	if ps := n.freed[bytes]; len(ps) > 0 {
		p, n.freed[bytes] = ps[len(ps)-1], ps[:len(ps)-1]
	} else {
		if n.top+int(bytes) > len(n.region) {
			return 0, fmt.Errorf("out of memory (%d bytes; the null device has %d)", bytes, len(n.region))
		}
		p = dptr(uintptr(unsafe.Pointer(&n.region[n.top])))
		n.top += int(bytes)
	}
	n.live[p] = bytes
	return p, nil
}

// free keeps the block for a malloc of its size (the backend frees
// staging chunks and tensors it gives back; sizes recur).
func (n *nullDriver) free(p dptr) error {
	bytes, ok := n.live[p]
	if !ok {
		return fmt.Errorf("free of %#x: not a block of the null device", uintptr(p))
	}
	delete(n.live, p)
	n.freed[bytes] = append(n.freed[bytes], p)
	return nil
}

func (n *nullDriver) memInfo() (free, total int64, err error) {
	return int64(nullMemSize - n.top), nullMemSize, nil
}

// hostAlloc and hostFree: the upload buffer (pinner) is ordinary memory,
// so that the host's copy into it is measured.
func (n *nullDriver) hostAlloc(bytes int64) (unsafe.Pointer, error) {
	b := make([]byte, bytes)
	n.pinned = append(n.pinned, b)
	return unsafe.Pointer(&b[0]), nil
}

func (n *nullDriver) hostFree(p unsafe.Pointer) error {
	for i, b := range n.pinned {
		if unsafe.Pointer(&b[0]) == p {
			n.pinned = slices.Delete(n.pinned, i, i+1)
			return nil
		}
	}
	return fmt.Errorf("free of %p: not the null device's page-locked memory", p)
}

func (n *nullDriver) htod(dst dptr, src unsafe.Pointer, bytes int64) error {
	n.ops.htod++
	n.ops.queue()
	return nil
}

func (n *nullDriver) dtoh(dst unsafe.Pointer, src dptr, bytes int64) error {
	n.ops.dtoh++
	n.ops.passed = n.ops.queued() // it waits for the stream
	clear(unsafe.Slice((*byte)(dst), bytes))
	return nil
}

func (n *nullDriver) dtohAsync(dst unsafe.Pointer, src dptr, bytes int64) error {
	n.ops.dtoh++
	n.ops.queue()
	return nil
}

func (n *nullDriver) dtod(dst, src dptr, bytes int64) error {
	n.ops.dtod++
	n.ops.queue()
	return nil
}

func (n *nullDriver) zero(p dptr, bytes int64) error {
	n.ops.zero++
	n.ops.queue()
	return nil
}

// launch does what the CUDA driver's launch does on the host before it calls the
// CUDA driver: the kernel's handle by name, a pointer to each argument slot.
func (n *nullDriver) launch(kernel string, grid int, args []uint64) error {
	f, ok := n.fn.Get(kernel)
	if !ok {
		return fmt.Errorf("no kernel %s in the module", kernel)
	}
	params := n.params.Of(args)
	n.ops.launches++
	n.ops.queue()
	nullSink = f + len(params)
	return nil
}

// nullSink keeps the compiler from dropping the null launch's work.
var nullSink int

func (n *nullDriver) sync() error {
	n.ops.syncs++
	n.ops.passed = n.ops.queued()
	return nil
}

// Timing events (EnableProfile): recorded, and every op takes no time; at
// is the ops queued when one was recorded (the queue's events).
type nullEvent struct {
	recorded bool
	at       int64
}

func (n *nullDriver) newEvent() (event, error) { return &nullEvent{}, nil }

func (n *nullDriver) record(e event) error {
	e.(*nullEvent).recorded = true
	e.(*nullEvent).at = n.ops.queued()
	return nil
}

func (n *nullDriver) elapsed(start, end event) (time.Duration, error) {
	if !start.(*nullEvent).recorded || !end.(*nullEvent).recorded {
		return 0, fmt.Errorf("elapsed time of an event not recorded")
	}
	return 0, nil
}

func (n *nullDriver) destroyEvent(event) error { return nil }

// The queue's events (queue.go): recorded, and passed at once.
func (n *nullDriver) newSyncEvent() (event, error) { return &nullEvent{}, nil }

func (n *nullDriver) waitEvent(e event) error {
	if !e.(*nullEvent).recorded {
		return fmt.Errorf("wait for an event never recorded")
	}
	n.ops.waits++
	n.ops.passed = max(n.ops.passed, e.(*nullEvent).at)
	return nil
}

func (n *nullDriver) close() error {
	if n.region == nil {
		return nil
	}
	err := syscall.Munmap(n.region)
	n.region = nil
	return err
}

// nullBlas is the null device's cuBLAS: each call counted, nothing computed.
type nullBlas struct{ ops *nullOps }

func (b nullBlas) sgemm(transA, transB bool, m, n, k int, alpha float32, A dptr, lda int,
	B dptr, ldb int, beta float32, C dptr, ldc int) error {
	b.ops.blas++
	b.ops.queue()
	return nil
}

func (b nullBlas) sgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
	A dptr, lda, strideA int, B dptr, ldb, strideB int, beta float32,
	C dptr, ldc, strideC, count int) error {
	b.ops.blas++
	b.ops.queue()
	return nil
}

func (b nullBlas) gemmEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda int, B dptr, bt DataType, ldb int, beta float32,
	C dptr, ct DataType, ldc int, compute ComputeType) error {
	b.ops.blas++
	b.ops.queue()
	return nil
}

func (b nullBlas) gemmStridedBatchedEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda, strideA int, B dptr, bt DataType, ldb, strideB int, beta float32,
	C dptr, ct DataType, ldc, strideC, count int, compute ComputeType) error {
	b.ops.blas++
	b.ops.queue()
	return nil
}

func (nullBlas) library() string { return "null (nothing computed)" }

// nullGraphDriver is the null device with stream capture (grapher, for
// decode graphs): a capture keeps nothing (the calls reach the null
// driver and are counted, as a capturing stream is given them), a graph
// launch is counted and runs nothing.
type nullGraphDriver struct{ *nullDriver }

type nullGraph struct{}

func (nullGraphDriver) beginCapture() error            { return nil }
func (nullGraphDriver) endCapture() (graphExec, error) { return nullGraph{}, nil }
func (n nullGraphDriver) launchGraph(graphExec) error  { n.ops.graphs++; n.ops.queue(); return nil }
func (nullGraphDriver) destroyGraph(graphExec) error   { return nil }

// openNull returns a Backend on a null device; Close releases its address
// space.
func openNull(tb testing.TB) (*Backend, *nullDriver) { return openNullDevice(tb, false) }

// openNullDevice is openNull, with stream capture if graphs.
func openNullDevice(tb testing.TB, graphs bool) (*Backend, *nullDriver) {
	tb.Helper()
	drv, err := newNullDriver()
	if err != nil {
		tb.Skip(err)
	}
	var d driver = drv
	if graphs {
		d = nullGraphDriver{drv}
	}
	be := &Backend{d: &device{drv: d, blas: rowMajor{api: nullBlas{&drv.ops}}, name: "null", cc: [2]int{9, 0}}}
	be.d.blas.d = be.d
	off, err := overlapOffFromEnv() // OverlapEnv=0: BenchmarkGRPORollout without overlap scheduling
	if err != nil {
		tb.Fatal(err)
	}
	be.d.dl.off = off
	depth, err := queueDepthFromEnv() // QueueDepthEnv=0: BenchmarkHostCost without the bound
	if err != nil {
		tb.Fatal(err)
	}
	be.d.queue.depth = depth
	tb.Cleanup(func() { be.Close() })
	return be, drv
}
