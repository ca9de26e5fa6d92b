//go:build cudaemu && !cuda

package cuda

import (
	"testing"
	"time"
)

// slowSync is the emulator with a stream that takes delay to drain: every
// synchronisation and device->host copy blocks the host that long, as a
// GPU still busy with queued kernels would.
type slowSync struct {
	emuDriver
	delay time.Duration
}

func (s slowSync) sync() error { time.Sleep(s.delay); return s.emuDriver.sync() }

// TestSyncWaitCounted: Counters.SyncWait is the host's time blocked on the
// device. A training step's wait is counted, non-negative and at most the
// step's wall time; with a stream that takes 3 ms to drain, it is at least
// 3 ms per synchronisation, so it measures the waits and nothing else.
func TestSyncWaitCounted(t *testing.T) {
	be := openEmulator(t)
	s := NewPolicyStep(t, be, 1, false)
	s.Run(t) // warm-up: the staging arena settles
	be.ResetCounters()
	start := time.Now()
	s.Run(t)
	wall := time.Since(start)
	got := be.Counters()
	t.Logf("emulator step: %v, wall %v", got, wall)
	if got.Syncs == 0 || got.SyncWait < 0 || got.SyncWait > wall {
		t.Errorf("a step synchronised %d times and waited %v in %v of wall time; want > 0 syncs and 0 <= wait <= wall", got.Syncs, got.SyncWait, wall)
	}

	const delay = 3 * time.Millisecond
	be.d.drv = slowSync{emuDriver: be.d.drv.(emuDriver), delay: delay}
	be.ResetCounters()
	start = time.Now()
	s.Run(t)
	wall = time.Since(start)
	got = be.Counters()
	t.Logf("with a %v stream: %v, wall %v", delay, got, wall)
	if min := time.Duration(got.Syncs) * delay; got.SyncWait < min || got.SyncWait > wall {
		t.Errorf("%d synchronisations of at least %v each were counted as %v of waiting in %v of wall time", got.Syncs, delay, got.SyncWait, wall)
	}
	be.ResetCounters()
	if got := be.Counters(); got.SyncWait != 0 {
		t.Errorf("ResetCounters left SyncWait %v", got.SyncWait)
	}
}
