//go:build cudaemu && !cuda

// Package emu is the kernel emulator: gpu/cuda/kernels/kernels.cu and the
// builds of dev/cuda (dev_gen.h) compiled for the CPU (emu.h), every GPU
// thread a fiber of one OS thread (emu.cc), launched by name with 8-byte
// argument slots as the CUDA driver launches them. gpu/cuda's emulated
// device (OpenEmulator, build tag cudaemu) launches through it.
package emu

// #cgo CXXFLAGS: -std=c++20 -O2 -I${SRCDIR}/../../kernels
// #cgo LDFLAGS: -lstdc++ -lpthread
// #include <stdint.h>
// #include <stdlib.h>
// int rl_emu_launch(const char *name, long long grid, const uint64_t *args, int nargs);
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	// the kernels emu.cc includes: imported so that a change to them rebuilds it
	_ "github.com/rlhost/rlhost/gpu/cuda/kernels"
)

// launches serialises launches: emu.cc's scheduler, fibers and __shared__
// arrays are one set for the process, as one GPU.
var launches sync.Mutex

// Launch runs kernel over grid blocks of kernels.cu's BLOCK threads with
// args, each an 8-byte slot as the driver passes it (a float in the low 4
// bytes). It returns when every block has run.
func Launch(kernel string, grid int, args []uint64) error {
	name := C.CString(kernel)
	defer C.free(unsafe.Pointer(name))
	slots := (*C.uint64_t)(C.malloc(C.size_t(8 * max(1, len(args)))))
	defer C.free(unsafe.Pointer(slots))
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(slots)), len(args)), args)
	launches.Lock()
	r := C.rl_emu_launch(name, C.longlong(grid), slots, C.int(len(args)))
	launches.Unlock()
	switch {
	case r == -1:
		return fmt.Errorf("no kernel %s", kernel)
	case r == -2:
		return fmt.Errorf("kernel %s deadlocked: threads wait at barriers the others never reach", kernel)
	case r != 0:
		return fmt.Errorf("kernel %s takes %d arguments, %d given", kernel, int(r), len(args))
	}
	return nil
}
