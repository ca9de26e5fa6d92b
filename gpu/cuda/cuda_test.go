//go:build cuda

package cuda_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

func TestMain(m *testing.M) {
	if err := cpu.EnsureCoreType(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(m.Run())
}

var (
	testOnce    sync.Once
	testBackend *cuda.Backend
	testErr     error
)

// gpuBackend opens GPU 0 once, or skips the test saying why it cannot.
// (Without any device the probe package already skipped the whole binary.)
func gpuBackend(t *testing.T) *cuda.Backend {
	t.Helper()
	testOnce.Do(func() { testBackend, testErr = cuda.Open(0) })
	if testErr != nil {
		if os.Getenv("RLHOST_CUDA_REQUIRE") == "1" {
			t.Fatalf("RLHOST_CUDA_REQUIRE=1 but the CUDA backend cannot open: %v", testErr)
		}
		t.Skipf("no usable CUDA GPU: %v", testErr)
	}
	return testBackend
}

// TestKernels compares every kernel, the cuBLAS wrappers and a training
// step with the CPU reference (the list is Checks).
func TestKernels(t *testing.T) {
	be := gpuBackend(t)
	t.Logf("backend %s, %s", be.Name(), be.CublasLibrary())
	for _, c := range cudacheck.Checks {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Do(be); err != nil {
				t.Fatal(err)
			}
		})
	}
}
