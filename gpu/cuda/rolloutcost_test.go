//go:build linux

package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/host/rollout"
)

// The host's cost of a GRPO step's generation (docs/gpu.md, "The GRPO
// step's host time"): the rollout's own path, host/rollout's ModelPolicy
// (one goroutine per trajectory calling Generate, continuous batching over
// one generator), on the null device with decode graphs, so that every
// nanosecond measured is the host's and the decode forwards that replay a
// graph, are captured or run eager are counted.

// grpoRollout is the generation of a GRPO step: prompts groups of n
// samples sharing a prompt of promptLen tokens, each sampling newTokens,
// or, varied, a number drawn uniformly between 1 and newTokens (responses
// that end at different lengths: the batch shrinks through most sizes).
type grpoRollout struct {
	prompts, n, promptLen, newTokens int
	varied                           bool
}

// grpoRolloutCounts is what a grpoRollout queued.
type grpoRolloutCounts struct {
	forwards int64      // generator forwards (each samples once: its parameters go up)
	graphs   GraphStats // the decode forwards' regions
	c        Counters
	wall     time.Duration
}

// decode is the forwards whose rows all decode (a region each); the
// others carried a prompt.
func (g grpoRolloutCounts) decode() int64 {
	s := g.graphs
	return s.Captures + s.Replays + s.Mismatches + s.Aborts + s.Eager
}

func (g grpoRolloutCounts) String() string {
	s := g.graphs
	return fmt.Sprintf("%d forwards (%d with prompt tokens), decode: %d replayed, %d captured, %d eager, %d mismatched, %d aborted; %d kernel launches queued by the host, %d graph launches; %v (%.1f µs a forward)",
		g.forwards, g.forwards-g.decode(), s.Replays, s.Captures, s.Eager, s.Mismatches, s.Aborts,
		g.c.Launches-g.c.GraphKernels, g.c.GraphLaunches, g.wall, float64(g.wall.Microseconds())/float64(g.forwards))
}

// uploadsPerForward is the host->device copies of a generator forward:
// tokens, positions, slots, cache rows, selected rows, and the sampling's
// parameters (checked by TestGRPORolloutNullDevice).
const uploadsPerForward = 6

// run runs the rollout through a ModelPolicy of slots sequences on m and
// counts it; every trajectory's Generate runs in its own goroutine, as
// rollout.RunBatch runs them.
func (r grpoRollout) run(tb testing.TB, be *Backend, p *rollout.ModelPolicy, V int, seed uint64) grpoRolloutCounts {
	rng := rand.New(rand.NewPCG(seed, 5))
	prompts := make([][]int, r.prompts)
	for i := range prompts {
		prompts[i] = make([]int, r.promptLen)
		for j := range prompts[i] {
			prompts[i][j] = 3 + rng.IntN(V-3)
		}
	}
	lens := make([]int, r.prompts*r.n)
	for i := range lens {
		lens[i] = r.newTokens
		if r.varied {
			lens[i] = 1 + rng.IntN(r.newTokens)
		}
	}
	c0, g0 := be.Counters(), be.GraphStats()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(lens))
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen, err := p.Generate(context.Background(), prompts[i/r.n],
				rollout.SamplingParams{MaxTokens: lens[i], Temperature: 1, Seed: seed + uint64(i)})
			if err == nil && len(gen.Tokens) != lens[i] {
				err = fmt.Errorf("%d tokens, want %d", len(gen.Tokens), lens[i])
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("trajectory %d: %v", i, err)
		}
	}
	c := be.Counters().Sub(c0)
	g1 := be.GraphStats()
	gs := GraphStats{Captures: g1.Captures - g0.Captures, Replays: g1.Replays - g0.Replays,
		Mismatches: g1.Mismatches - g0.Mismatches, Aborts: g1.Aborts - g0.Aborts, Eager: g1.Eager - g0.Eager}
	return grpoRolloutCounts{forwards: c.Uploads / uploadsPerForward, graphs: gs, c: c, wall: wall}
}

// openGRPORollout is a null device with decode graphs in bf16, a
// zero-weight model of shape c on it and a ModelPolicy of slots sequences.
func openGRPORollout(tb testing.TB, c model.Config, r grpoRollout, slots int) (*Backend, *rollout.ModelPolicy) {
	be, _ := openNullDevice(tb, true)
	be.SetPrecision(BF16)
	m := model.NewZero(be, c)
	p, err := rollout.NewModelPolicy(m, slots, r.promptLen+r.newTokens)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return be, p
}

// proofRollout is scripts/gpu/proof.sh's GRPO step: 32 prompts x 8
// samples, 256 new tokens each (random weights: every response runs to
// the limit), max_num_seqs 256.
var proofRollout = grpoRollout{prompts: 32, n: 8, promptLen: 64, newTokens: 256}

// TestGRPORolloutNullDevice: the uploads of a forward are as counted
// (one request: one forward a token), and a GRPO step's generation
// through host/rollout runs its decode forwards as graphs.
func TestGRPORolloutNullDevice(t *testing.T) {
	c := hostCostConfig
	c.L = 2
	one := grpoRollout{prompts: 1, n: 1, promptLen: 8, newTokens: 5}
	be, p := openGRPORollout(t, c, one, 4)
	if got := one.run(t, be, p, c.V, 1); got.forwards != 5 || got.c.Uploads != 5*uploadsPerForward {
		t.Fatalf("one request of 5 tokens: %d uploads, want %d (%d a forward)", got.c.Uploads, 5*uploadsPerForward, uploadsPerForward)
	}
	r := grpoRollout{prompts: 8, n: 4, promptLen: 32, newTokens: 24}
	be, p = openGRPORollout(t, c, r, 32)
	for i := range 2 {
		got := r.run(t, be, p, c.V, uint64(10+i))
		t.Logf("step %d: %v", i, got)
		if got.forwards < int64(r.newTokens) || got.graphs.Replays == 0 {
			t.Errorf("step %d: %v; want at least %d forwards, decode forwards replayed", i, got, r.newTokens)
		}
	}
}

// BenchmarkGRPORollout is proofRollout's generation on the null device at
// the Qwen2.5-0.5B shape: the host's time a step (ns/op), a forward, and
// how its decode forwards ran. Profile it with -cpuprofile.
func BenchmarkGRPORollout(b *testing.B) { benchGRPORollout(b, proofRollout) }

// BenchmarkGRPORolloutVaried is BenchmarkGRPORollout with responses of
// lengths drawn uniformly between 1 and 256 tokens: the batch shrinks
// through most sizes from 256 to 1, its decode steps padded to a few
// (docs/gpu.md, "Decode graphs").
func BenchmarkGRPORolloutVaried(b *testing.B) {
	r := proofRollout
	r.varied = true
	benchGRPORollout(b, r)
}

func benchGRPORollout(b *testing.B, r grpoRollout) {
	be, p := openGRPORollout(b, hostCostConfig, r, r.prompts*r.n)
	r.run(b, be, p, hostCostConfig.V, 1) // warm-up: buffers, copies, the first graphs
	var tot grpoRolloutCounts
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		got := r.run(b, be, p, hostCostConfig.V, uint64(2+i))
		tot.forwards += got.forwards
		tot.wall += got.wall
		g := &tot.graphs
		g.Captures += got.graphs.Captures
		g.Replays += got.graphs.Replays
		g.Eager += got.graphs.Eager
		g.Mismatches += got.graphs.Mismatches
		g.Aborts += got.graphs.Aborts
		tot.c.Launches += got.c.Launches - got.c.GraphKernels
		tot.c.GraphLaunches += got.c.GraphLaunches
		if i == 0 {
			b.Logf("a step: %v", got)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tot.forwards)/n, "forwards/step")
	b.ReportMetric(float64(tot.forwards-tot.decode())/n, "prompt-forwards/step")
	b.ReportMetric(float64(tot.graphs.Replays)/n, "replays/step")
	b.ReportMetric(float64(tot.graphs.Captures)/n, "captures/step")
	b.ReportMetric(float64(tot.graphs.Eager+tot.graphs.Mismatches+tot.graphs.Aborts)/n, "eager-decode/step")
	b.ReportMetric(float64(tot.c.Launches)/n, "host-launches/step")
	b.ReportMetric(float64(tot.wall.Nanoseconds())/float64(tot.forwards), "ns/forward")
}
