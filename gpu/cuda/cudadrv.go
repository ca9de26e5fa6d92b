//go:build cuda

package cuda

import (
	"embed"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/cudrv"
	"gorgonia.org/cu"
)

// Built reports whether this binary holds the CUDA backend (-tags cuda).
const Built = true

//go:embed ptx/kernels_sm80.ptx ptx/kernels_sm90.ptx
var ptxFS embed.FS

// cuDriver is the backend's driver of a real GPU: internal/cudrv's (its
// primary context, one stream, the module of the embedded PTX), its device
// pointers dptrs here.
type cuDriver struct{ c *cudrv.Driver }

func newDevice(ordinal int) (*device, error) {
	c, err := cudrv.Open(ordinal)
	if errors.Is(err, cudrv.ErrNoDevice) {
		return nil, ErrNoDevice
	}
	if err != nil {
		return nil, &Error{"open", err}
	}
	d := &device{drv: cuDriver{c}, name: c.Name()}
	if d.cc[0], d.cc[1], err = c.ComputeCapability(); err != nil {
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
	src, err := ptxFS.ReadFile(ptx)
	if err != nil {
		return nil, &Error{"read " + ptx, err}
	}
	if err := c.Start(string(src), kernelNames); err != nil {
		return nil, &Error{ptx, err}
	}
	cb, err := openCublas(c.Stream())
	if err != nil {
		return nil, err
	}
	d.blas = rowMajor{api: cb, d: d}
	if ws, err := c.Malloc(cublasWorkspace); err != nil {
		c.NoGraphs = fmt.Sprintf("no memory for the cuBLAS workspace: %v", err)
	} else if err := cb.setWorkspace(dptr(ws), cublasWorkspace); err != nil {
		c.NoGraphs = err.Error()
		c.Free(ws)
	} else {
		c.Graphs = true
	}
	return d, nil
}

func (d cuDriver) lock() (func(), error)          { return d.c.Lock() }
func (d cuDriver) free(p dptr) error              { return d.c.Free(uintptr(p)) }
func (d cuDriver) memInfo() (int64, int64, error) { return d.c.MemInfo() }
func (d cuDriver) sync() error                    { return d.c.Sync() }
func (d cuDriver) attentionSMs() int              { return d.c.SMs() }

func (d cuDriver) malloc(bytes int64) (dptr, error) {
	p, err := d.c.Malloc(bytes)
	return dptr(p), err
}

func (d cuDriver) htod(dst dptr, src unsafe.Pointer, bytes int64) error {
	return d.c.HtoD(uintptr(dst), src, bytes)
}

func (d cuDriver) dtoh(dst unsafe.Pointer, src dptr, bytes int64) error {
	return d.c.DtoH(dst, uintptr(src), bytes)
}

func (d cuDriver) dtohAsync(dst unsafe.Pointer, src dptr, bytes int64) error {
	return d.c.DtoHAsync(dst, uintptr(src), bytes)
}

func (d cuDriver) dtod(dst, src dptr, bytes int64) error {
	return d.c.DtoD(uintptr(dst), uintptr(src), bytes)
}
func (d cuDriver) zero(p dptr, bytes int64) error { return d.c.Zero(uintptr(p), bytes) }

func (d cuDriver) launch(kernel string, grid int, args []uint64) error {
	return d.c.Launch(kernel, grid, args)
}

// Events: cu.Events, as event.
func (d cuDriver) newEvent() (event, error)     { return d.c.NewEvent() }
func (d cuDriver) record(e event) error         { return d.c.Record(e.(cu.Event)) }
func (d cuDriver) newSyncEvent() (event, error) { return d.c.NewSyncEvent() }
func (d cuDriver) waitEvent(e event) error      { return d.c.WaitEvent(e.(cu.Event)) }
func (d cuDriver) destroyEvent(e event) error   { return d.c.DestroyEvent(e.(cu.Event)) }

func (d cuDriver) elapsed(start, end event) (time.Duration, error) {
	return d.c.Elapsed(start.(cu.Event), end.(cu.Event))
}

// Decode graphs (grapher) and page-locked memory (pinner).
func (d cuDriver) beginCapture() error                           { return d.c.BeginCapture() }
func (d cuDriver) launchGraph(g graphExec) error                 { return d.c.LaunchGraph(g.(cudrv.Graph)) }
func (d cuDriver) destroyGraph(g graphExec) error                { return d.c.DestroyGraph(g.(cudrv.Graph)) }
func (d cuDriver) hostAlloc(bytes int64) (unsafe.Pointer, error) { return d.c.HostAlloc(bytes) }
func (d cuDriver) hostFree(p unsafe.Pointer) error               { return d.c.HostFree(p) }

func (d cuDriver) endCapture() (graphExec, error) {
	g, err := d.c.EndCapture()
	if err != nil {
		return nil, err
	}
	return g, nil
}

var (
	_ grapher = cuDriver{}
	_ pinner  = cuDriver{}
)

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
