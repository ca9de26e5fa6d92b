package cuda

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// stepClock is an event timer whose clock advances only when told: an
// event records the clock's reading, so the test knows every op's time.
type stepClock struct {
	now               time.Duration
	made, live, syncs int
}

type clockEvent struct{ at time.Duration }

func (c *stepClock) newEvent() (event, error) { c.made++; c.live++; return &clockEvent{at: -1}, nil }
func (c *stepClock) record(e event) error     { e.(*clockEvent).at = c.now; return nil }
func (c *stepClock) destroyEvent(event) error { c.live--; return nil }
func (c *stepClock) elapsed(s, e event) (time.Duration, error) {
	a, b := s.(*clockEvent).at, e.(*clockEvent).at
	if a < 0 || b < 0 {
		return 0, errors.New("not recorded")
	}
	return b - a, nil
}

// op runs one timed op of d on p.
func (c *stepClock) op(t *testing.T, p *profiler, name, kind string, d time.Duration, opErr error) {
	t.Helper()
	ev, err := p.begin()
	if err != nil {
		t.Fatal(err)
	}
	c.now += d
	if err := p.end(ev, name, kind, opErr); err != opErr {
		t.Fatalf("end returned %v, want the op's %v", err, opErr)
	}
	c.now += time.Microsecond // between ops: not counted
}

func TestProfilerAggregates(t *testing.T) {
	c := &stepClock{}
	p := &profiler{t: c, sync: func() error { c.syncs++; return nil }, agg: profileAgg{}}
	for range 3 {
		c.op(t, p, "matmul", "cublas", 30*time.Microsecond, nil)
		c.op(t, p, "rope", "kernel", 10*time.Microsecond, nil)
	}
	c.op(t, p, "memcpy HtoD", "copy", 20*time.Microsecond, nil)
	c.op(t, p, "rope", "kernel", 50*time.Microsecond, errors.New("launch failed")) // not counted
	if c.syncs != 0 || len(p.agg) != 0 {
		t.Fatalf("before resolve: %d syncs, %d entries; want none (nothing synchronises per op)", c.syncs, len(p.agg))
	}
	if err := p.resolve(); err != nil {
		t.Fatal(err)
	}
	got := p.agg.profile()
	want := []ProfileEntry{
		{Op: "matmul", Kind: "cublas", Calls: 3, Time: 90 * time.Microsecond, Share: 90.0 / 140},
		{Op: "rope", Kind: "kernel", Calls: 3, Time: 30 * time.Microsecond, Share: 30.0 / 140},
		{Op: "memcpy HtoD", Kind: "copy", Calls: 1, Time: 20 * time.Microsecond, Share: 20.0 / 140},
	}
	if got.Total != 140*time.Microsecond || len(got.Entries) != len(want) {
		t.Fatalf("profile %+v, want total 140µs and %+v", got, want)
	}
	for i, w := range want {
		e := got.Entries[i]
		if e.Op != w.Op || e.Kind != w.Kind || e.Calls != w.Calls || e.Time != w.Time || e.Share-w.Share > 1e-12 || w.Share-e.Share > 1e-12 {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
	}
	if m := got.Entries[0].Mean(); m != 30*time.Microsecond {
		t.Errorf("matmul mean %v, want 30µs", m)
	}
	if n := got.Calls("kernel"); n != 3 {
		t.Errorf("kernel calls %d, want 3", n)
	}
	if s := got.String(); !strings.Contains(s, "matmul") || !strings.Contains(s, "64.3%") {
		t.Errorf("table lacks matmul's row with its 64.3%% share:\n%s", s)
	}
	// a pair per op until resolved (8 ops, the failed one's pair given
	// back), then reused
	if c.made != 16 {
		t.Errorf("%d events made for 8 ops, want 16", c.made)
	}
	for range 8 {
		c.op(t, p, "rope", "kernel", time.Microsecond, nil)
	}
	if c.made != 16 {
		t.Errorf("%d events made after 8 more ops, want the 16 resolved ones reused", c.made)
	}
	if err := p.release(); err != nil || c.live != 0 {
		t.Errorf("release: %v, %d events alive; want none", err, c.live)
	}
}

// TestProfilerPoolFull: when every pair is pending the stream is
// synchronised once and they are resolved; no op is lost.
func TestProfilerPoolFull(t *testing.T) {
	c := &stepClock{}
	p := &profiler{t: c, sync: func() error { c.syncs++; return nil }, agg: profileAgg{}}
	var evs []eventPair
	for range profilePairs + 1 { // all outstanding at once, as queued ops are
		ev, err := p.begin()
		if err != nil {
			t.Fatal(err)
		}
		c.now += time.Microsecond
		if err := p.end(ev, "k", "kernel", nil); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if c.syncs != 1 || len(p.pending) != 1 {
		t.Errorf("after %d ops: %d syncs, %d pending; want 1 and 1", profilePairs+1, c.syncs, len(p.pending))
	}
	if c.made != 2*profilePairs {
		t.Errorf("%d events made, want %d (the pool)", c.made, 2*profilePairs)
	}
	if err := p.resolve(); err != nil {
		t.Fatal(err)
	}
	if e := p.agg["k"]; e == nil || e.Calls != profilePairs+1 || e.Time != (profilePairs+1)*time.Microsecond {
		t.Errorf("entry %+v, want %d calls of 1µs", e, profilePairs+1)
	}
}

func TestExTypes(t *testing.T) {
	for _, x := range []struct {
		at, bt, ct DataType
		c          ComputeType
		want       string
	}{
		{R16BF, R16BF, R32F, Compute32F, "bf16->f32"},
		{R32F, R32F, R32F, Compute32FTF32, "f32 tf32"},
		{R32F, R32F, R32F, Compute32F, "f32"},
		{R16BF, R32F, R32F, Compute32F, "bf16,f32->f32"},
	} {
		if got := exTypes(x.at, x.bt, x.ct, x.c); got != x.want {
			t.Errorf("exTypes(%v, %v, %v, %v) = %q, want %q", x.at, x.bt, x.ct, x.c, got, x.want)
		}
	}
}

// TestBlasOpNames: the cuBLAS calls' profile keys (docs/gpu.md, "Where
// the device time goes"; scripts/gpu read them), and one name per distinct
// call however often it recurs.
func TestBlasOpNames(t *testing.T) {
	cases := []struct {
		op   blasOp
		want string
	}{
		{blasOp{routine: 's', transB: true, m: 4, n: 5, k: 6}, "cublasSgemm f32 NT 4x5x6"},
		{blasOp{routine: 'S', transA: true, transB: true, m: 1, n: 2, k: 3, count: 4}, "cublasSgemmStridedBatched f32 TT 1x2x3 x4"},
		{blasOp{routine: 'e', transB: true, m: 896, n: 8192, k: 4864, at: R16BF, bt: R16BF, ct: R32F, compute: Compute32F},
			"cublasGemmEx bf16->f32 NT 896x8192x4864"},
		{blasOp{routine: 'e', m: 1, n: 2, k: 3, at: R32F, bt: R32F, ct: R32F, compute: Compute32FTF32}, "cublasGemmEx f32 tf32 NN 1x2x3"},
		{blasOp{routine: 'E', transA: true, m: 64, n: 1024, k: 1024, count: 112, at: R16BF, bt: R16BF, ct: R32F, compute: Compute32F},
			"cublasGemmStridedBatchedEx bf16->f32 TN 64x1024x1024 x112"},
	}
	var p profiler
	for round := range 2 {
		for _, c := range cases {
			if got := p.blasName(c.op); got != c.want {
				t.Errorf("round %d: %+v is %q, want %q", round, c.op, got, c.want)
			}
		}
	}
	if len(p.blasNames) != len(cases) {
		t.Errorf("%d names kept for %d distinct calls", len(p.blasNames), len(cases))
	}
}
