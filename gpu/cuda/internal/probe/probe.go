//go:build cuda

package probe

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
// static int probe(int *count) {
//     CUresult r = cuInit(0);
//     if (r != CUDA_SUCCESS) return (int)r;
//     return (int)cuDeviceGetCount(count);
// }
import "C"

import (
	"fmt"
	"os"
)

func init() {
	var count C.int
	r := C.probe(&count)
	if r == 0 && count > 0 {
		return
	}
	why := fmt.Sprintf("cuInit/cuDeviceGetCount returned CUresult %d", int(r))
	switch r {
	case 100:
		why = "no CUDA device (CUDA_ERROR_NO_DEVICE)"
	case 35:
		why = "the NVIDIA driver is older than CUDA 11.8 needs (CUDA_ERROR_INSUFFICIENT_DRIVER)"
	case 3, 999:
		why = fmt.Sprintf("the NVIDIA driver did not initialise (CUresult %d)", int(r))
	}
	if r == 0 {
		why = "the driver reports 0 devices"
	}
	name := os.Args[0]
	if len(name) > 5 && name[len(name)-5:] == ".test" && os.Getenv("RLHOST_CUDA_REQUIRE") != "1" {
		fmt.Printf("--- SKIP: all CUDA tests: no usable CUDA GPU: %s; they run on a machine with an NVIDIA GPU and driver\nPASS\n", why)
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "rlhost: this binary was built with -tags cuda and needs an NVIDIA GPU: %s; check nvidia-smi and CUDA_VISIBLE_DEVICES, or use a build without -tags cuda\n", why)
	os.Exit(1)
}
