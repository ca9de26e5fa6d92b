//go:build cuda

// Package cudrv is gpu/cuda's driver of a real GPU through
// gorgonia.org/cu (and, for stream capture and page-locked memory, the
// driver API by cgo): the device's primary context (the one the CUDA
// runtime, and so cuBLAS, uses), one stream and the module of the kernels'
// PTX. gpu/cuda's device calls it through its driver interface (cudadrv.go).
package cudrv

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/internal/launch"
	_ "github.com/rlhost/rlhost/gpu/cuda/internal/probe" // before gorgonia.org/cu's init: a clear message without a GPU
	"gorgonia.org/cu"
)

// ErrNoDevice is Open's error when the driver reports no CUDA device.
var ErrNoDevice = errors.New("no CUDA device")

// BlockSize is the threads of every block a kernel is launched with.
const BlockSize = 256

// Driver is one GPU: its primary context, a stream and the kernels' module.
type Driver struct {
	Dev    cu.Device
	ctx    cu.CUContext
	stream cu.Stream
	mod    cu.Module
	fn     *launch.KernelTable[cu.Function]
	params launch.SlotPointers // of the launch being queued
	// Graphs: stream capture is possible (cuBLAS has a workspace of the
	// backend's, so that its products can be captured); NoGraphs says why
	// not
	Graphs   bool
	NoGraphs string
}

// Open opens GPU ordinal: its primary context, current on this thread while
// Open runs, and a stream. It reports the device's name and compute
// capability; the kernels come with LoadModule.
func Open(ordinal int) (*Driver, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	if n == 0 {
		return nil, ErrNoDevice
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d device(s) visible)", ordinal, n)
	}
	c := &Driver{fn: launch.NewKernelTable[cu.Function]()}
	if c.Dev, err = cu.GetDevice(ordinal); err != nil {
		return nil, fmt.Errorf("get device: %w", err)
	}
	return c, nil
}

// Name is the device's name.
func (c *Driver) Name() string {
	n, _ := c.Dev.Name()
	return n
}

// ComputeCapability is the device's (major, minor).
func (c *Driver) ComputeCapability() (int, int, error) { return c.Dev.ComputeCapability() }

// Start retains the primary context, makes it current and creates the
// stream, then loads ptx and resolves the kernels named.
func (c *Driver) Start(ptx string, kernels []string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var err error
	if c.ctx, err = c.Dev.RetainPrimaryCtx(); err != nil {
		return fmt.Errorf("retain primary context: %w", err)
	}
	if err = cu.SetCurrentContext(c.ctx); err != nil {
		return fmt.Errorf("set context: %w", err)
	}
	if c.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	if c.mod, err = cu.LoadData(ptx); err != nil {
		return fmt.Errorf("load the kernels' PTX (the driver may be older than CUDA 11.8): %w", err)
	}
	for _, k := range kernels {
		f, err := c.mod.Function(k)
		if err != nil {
			return fmt.Errorf("kernel %s: %w", k, err)
		}
		c.fn.Add(k, f)
	}
	return nil
}

// Stream is the backend's stream (cuBLAS is bound to it).
func (c *Driver) Stream() cu.Stream { return c.stream }

// Lock pins the goroutine to its OS thread and makes the context current
// there (driver contexts are per thread).
func (c *Driver) Lock() (func(), error) {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(c.ctx); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

// Malloc is cuMemAlloc.
func (c *Driver) Malloc(bytes int64) (uintptr, error) {
	p, err := cu.MemAlloc(bytes)
	return uintptr(p), err
}

// Free is cuMemFree.
func (c *Driver) Free(p uintptr) error { return cu.MemFree(cu.DevicePtr(p)) }

// HtoD queues the copy on the backend's stream; from pageable memory the
// driver stages the bytes before it returns, so src may be reused at once.
func (c *Driver) HtoD(dst uintptr, src unsafe.Pointer, bytes int64) error {
	return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, bytes, c.stream)
}

// DtoH is a synchronous copy on the legacy default stream, which waits for
// the backend's (blocking) stream; the caller synchronised it already.
func (c *Driver) DtoH(dst unsafe.Pointer, src uintptr, bytes int64) error {
	return cu.MemcpyDtoH(dst, cu.DevicePtr(src), bytes)
}

// DtoHAsync queues a copy to the host on the backend's stream; dst is
// page-locked memory, so the copy runs when the stream gets there and the
// call returns at once.
func (c *Driver) DtoHAsync(dst unsafe.Pointer, src uintptr, bytes int64) error {
	return cu.MemcpyDtoHAsync(dst, cu.DevicePtr(src), bytes, c.stream)
}

// DtoD queues a device copy.
func (c *Driver) DtoD(dst, src uintptr, bytes int64) error {
	return cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), bytes, c.stream)
}

// Zero queues a clear of bytes (a multiple of 4) at p.
func (c *Driver) Zero(p uintptr, bytes int64) error {
	return cu.MemsetD32Async(cu.DevicePtr(p), 0, bytes/4, c.stream)
}

// MemInfo is cuMemGetInfo.
func (c *Driver) MemInfo() (free, total int64, err error) { return cu.MemInfo() }

// Launch passes each 8-byte slot by address: gorgonia.org/cu's Launch copies
// 8 bytes per argument. The handle and the pointers come without an
// allocation or a hash of the name (launch.KernelTable, SlotPointers).
func (c *Driver) Launch(kernel string, grid int, args []uint64) error {
	f, ok := c.fn.Get(kernel)
	if !ok {
		return fmt.Errorf("no kernel %s in the module", kernel)
	}
	return f.Launch(grid, 1, 1, BlockSize, 1, 1, 0, c.stream, c.params.Of(args))
}

// Sync waits for the stream.
func (c *Driver) Sync() error { return c.stream.Synchronize() }

// Timing events (profiling): cuEventCreate, cuEventRecord on the backend's
// stream, cuEventElapsedTime (about 0.5 µs resolution).

// NewEvent is a timing event.
func (c *Driver) NewEvent() (cu.Event, error) { return cu.MakeEvent(cu.DefaultEvent) }

// Record records e on the stream.
func (c *Driver) Record(e cu.Event) error { return e.Record(c.stream) }

// Elapsed is the time between two recorded events.
func (c *Driver) Elapsed(start, end cu.Event) (time.Duration, error) {
	ms, err := start.Elapsed(end)
	return time.Duration(ms * 1e6), err
}

// NewSyncEvent is an event without timing, waited for with WaitEvent.
func (c *Driver) NewSyncEvent() (cu.Event, error) { return cu.MakeEvent(cu.DisableTiming) }

// WaitEvent is cuEventSynchronize.
func (c *Driver) WaitEvent(e cu.Event) error { return e.Synchronize() }

// DestroyEvent is cuEventDestroy.
func (c *Driver) DestroyEvent(e cu.Event) error { return cu.DestroyEvent(&e) }

// smCounts caches each GPU's multiprocessor count (cuDeviceGetAttribute).
var smCounts sync.Map // cu.Device -> int

// SMs is the GPU's multiprocessor count, 0 if the driver does not report
// it; read once per device.
func (c *Driver) SMs() int {
	if n, ok := smCounts.Load(c.Dev); ok {
		return n.(int)
	}
	n, err := c.Dev.Attribute(cu.MultiprocessorCount)
	if err != nil {
		n = 0
	}
	smCounts.Store(c.Dev, n)
	return n
}
