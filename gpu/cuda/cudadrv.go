//go:build cuda

package cuda

import (
	"embed"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
	_ "github.com/rlhost/rlhost/gpu/cuda/internal/probe" // before gorgonia.org/cu's init: a clear message without a GPU
	"gorgonia.org/cu"
)

// Built reports whether this binary holds the CUDA backend (-tags cuda).
const Built = true

//go:embed ptx/kernels_sm80.ptx ptx/kernels_sm90.ptx
var ptxFS embed.FS

// cuDriver is the driver of a real GPU through gorgonia.org/cu: the
// device's primary context (the one the CUDA runtime, and so cuBLAS, uses),
// one stream and the module of embedded PTX.
type cuDriver struct {
	dev    cu.Device
	ctx    cu.CUContext
	stream cu.Stream
	mod    cu.Module
	fn     *kernelTable[cu.Function]
	params slotPointers // of the launch being queued
	// graphs: cuBLAS has a workspace of the backend's, so that its
	// products can be captured (cudagraph.go); noGraphs says why not
	graphs   bool
	noGraphs string
}

func newDevice(ordinal int) (*device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, &Error{"init", err}
	}
	if n == 0 {
		return nil, ErrNoDevice
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d device(s) visible)", ordinal, n)
	}
	c := &cuDriver{fn: newKernelTable[cu.Function]()}
	d := &device{drv: c}
	if c.dev, err = cu.GetDevice(ordinal); err != nil {
		return nil, &Error{"get device", err}
	}
	d.name, _ = c.dev.Name()
	if d.cc[0], d.cc[1], err = c.dev.ComputeCapability(); err != nil {
		return nil, &Error{"compute capability", err}
	}
	ptx := "ptx/kernels_sm80.ptx"
	switch {
	case d.cc[0] >= 9:
		ptx = "ptx/kernels_sm90.ptx"
	case d.cc[0] < 8:
		return nil, fmt.Errorf("cuda: %s has compute capability %d.%d; the kernels are built for 8.0 and later (Ampere, Ada, Hopper)",
			d.name, d.cc[0], d.cc[1])
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if c.ctx, err = c.dev.RetainPrimaryCtx(); err != nil {
		return nil, &Error{"retain primary context", err}
	}
	if err = cu.SetCurrentContext(c.ctx); err != nil {
		return nil, &Error{"set context", err}
	}
	if c.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return nil, &Error{"create stream", err}
	}
	src, err := ptxFS.ReadFile(ptx)
	if err != nil {
		return nil, &Error{"read " + ptx, err}
	}
	if c.mod, err = cu.LoadData(string(src)); err != nil {
		return nil, &Error{"load " + ptx + " (the driver may be older than CUDA 11.8)", err}
	}
	for _, k := range kernelNames {
		f, err := c.mod.Function(k)
		if err != nil {
			return nil, &Error{"kernel " + k, err}
		}
		c.fn.add(k, f)
	}
	cb, err := openCublas(c.stream)
	if err != nil {
		return nil, err
	}
	d.blas = rowMajor{api: cb, d: d}
	if ws, err := c.malloc(cublasWorkspace); err != nil {
		c.noGraphs = fmt.Sprintf("no memory for the cuBLAS workspace: %v", err)
	} else if err := cb.setWorkspace(ws, cublasWorkspace); err != nil {
		c.noGraphs = err.Error()
		c.free(ws)
	} else {
		c.graphs = true
	}
	return d, nil
}

// lock pins the goroutine to its OS thread and makes the context current
// there (driver contexts are per thread).
func (c *cuDriver) lock() (func(), error) {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(c.ctx); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

func (c *cuDriver) malloc(bytes int64) (dptr, error) {
	p, err := cu.MemAlloc(bytes)
	return dptr(p), err
}

func (c *cuDriver) free(p dptr) error { return cu.MemFree(cu.DevicePtr(p)) }

// htod queues the copy on the backend's stream; from pageable memory the
// driver stages the bytes before it returns, so src may be reused at once.
func (c *cuDriver) htod(dst dptr, src unsafe.Pointer, bytes int64) error {
	return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, bytes, c.stream)
}

// dtoh is a synchronous copy on the legacy default stream, which waits for
// the backend's (blocking) stream; the caller synchronised it already.
func (c *cuDriver) dtoh(dst unsafe.Pointer, src dptr, bytes int64) error {
	return cu.MemcpyDtoH(dst, cu.DevicePtr(src), bytes)
}

// dtohAsync queues a copy to the host on the backend's stream; dst is
// page-locked memory (overlap.go), so the copy runs when the stream gets
// there and the call returns at once.
func (c *cuDriver) dtohAsync(dst unsafe.Pointer, src dptr, bytes int64) error {
	return cu.MemcpyDtoHAsync(dst, cu.DevicePtr(src), bytes, c.stream)
}

func (c *cuDriver) dtod(dst, src dptr, bytes int64) error {
	return cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), bytes, c.stream)
}

func (c *cuDriver) zero(p dptr, bytes int64) error {
	return cu.MemsetD32Async(cu.DevicePtr(p), 0, bytes/4, c.stream)
}

func (c *cuDriver) memInfo() (free, total int64, err error) { return cu.MemInfo() }

// launch passes each 8-byte slot by address: gorgonia.org/cu's Launch copies
// 8 bytes per argument. The handle and the pointers come without an
// allocation or a hash of the name (kernelTable, slotPointers).
func (c *cuDriver) launch(kernel string, grid int, args []uint64) error {
	f, ok := c.fn.get(kernel)
	if !ok {
		return fmt.Errorf("no kernel %s in the module", kernel)
	}
	return f.Launch(grid, 1, 1, blockSize, 1, 1, 0, c.stream, c.params.of(args))
}

func (c *cuDriver) sync() error { return c.stream.Synchronize() }

// Timing events (EnableProfile): cuEventCreate, cuEventRecord on the
// backend's stream, cuEventElapsedTime (about 0.5 µs resolution).
func (c *cuDriver) newEvent() (event, error) { return cu.MakeEvent(cu.DefaultEvent) }

func (c *cuDriver) record(e event) error { return e.(cu.Event).Record(c.stream) }

func (c *cuDriver) elapsed(start, end event) (time.Duration, error) {
	ms, err := start.(cu.Event).Elapsed(end.(cu.Event))
	return time.Duration(ms * 1e6), err
}

// The queue's events (queue.go): without timing, waited for with
// cuEventSynchronize.
func (c *cuDriver) newSyncEvent() (event, error) { return cu.MakeEvent(cu.DisableTiming) }

func (c *cuDriver) waitEvent(e event) error { return e.(cu.Event).Synchronize() }

func (c *cuDriver) destroyEvent(e event) error {
	ev := e.(cu.Event)
	return cu.DestroyEvent(&ev)
}

// New opens GPU 0 (the first of CUDA_VISIBLE_DEVICES): its primary context,
// a stream, the embedded kernels and cuBLAS. The error says what is missing
// (no device, a compute capability below 8.0, no cuBLAS library).
func New() (gpu.Backend, error) { return Open(0) }

// Open is New for the GPU of the given ordinal.
func Open(ordinal int) (*Backend, error) {
	if err := variantsUnset(); err != nil {
		return nil, err
	}
	graphsOff, err := graphsOffFromEnv()
	if err != nil {
		return nil, err
	}
	pinnedOff, err := pinnedOffFromEnv()
	if err != nil {
		return nil, err
	}
	depth, err := queueDepthFromEnv()
	if err != nil {
		return nil, err
	}
	overlapOff, err := overlapOffFromEnv()
	if err != nil {
		return nil, err
	}
	d, err := newDevice(ordinal)
	if err != nil {
		return nil, err
	}
	d.graphs.off, d.pin.off, d.queue.depth, d.dl.off = graphsOff, pinnedOff, depth, overlapOff
	return &Backend{d: d}, nil
}
