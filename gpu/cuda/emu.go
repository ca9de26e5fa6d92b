//go:build cudaemu && !cuda

package cuda

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/internal/emu"
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
	m := &emu.Memory{}
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

// emuDriver is one emulated device, internal/emu's Memory (its memory,
// copies and stream capture) and kernels (which every emulated device
// shares; launches run one at a time), as the backend's driver.
type emuDriver struct{ m *emu.Memory }

// hostPtr is the address of emulated device memory as a pointer.
func hostPtr(p dptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func (emuDriver) lock() (func(), error) { return func() {}, nil }

// emuStatsNow is every emulated device's memory together (internal/emu).
func emuStatsNow() emu.MemoryStats { return emu.StatsNow() }

// The driver's calls, internal/emu's: device pointers are uintptrs there.

func (e emuDriver) malloc(bytes int64) (dptr, error) {
	p, err := e.m.Malloc(bytes)
	if errors.Is(err, emu.ErrClosed) {
		return 0, ErrClosed
	}
	return dptr(p), err
}

func (e emuDriver) free(p dptr) error               { return e.m.Free(uintptr(p)) }
func (e emuDriver) close() error                    { return e.m.Close() }
func (e emuDriver) enter()                          { e.m.Enter() }
func (e emuDriver) leave()                          { e.m.Leave() }
func (e emuDriver) hostFree(p unsafe.Pointer) error { return e.m.HostFree(p) }
func (e emuDriver) sync() error                     { return e.m.Sync() }
func (e emuDriver) dtod(dst, src dptr, bytes int64) error {
	return e.m.DtoD(uintptr(dst), uintptr(src), bytes)
}
func (e emuDriver) zero(p dptr, bytes int64) error { return e.m.Zero(uintptr(p), bytes) }
func (e emuDriver) beginCapture() error            { return e.m.BeginCapture() }

func (e emuDriver) htod(dst dptr, src unsafe.Pointer, bytes int64) error {
	return e.m.HtoD(uintptr(dst), src, bytes)
}

func (e emuDriver) hostAlloc(bytes int64) (unsafe.Pointer, error) { return e.m.HostAlloc(bytes) }

func (e emuDriver) dtoh(dst unsafe.Pointer, src dptr, bytes int64) error {
	return e.m.DtoH(dst, uintptr(src), bytes)
}

func (e emuDriver) dtohAsync(dst unsafe.Pointer, src dptr, bytes int64) error {
	return e.m.DtoHAsync(dst, uintptr(src), bytes)
}

func (e emuDriver) launch(kernel string, grid int, args []uint64) error {
	return e.m.Launch(kernel, grid, args)
}

func (e emuDriver) endCapture() (graphExec, error) {
	g, err := e.m.EndCapture()
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (e emuDriver) launchGraph(g graphExec) error  { return e.m.LaunchGraph(g.(*emu.Graph)) }
func (e emuDriver) destroyGraph(g graphExec) error { return e.m.DestroyGraph(g.(*emu.Graph)) }

var _ grapher = emuDriver{}

// UseBuild launches dev/cuda's build "kernel/name" in kernel's place on
// every emulated device (name "": kernel itself) until restore is called,
// which puts back what was there: the tests' way to prove that a check
// fails on a planted defect, and to run a variant's checks.
func UseBuild(kernel, name string) (restore func()) {
	was, had := emu.Planted[kernel]
	if name == "" {
		delete(emu.Planted, kernel)
	} else {
		emu.Planted[kernel] = name
	}
	return func() {
		if had {
			emu.Planted[kernel] = was
		} else {
			delete(emu.Planted, kernel)
		}
	}
}

// BuildVariant is UseBuild as a switch (cudacheck.Variant): on, kernel's
// build name runs in its place; off, kernel itself.
func BuildVariant(kernel, name string) func(on bool) {
	return func(on bool) {
		if on {
			emu.Planted[kernel] = name
		} else {
			delete(emu.Planted, kernel)
		}
	}
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

// emuBlas is cuBLAS's column-major products by their definition
// (internal/emu), which share no code with the row-major mapping (blas.go)
// or gpu/cpu, so the checks test that mapping.
type emuBlas struct{ m *emu.Memory }

func (e emuBlas) sgemm(transA, transB bool, m, n, k int, alpha float32, A dptr, lda int,
	B dptr, ldb int, beta float32, C dptr, ldc int) error {
	return e.m.Sgemm(transA, transB, m, n, k, alpha, uintptr(A), lda, uintptr(B), ldb, beta, uintptr(C), ldc)
}

func (e emuBlas) sgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
	A dptr, lda, strideA int, B dptr, ldb, strideB int, beta float32, C dptr, ldc, strideC, count int) error {
	return e.m.SgemmStridedBatched(transA, transB, m, n, k, alpha, uintptr(A), lda, strideA, uintptr(B), ldb, strideB,
		beta, uintptr(C), ldc, strideC, count)
}

func (e emuBlas) gemmEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda int, B dptr, bt DataType, ldb int, beta float32,
	C dptr, ct DataType, ldc int, compute ComputeType) error {
	return e.m.GemmEx(transA, transB, m, n, k, alpha, uintptr(A), emu.DataType(at), lda, uintptr(B), emu.DataType(bt), ldb,
		beta, uintptr(C), emu.DataType(ct), ldc, emu.ComputeType(compute))
}

func (e emuBlas) gemmStridedBatchedEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda, strideA int, B dptr, bt DataType, ldb, strideB int, beta float32,
	C dptr, ct DataType, ldc, strideC, count int, compute ComputeType) error {
	return e.m.GemmStridedBatchedEx(transA, transB, m, n, k, alpha, uintptr(A), emu.DataType(at), lda, strideA,
		uintptr(B), emu.DataType(bt), ldb, strideB, beta, uintptr(C), emu.DataType(ct), ldc, strideC, count,
		emu.ComputeType(compute))
}

func (emuBlas) library() string { return "column-major reference products (emulator)" }
