//go:build cuda

package cudrv

// Page-locked host memory on the CUDA driver (gpu/cuda's pinned.go):
// cuMemAllocHost in the device's primary context, current when an op runs.

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
//
// static CUresult rl_host_alloc(size_t bytes, void **p) { return cuMemAllocHost(p, bytes); }
// static CUresult rl_host_free(void *p) { return cuMemFreeHost(p); }
import "C"

import "unsafe"

// HostAlloc is cuMemAllocHost.
func (c *Driver) HostAlloc(bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := cuErr("cuMemAllocHost", C.rl_host_alloc(C.size_t(bytes), &p)); err != nil {
		return nil, err
	}
	return p, nil
}

// HostFree is cuMemFreeHost.
func (c *Driver) HostFree(p unsafe.Pointer) error {
	return cuErr("cuMemFreeHost", C.rl_host_free(p))
}
