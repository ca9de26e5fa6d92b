//go:build linux

package cuda

import (
	"strings"
	"testing"
)

// TestQueueLimitNull queues ops without a synchronisation on the null
// device, which tracks the ops the host has queued beyond those it knows
// the stream has run (nullOps.maxAhead): with a bound, never more than it,
// each wait counted by the backend and seen by the driver; without one,
// every op ahead and no event.
func TestQueueLimitNull(t *testing.T) {
	for _, c := range []struct {
		depth, ops int
	}{{64, 1000}, {8, 100}, {512, 3000}, {0, 1000}} {
		be, drv := openNull(t)
		be.SetQueueDepth(c.depth)
		x := be.Alloc("x", 64)
		one := make([]float32, 1)
		be.Download(one, x) // a synchronisation: nothing ahead
		c0, o0 := be.Counters(), drv.ops
		for range c.ops {
			be.Zero(x)
		}
		got, d := drv.ops.sub(o0), be.Counters().Sub(c0)
		if got.zero != int64(c.ops) {
			t.Fatalf("depth %d: %d clears reached the driver, want %d", c.depth, got.zero, c.ops)
		}
		if c.depth == 0 {
			if got.maxAhead != int64(c.ops) || d.QueueWaits != 0 || got.waits != 0 {
				t.Errorf("no bound: %d ops ahead at most, %d waits (driver %d); want %d and none",
					got.maxAhead, d.QueueWaits, got.waits, c.ops)
			}
			continue
		}
		if got.maxAhead > int64(c.depth) {
			t.Errorf("depth %d: the host was %d ops ahead of the stream", c.depth, got.maxAhead)
		}
		// an event every depth/8 ops, each waited for depth ops after it
		every := c.depth / 8
		lo, hi := int64((c.ops-c.depth)/every-1), int64((c.ops-c.depth)/every+1)
		if d.QueueWaits < lo || d.QueueWaits > hi || got.waits != d.QueueWaits {
			t.Errorf("depth %d, %d ops: %d queue waits (the driver saw %d), want %d..%d",
				c.depth, c.ops, d.QueueWaits, got.waits, lo, hi)
		}
		if d.Syncs != 0 {
			t.Errorf("depth %d: %d synchronisations, want none (the waits are not syncs)", c.depth, d.Syncs)
		}
		// a synchronisation passes every event: nothing is waited for
		// until depth more ops are queued
		be.Download(one, x)
		w0 := be.Counters().QueueWaits
		for range c.depth - 1 {
			be.Zero(x)
		}
		if w := be.Counters().QueueWaits; w != w0 {
			t.Errorf("depth %d: %d waits within %d ops of a synchronisation", c.depth, w-w0, c.depth-1)
		}
	}
}

// TestQueueLimitPlanted: with the waits planted away (the events recorded,
// never waited for) the host runs ahead of the bound, and the null
// device's tracking sees it.
func TestQueueLimitPlanted(t *testing.T) {
	be, drv := openNull(t)
	be.SetQueueDepth(64)
	be.d.queue.plant = "nowait"
	x := be.Alloc("x", 64)
	o0 := drv.ops
	for range 1000 {
		be.Zero(x)
	}
	if got := drv.ops.sub(o0); got.maxAhead <= 64 || got.waits != 0 {
		t.Errorf("planted nowait: %d ops ahead at most, %d waits; want more than 64 and none", got.maxAhead, got.waits)
	}
}

// TestQueueLimitTrainingStep: the training step of BenchmarkHostCost (the
// Qwen2.5-0.5B shape, forward, backward, clip, AdamW, one download at its
// end: ~1400 ops between two synchronisations) stays DefaultQueueDepth
// ops ahead at most, with the same ops and synchronisations as without
// the bound; and a decode step replayed as a graph counts as one op.
func TestQueueLimitTrainingStep(t *testing.T) {
	type result struct {
		ops   nullOps
		c     Counters
		ahead int64
	}
	run := func(r hostCostRun, depth int) result {
		be, drv, m := openHostCost(t, r, hostCostConfig)
		be.SetQueueDepth(depth)
		step, _ := r.setup(t, m)
		if err := step(); err != nil {
			t.Fatal(err)
		}
		c0, o0 := be.Counters(), drv.ops
		drv.ops.maxAhead = 0
		if err := step(); err != nil {
			t.Fatal(err)
		}
		return result{drv.ops.sub(o0), be.Counters().Sub(c0), drv.ops.maxAhead}
	}
	for _, r := range []hostCostRun{hostCostTrain(8, 1024), hostCostDecode(64).withGraphs()} {
		on, off := run(r, DefaultQueueDepth), run(r, 0)
		if on.ahead > DefaultQueueDepth {
			t.Errorf("%s: %d ops ahead of the stream, bound %d", r.name, on.ahead, DefaultQueueDepth)
		}
		waitsOn, waitsOff := on.ops.waits, off.ops.waits
		on.ops.waits, off.ops.waits = 0, 0
		on.ops.passed, off.ops.passed, on.ops.maxAhead, off.ops.maxAhead = 0, 0, 0, 0
		if on.ops != off.ops || on.c.Counts().Syncs != off.c.Counts().Syncs {
			t.Errorf("%s: the bound changed the ops: %+v (%d syncs) against %+v (%d)", r.name, on.ops, on.c.Syncs, off.ops, off.c.Syncs)
		}
		// the driver's waits for events are the bound's and the samples' (overlap.go)
		if waitsOff != off.c.DownloadWaits || off.c.QueueWaits != 0 || waitsOn != on.c.QueueWaits+on.c.DownloadWaits {
			t.Errorf("%s: %d waits without the bound; %d with it, %d for samples (the driver saw %d)", r.name, waitsOff,
				on.c.QueueWaits, on.c.DownloadWaits, waitsOn)
		}
		t.Logf("%s: %d ops queued, at most %d ahead of the stream without the bound, %d with it (%d waits)",
			r.name, on.ops.queued(), off.ahead, on.ahead, on.c.QueueWaits)
		switch r.name {
		case "train-B8-T1024":
			if off.ahead <= DefaultQueueDepth || on.c.QueueWaits == 0 {
				t.Errorf("%s: %d ops ahead without the bound, %d waits with it: the step no longer tests the bound",
					r.name, off.ahead, on.c.QueueWaits)
			}
		default:
			// a graph launch a decode forward, and the host waits for a forward's
			// samples after queueing the next (overlap scheduling): two forwards
			// ahead at most, of which only eager ones (a batch's first steps, a
			// few hundred ops each) come near the bound
			if on.c.DownloadWaits != hostCostNew || on.c.Syncs != 0 {
				t.Errorf("%s: %d waits for samples and %d syncs in %d forwards; want a wait each, no sync",
					r.name, on.c.DownloadWaits, on.c.Syncs, hostCostNew)
			}
			if off.ahead >= on.ops.queued()/2 {
				t.Errorf("%s: %d ops ahead of the stream without the bound, of %d queued", r.name, off.ahead, on.ops.queued())
			}
		}
	}
}

// TestQueueDepthEnv: QueueDepthEnv's values.
func TestQueueDepthEnv(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int
		bad  bool
	}{{"", DefaultQueueDepth, false}, {"0", 0, false}, {"8", 8, false}, {"2048", 2048, false},
		{"4", 0, true}, {"-1", 0, true}, {"many", 0, true}} {
		t.Setenv(QueueDepthEnv, c.v)
		n, err := queueDepthFromEnv()
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), QueueDepthEnv) {
				t.Errorf("%s=%q: %d, %v; want an error naming it", QueueDepthEnv, c.v, n, err)
			}
			continue
		}
		if err != nil || n != c.want {
			t.Errorf("%s=%q: %d, %v; want %d", QueueDepthEnv, c.v, n, err, c.want)
		}
	}
}
