//go:build cudaemu && !cuda

package cudacheck_test

import (
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestGenerateGroupsPlantedEmulator: on the kernels (the emulator; the
// check itself passes in TestKernelsOnEmulator), GenerateGroups fails with
// a prefix copy of one position fewer. The other defects of
// TestGenerateGroupsDetectsPrefixDefects are left to the CPU device: a run
// of the workload takes about 30 s here.
func TestGenerateGroupsPlantedEmulator(t *testing.T) {
	checkGroupsDetects(t, func() cudacheck.Device { return openEmulator(t) }, "short")
}

// samplingDefect is a Device whose SampleTokens leaves out one filter
// (dropFilter's sample-no-top-p or sample-no-top-k) before the device's
// sampling kernel runs: a device ignoring top-p or top-k.
type samplingDefect struct {
	cudacheck.Device
	defect string
}

func (d samplingDefect) SampleTokens(tokens []int32, logp []float32, logits []float32, params []gpu.SampleParams, M, V int) {
	d.Device.SampleTokens(tokens, logp, logits, dropFilter(params, d.defect), M, V)
}

// TestGenerateGroupsSamplingPlantedEmulator: on the kernels, GenerateGroups
// fails when the device samples without top-p, and when it samples without
// top-k (every request of its workload has both, groupsSample).
func TestGenerateGroupsSamplingPlantedEmulator(t *testing.T) {
	for _, defect := range []string{"sample-no-top-p", "sample-no-top-k"} {
		err := cudacheck.CheckGenerateGroups(samplingDefect{Device: openEmulator(t), defect: defect})
		if err == nil {
			t.Errorf("%s: GenerateGroups did not detect it", defect)
			continue
		}
		t.Logf("%s: %v", defect, err)
	}
}
