//go:build cudaemu && !cuda

package cuda

import "testing"

// TestEnqueueTiming: the calls that queue work are timed only while
// SetEnqueueTiming is on (Counters.EnqueueTime), and a training step's
// launches and products then show.
func TestEnqueueTiming(t *testing.T) {
	be := openEmulator(t)
	s := NewPolicyStep(t, be, 2, false)
	step := func() Counters { return Counted(be, func() { s.Run(t) }) }
	if c := step(); c.EnqueueTime != 0 {
		t.Errorf("timing off (the default): a training step's EnqueueTime is %v", c.EnqueueTime)
	}
	be.SetEnqueueTiming(true)
	c := step()
	if c.EnqueueTime <= 0 {
		t.Errorf("timing on: a training step of %d launches queued in %v", c.Launches, c.EnqueueTime)
	}
	be.SetEnqueueTiming(false)
	if c := step(); c.EnqueueTime != 0 {
		t.Errorf("timing off again: EnqueueTime %v", c.EnqueueTime)
	}
}
