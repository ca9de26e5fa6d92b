//go:build cuda

package cudrv

// Decode graphs on the CUDA driver (gpu/cuda's graph.go): stream capture in
// relaxed mode (the region's ops run on whichever thread holds the
// context; the arena may allocate during a capture), instantiated with
// cuGraphInstantiateWithFlags (in the driver API since CUDA 11.4, the
// entry point the CUDA 12 and 13 headers name cuGraphInstantiate: the
// binary is built against 11.8's headers and runs on newer drivers).

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
// #include <stdint.h>
//
// static CUresult rl_begin_capture(uintptr_t s) {
//     return cuStreamBeginCapture((CUstream)s, CU_STREAM_CAPTURE_MODE_RELAXED);
// }
// static CUresult rl_end_capture(uintptr_t s, uintptr_t *exec) {
//     CUgraph g = 0;
//     CUresult r = cuStreamEndCapture((CUstream)s, &g);
//     if (r != CUDA_SUCCESS) {
//         if (g) cuGraphDestroy(g);
//         return r;
//     }
//     CUgraphExec e = 0;
//     r = cuGraphInstantiateWithFlags(&e, g, 0);
//     cuGraphDestroy(g);
//     *exec = (uintptr_t)e;
//     return r;
// }
// static CUresult rl_graph_launch(uintptr_t e, uintptr_t s) { return cuGraphLaunch((CUgraphExec)e, (CUstream)s); }
// static CUresult rl_graph_destroy(uintptr_t e) { return cuGraphExecDestroy((CUgraphExec)e); }
// static const char *rl_error_name(CUresult r) {
//     const char *s = 0;
//     if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s) return "unknown CUresult";
//     return s;
// }
import "C"

import (
	"fmt"
	"unsafe"
)

// Graph is an instantiated graph (a CUgraphExec).
type Graph C.uintptr_t

func cuErr(what string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return fmt.Errorf("%s: %s (%d)", what, C.GoString(C.rl_error_name(r)), int(r))
}

func (c *Driver) streamHandle() C.uintptr_t {
	return C.uintptr_t(uintptr(unsafe.Pointer(c.stream.C())))
}

// BeginCapture is cuStreamBeginCapture, relaxed.
func (c *Driver) BeginCapture() error {
	if !c.Graphs {
		return fmt.Errorf("decode graphs unavailable: %s", c.NoGraphs)
	}
	return cuErr("cuStreamBeginCapture", C.rl_begin_capture(c.streamHandle()))
}

// EndCapture ends the capture and instantiates its graph.
func (c *Driver) EndCapture() (Graph, error) {
	var e C.uintptr_t
	if err := cuErr("cuStreamEndCapture/cuGraphInstantiateWithFlags", C.rl_end_capture(c.streamHandle(), &e)); err != nil {
		if e != 0 {
			C.rl_graph_destroy(e)
		}
		return 0, err
	}
	return Graph(e), nil
}

// LaunchGraph is cuGraphLaunch on the stream.
func (c *Driver) LaunchGraph(g Graph) error {
	return cuErr("cuGraphLaunch", C.rl_graph_launch(C.uintptr_t(g), c.streamHandle()))
}

// DestroyGraph is cuGraphExecDestroy.
func (c *Driver) DestroyGraph(g Graph) error {
	return cuErr("cuGraphExecDestroy", C.rl_graph_destroy(C.uintptr_t(g)))
}
