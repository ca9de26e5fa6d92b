//go:build cudaemu && !cuda

package cudacheck_test

import (
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
)

// openEmulator is cuda.OpenEmulator, closed when the test ends.
func openEmulator(t testing.TB) *cuda.Backend {
	be := cuda.OpenEmulator()
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Errorf("closing the emulator: %v", err)
		}
	})
	return be
}
