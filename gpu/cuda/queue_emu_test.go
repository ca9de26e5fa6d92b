//go:build cudaemu && !cuda

package cuda

import (
	"slices"
	"testing"
)

// TestQueueLimitEmulator: training steps (forward, backward, clip, AdamW)
// on the emulator with the tightest bound (8 ops ahead) and with none give
// the same parameters bit for bit, the same copies and synchronisations;
// only the bound waits.
func TestQueueLimitEmulator(t *testing.T) {
	run := func(depth int) ([]float32, Counters) {
		be := openEmulator(t)
		be.SetQueueDepth(depth)
		s := NewPolicyStep(t, be, 2, false)
		c := Counted(be, func() { s.Run(t) })
		s.Run(t)
		p := make([]float32, len(s.M.Params.Data))
		be.Download(p, s.M.Params.Data)
		return p, c
	}
	p8, c8 := run(8)
	p0, c0 := run(0)
	if !slices.Equal(p8, p0) {
		t.Error("the parameters after three steps differ with the queue bounded to 8 ops")
	}
	if c8.QueueWaits == 0 || c0.QueueWaits != 0 {
		t.Errorf("a training step waited %d times bounded to 8 ops, %d times without a bound", c8.QueueWaits, c0.QueueWaits)
	}
	c8.QueueWaits = 0
	if c8.Counts() != c0.Counts() {
		t.Errorf("the bound changed the step's counts:\n%v\n%v", c8, c0)
	}
}
