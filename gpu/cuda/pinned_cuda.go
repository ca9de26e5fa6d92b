//go:build cuda

package cuda

// Page-locked host memory on the CUDA driver (pinner, pinned.go):
// cuMemAllocHost in the device's primary context, current when an op runs.

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
//
// static CUresult rl_host_alloc(size_t bytes, void **p) { return cuMemAllocHost(p, bytes); }
// static CUresult rl_host_free(void *p) { return cuMemFreeHost(p); }
import "C"

import "unsafe"

func (c *cuDriver) hostAlloc(bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := cuErr("cuMemAllocHost", C.rl_host_alloc(C.size_t(bytes), &p)); err != nil {
		return nil, err
	}
	return p, nil
}

func (c *cuDriver) hostFree(p unsafe.Pointer) error {
	return cuErr("cuMemFreeHost", C.rl_host_free(p))
}

var _ pinner = (*cuDriver)(nil)
