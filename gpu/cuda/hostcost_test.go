//go:build linux

package cuda

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/model"
)

// The host's own cost per queued op (docs/gpu.md, "The host's cost per
// op"): the real op sequence of gpu/model through the Backend, on the null
// device (nulldev_test.go), so that every nanosecond measured is the
// host's: gpu/model's Go code, the backend's and the Go side of the
// driver wrapper, not the CUDA driver's.

// hostCostConfig is Qwen2.5-0.5B's shape (the goals' model): on the null
// device the sizes cost nothing, and the op sequence is the proof's.
var hostCostConfig = model.Config{Family: "qwen2", V: 151936, C: 896, F: 4864, L: 24, NH: 14, NKV: 2, HD: 64,
	MaxPos: 2048, Eps: 1e-6, RopeTheta: 1e6, Tied: true, QKVBias: true, BOS: 1, EOS: 2}

// hostCostRun is one workload of BenchmarkHostCost: setup returns a step
// (one decode of the generator's new tokens, or one training step) and the
// model forwards it runs.
type hostCostRun struct {
	name    string
	setup   func(tb testing.TB, m *model.Model) (step func() error, forwards int)
	profile bool // with EnableProfile: an event pair around every op
	graphs  bool // on a null device with stream capture: decode steps replayed as graphs
}

// withGraphs is run with decode graphs.
func (r hostCostRun) withGraphs() hostCostRun {
	r.name, r.graphs = r.name+"-graphs", true
	return r
}

// profiled is run with the profile on.
func (r hostCostRun) profiled() hostCostRun {
	r.name, r.profile = r.name+"-profiled", true
	return r
}

// Decode: greedy, prompts of hostCostPrompt tokens, hostCostNew new tokens
// (one prefill forward and hostCostNew-1 decode forwards a step).
const hostCostPrompt, hostCostNew = 16, 32

func hostCostDecode(B int) hostCostRun {
	return hostCostRun{name: fmt.Sprintf("decode-B%d", B), setup: func(tb testing.TB, m *model.Model) (func() error, int) {
		g, err := m.NewGenerator(B, hostCostPrompt+hostCostNew)
		if err != nil {
			tb.Fatal(err)
		}
		g.NoPrefixSharing = true
		r := rand.New(rand.NewPCG(3, 3))
		reqs := make([]model.Request, B)
		for i := range reqs {
			p := make([]int32, hostCostPrompt)
			for j := range p {
				p[j] = int32(r.IntN(m.Config.V))
			}
			reqs[i] = model.Request{Prompt: p, Sample: model.SampleConfig{MaxTokens: hostCostNew, IgnoreEOS: true}}
		}
		return func() error {
			out, err := g.Generate(reqs)
			if err == nil && len(out[0].Tokens) != hostCostNew {
				err = fmt.Errorf("generated %d tokens, want %d", len(out[0].Tokens), hostCostNew)
			}
			return err
		}, hostCostNew
	}}
}

// Training: the proof's step, B x T tokens packed (flash attention),
// forward, backward of a weighted log-prob loss, clip, AdamW.
func hostCostTrain(B, T int) hostCostRun {
	return hostCostRun{name: fmt.Sprintf("train-B%d-T%d", B, T), setup: func(tb testing.TB, m *model.Model) (func() error, int) {
		r := rand.New(rand.NewPCG(4, 4))
		N := B * T
		batch := model.Batch{B: 1, T: N, Tokens: make([]int32, N), Targets: make([]int32, N), Lengths: make([]int, B)}
		dlogp, dent := make([]float32, N), make([]float32, N)
		for n := range batch.Tokens {
			batch.Tokens[n] = int32(r.IntN(m.Config.V))
			batch.Targets[n] = int32(r.IntN(m.Config.V))
			dlogp[n] = -1 / float32(N)
		}
		for i := range batch.Lengths {
			batch.Lengths[i] = T
		}
		m.EnableGrads()
		a := m.NewPackedActs(N)
		opt := model.NewAdamW(m, model.AdamWConfig{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1})
		one := make([]float32, 1)
		return func() error {
			m.ZeroGrads()
			if err := m.Forward(a, batch); err != nil {
				return err
			}
			if err := m.Backward(a, dlogp, dent); err != nil {
				return err
			}
			if _, err := opt.Update(m); err != nil {
				return err
			}
			m.Backend().Download(one, m.Params.Data[:1])
			return nil
		}, 1
	}}
}

var hostCostRuns = []hostCostRun{hostCostDecode(1), hostCostDecode(64), hostCostTrain(8, 1024),
	hostCostDecode(1).profiled(), hostCostTrain(8, 1024).profiled(),
	hostCostDecode(1).withGraphs(), hostCostDecode(64).withGraphs()}

// openHostCost is the null device with the model of a run on it.
func openHostCost(tb testing.TB, run hostCostRun, c model.Config) (*Backend, *nullDriver, *model.Model) {
	be, drv := openNullDevice(tb, run.graphs)
	be.SetPrecision(BF16)
	if run.profile {
		if err := be.EnableProfile(); err != nil {
			tb.Fatal(err)
		}
	}
	return be, drv, model.NewZero(be, c)
}

// BenchmarkHostCost runs decode steps at batch 1 and 64 and a training
// step of the Qwen2.5-0.5B shape in bfloat16 on the null device and
// reports, beside ns/op (one Generate of hostCostNew tokens, or one
// training step): ns/forward, ops/forward (kernel launches, cuBLAS calls
// and copies queued), ns/queued-op and allocs/queued-op, the host's cost
// per op. Run it with -benchtime 20x or more (an op is ~1 µs).
func BenchmarkHostCost(b *testing.B) {
	for _, run := range hostCostRuns {
		b.Run(run.name, func(b *testing.B) {
			_, drv, m := openHostCost(b, run, hostCostConfig)
			step, forwards := run.setup(b, m)
			if err := step(); err != nil { // warm-up: the step's buffers and copies
				b.Fatal(err)
			}
			ops0 := drv.ops
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				if err := step(); err != nil {
					b.Fatal(err)
				}
			}
			wall := time.Since(start)
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			ops := drv.ops.sub(ops0).queued()
			steps := int64(b.N * forwards)
			b.ReportMetric(float64(wall.Nanoseconds())/float64(steps), "ns/forward")
			b.ReportMetric(float64(ops)/float64(steps), "ops/forward")
			b.ReportMetric(float64(wall.Nanoseconds())/float64(ops), "ns/queued-op")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(ops), "allocs/queued-op")
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(ops), "B/queued-op")
		})
	}
}

// TestNullDevice runs each workload of BenchmarkHostCost once, on a
// 2-layer model of the same shape, and holds the null device's counts to
// the backend's own (Counters): every launch, copy and synchronisation the
// backend counted reached the driver and nothing else did, so the
// benchmark's ops/forward are the ops a GPU would be given.
func TestNullDevice(t *testing.T) {
	c := hostCostConfig
	c.L = 2
	for _, run := range hostCostRuns {
		t.Run(run.name, func(t *testing.T) {
			be, drv, m := openHostCost(t, run, c)
			step, _ := run.setup(t, m)
			if err := step(); err != nil {
				t.Fatal(err)
			}
			if run.profile { // resolved: the step's ops are all pending in its profile (< 4096)
				if _, err := be.Profile(); err != nil {
					t.Fatal(err)
				}
				be.ResetProfile()
			}
			c0, ops0 := be.Counters(), drv.ops
			if err := step(); err != nil {
				t.Fatal(err)
			}
			got, want := drv.ops.sub(ops0), be.Counters().Sub(c0)
			// a graph's replays run kernels the host did not queue
			if got.launches != want.Launches-want.GraphKernels || got.htod != want.Uploads || got.dtoh != want.Downloads ||
				got.dtod != want.DeviceCopies || got.syncs != want.Syncs || got.graphs != want.GraphLaunches {
				t.Errorf("null device counted %d launches, %d uploads, %d downloads, %d device copies, %d syncs, %d graph launches; the backend %d (less %d in graphs), %d, %d, %d, %d, %d",
					got.launches, got.htod, got.dtoh, got.dtod, got.syncs, got.graphs,
					want.Launches, want.GraphKernels, want.Uploads, want.Downloads, want.DeviceCopies, want.Syncs, want.GraphLaunches)
			}
			if run.graphs && (want.GraphLaunches == 0 || want.GraphKernels == 0) {
				t.Errorf("no decode step replayed as a graph: %v", want)
			}
			if got.blas == 0 || got.launches == 0 {
				t.Errorf("%d cuBLAS calls and %d launches in a step", got.blas, got.launches)
			}
			if run.profile { // every op of the step is in the profile
				p, err := be.Profile()
				if err != nil {
					t.Fatal(err)
				}
				if p.Calls("kernel") != got.launches || p.Calls("cublas") != got.blas ||
					p.Calls("copy") != got.htod+got.dtoh+got.dtod+got.zero {
					t.Errorf("profile of a step: %d kernels, %d cuBLAS calls, %d copies; the null device %d, %d, %d",
						p.Calls("kernel"), p.Calls("cublas"), p.Calls("copy"), got.launches, got.blas, got.htod+got.dtoh+got.dtod+got.zero)
				}
			}
			t.Logf("one step: %d launches, %d cuBLAS calls, %d up, %d down, %d on the device, %d syncs, %d graph launches",
				got.launches, got.blas, got.htod, got.dtoh, got.dtod, got.syncs, got.graphs)
		})
	}
}
