//go:build cudaemu && !cuda

// Package emutest opens kernel-emulator backends for the tests of gpu/cuda's checks (the
// external tests of gpu/cuda and gpu/cuda/cudacheck).
package emutest

import (
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
)

// Open is cuda.OpenEmulator, closed when the test ends.
func Open(t testing.TB) *cuda.Backend {
	be := cuda.OpenEmulator()
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Errorf("closing the emulator: %v", err)
		}
	})
	return be
}
