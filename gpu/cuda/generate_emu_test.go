//go:build cudaemu && !cuda

package cuda

import "testing"

// TestGenerateGroupsPlantedEmulator: on the kernels (the emulator; the
// check itself passes in TestKernelsOnEmulator), GenerateGroups fails with
// a prefix copy of one position fewer. The other defects of
// TestGenerateGroupsDetectsPrefixDefects are left to the CPU device: a run
// of the workload takes about 30 s here.
func TestGenerateGroupsPlantedEmulator(t *testing.T) {
	checkGroupsDetects(t, func() Device { return OpenEmulator() }, "short")
}
