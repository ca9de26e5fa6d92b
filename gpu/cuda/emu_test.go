//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"os"
	"runtime/debug"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
)

func TestMain(m *testing.M) {
	if err := cpu.EnsureCoreType(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(m.Run())
}

// TestKernelsOnEmulator runs every check with the kernels of kernels.cu
// executed on the CPU by the emulator, through the same op code (backend.go)
// and staging as on a GPU.
func TestKernelsOnEmulator(t *testing.T) {
	be := OpenEmulator()
	for _, c := range Checks {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Do(be); err != nil {
				t.Fatal(err)
			}
		})
	}
}

var sink float32

// TestEmulatorMemoryFaultsOnHostAccess: emulated device memory is not the
// host's, outside Upload and Download, as on a GPU. Every emulator test
// (the checks and TestTransfer...) therefore fails if model code reads or
// writes a tensor on the host.
func TestEmulatorMemoryFaultsOnHostAccess(t *testing.T) {
	be := OpenEmulator()
	x := be.Alloc("x", 16)
	be.Upload(x, []float32{1, 2, 3, 4})
	got := make([]float32, 4)
	be.Download(got, x)
	if got[3] != 4 {
		t.Fatalf("Download after Upload: %v", got)
	}
	faulted := func(f func()) (ok bool) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { ok = recover() != nil }()
		f()
		return false
	}
	if !faulted(func() { sink = x[3] }) {
		t.Error("the host read a tensor of the emulated device without a fault")
	}
	if !faulted(func() { x[2] = 1 }) {
		t.Error("the host wrote a tensor of the emulated device without a fault")
	}
}
