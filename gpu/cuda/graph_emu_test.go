//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// graphRequests are 3 requests over 2 slots (the third refills the first
// slot to finish, so that the batch goes 2 -> 1 -> 2 -> 1), greedy or
// sampled, of 3, 5 and 4 prompt tokens.
func graphRequests(r *rand.Rand, c model.Config, sampled bool) []model.Request {
	var reqs []model.Request
	for i, n := range []int{3, 5, 4} {
		prompt := make([]int32, n)
		for j := range prompt {
			prompt[j] = int32(3 + r.IntN(c.V-3))
		}
		sc := model.SampleConfig{MaxTokens: 6 + 3*i, IgnoreEOS: true, Seed: uint64(11 + i)}
		if sampled {
			sc.Temperature, sc.TopK, sc.TopP = 0.9, 20, 0.9
		}
		reqs = append(reqs, model.Request{Prompt: prompt, Sample: sc})
	}
	return reqs
}

// graphScenario is a sequence of generations on one generator, with
// changes between them (change(i) before generation i > 0).
type graphScenario struct {
	c       model.Config
	p       Precision
	lora    bool
	sampled bool
	rounds  int
	change  func(t *testing.T, be *Backend, m *model.Model, i int)
}

// run runs the scenario on a fresh emulator with decode graphs on or off
// (and a defect planted in the replay, if plant), and returns every
// round's results and the graph counts.
func (s graphScenario) run(t *testing.T, on bool, plant string) ([][]model.Result, GraphStats, Counters) {
	t.Helper()
	be := openEmulator(t)
	be.SetDecodeGraphs(on)
	be.d.graphs.plant = plant
	be.SetPrecision(s.p)
	r := rand.New(rand.NewPCG(29, 3))
	m := model.NewZero(be, s.c)
	m.Params.Upload(checkutil.Randn(r, s.c.NumParams(), 0.3))
	if s.lora {
		withLoRA(t, m, r)
	}
	g, err := m.NewGenerator(2, 40)
	if err != nil {
		t.Fatal(err)
	}
	reqs := graphRequests(r, s.c, s.sampled)
	var out [][]model.Result
	for i := range max(1, s.rounds) {
		if i > 0 && s.change != nil {
			s.change(t, be, m, i)
		}
		res, err := g.Generate(reqs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res)
	}
	return out, be.GraphStats(), be.Counters()
}

// diff says how two runs' results differ, or "" when they are the same
// bit for bit.
func graphDiff(a, b [][]model.Result) string {
	for i := range a {
		for j := range a[i] {
			x, y := a[i][j], b[i][j]
			if !slices.Equal(x.Tokens, y.Tokens) || !slices.Equal(x.Logprobs, y.Logprobs) {
				return fmt.Sprintf("round %d request %d: %v %v, eager %v %v", i, j, x.Tokens, x.Logprobs, y.Tokens, y.Logprobs)
			}
		}
	}
	return ""
}

// TestDecodeGraphExactEmulator: generation with decode graphs gives the
// tokens and log-probs of the ops run one by one, bit for bit, greedy and
// sampled, fp32 and bf16, Qwen2-shaped (biases, fused ops) and
// Llama-shaped with LoRA adapters on every product, over a batch that
// changes size (each size captured once it comes twice in a row) and a
// slot refilled; and the graphs did run most of the decode steps.
func TestDecodeGraphExactEmulator(t *testing.T) {
	for _, s := range []graphScenario{
		{c: decodeQwenConfig(2), p: FP32},
		{c: decodeQwenConfig(2), p: BF16, sampled: true},
		{c: checkutil.GroupsConfig, p: FP32, sampled: true, lora: true},
		{c: checkutil.GroupsConfig, p: BF16, lora: true},
	} {
		name := fmt.Sprintf("%s %s lora=%v sampled=%v", s.c.Family, s.p, s.lora, s.sampled)
		eager, st0, c0 := s.run(t, false, "")
		graph, st, c := s.run(t, true, "")
		if d := graphDiff(graph, eager); d != "" {
			t.Errorf("%s: with graphs %s", name, d)
		}
		t.Logf("%s: %+v; %v", name, st, c)
		if st0 != (GraphStats{Eager: st0.Eager}) || c0.GraphLaunches != 0 {
			t.Errorf("%s: graphs off, yet %+v, %d graph launches", name, st0, c0.GraphLaunches)
		}
		// batch sizes 2 and 1 each captured (at least), most steps replayed
		if st.Captures < 2 || st.Replays < st.Captures || st.Mismatches != 0 || st.Aborts != 0 {
			t.Errorf("%s: %+v: want the sizes 2 and 1 captured, replays, no mismatch", name, st)
		}
		if c.GraphLaunches != st.Captures+st.Replays || c.GraphKernels <= c.GraphLaunches {
			t.Errorf("%s: %d graph launches running %d kernels for %+v", name, c.GraphLaunches, c.GraphKernels, st)
		}
		// the graphs run the very kernels the ops would have launched
		if c.Launches != c0.Launches || c.Uploads != c0.Uploads || c.Downloads != c0.Downloads ||
			c.HostToDevice != c0.HostToDevice || c.DeviceToHost != c0.DeviceToHost || c.Syncs != c0.Syncs {
			t.Errorf("%s: counts with graphs %v, without %v", name, c, c0)
		}
	}
}

// graphChanges are changes between generations on one generator: new
// adapter weights (same addresses: the graph stays valid), a new LoRA
// scale (an argument of a launch: the graph no longer matches), bf16
// products (other calls), the fused decode ops off.
func graphChanges(t *testing.T, be *Backend, m *model.Model, i int) {
	lo := m.LoRA()
	switch i {
	case 1:
		r := rand.New(rand.NewPCG(31, 1))
		be.Upload(lo.Data, checkutil.Randn(r, len(lo.Data), 0.05))
		lo.Changed()
	case 2:
		lo.Scale *= 1.5
		lo.Changed()
	case 3:
		be.SetPrecision(BF16)
	case 4:
		be.SetDecodeFusion(false)
	}
}

// TestDecodeGraphInvalidationEmulator: a generator's graphs across changes
// of the adapters' weights and scale, of the precision and of the fused
// ops give what the ops give one by one; the changes that alter the calls
// are found (mismatches) and the sizes captured again. With the check of
// the calls left out (planted "noverify": a graph replayed because its key
// matches) or the calls matched before a mismatch dropped (planted
// "dropprefix"), the results differ.
func TestDecodeGraphInvalidationEmulator(t *testing.T) {
	s := graphScenario{c: checkutil.GroupsConfig, p: FP32, sampled: true, lora: true, rounds: 5, change: graphChanges}
	eager, _, _ := s.run(t, false, "")
	graph, st, _ := s.run(t, true, "")
	t.Logf("%+v", st)
	if d := graphDiff(graph, eager); d != "" {
		t.Errorf("with graphs %s", d)
	}
	if st.Mismatches < 3 || st.Captures < 6 {
		t.Errorf("%+v: want the scale, precision and fusion changes found, and the sizes captured again", st)
	}
	for _, plant := range []string{"noverify", "dropprefix"} {
		planted, st, _ := s.run(t, true, plant)
		if d := graphDiff(planted, eager); d == "" {
			t.Errorf("planted %s: the same results as eager (%+v): the test cannot fail", plant, st)
		} else {
			t.Logf("planted %s: %s", plant, d)
		}
	}
}

// TestDecodeGraphAbortEmulator: a region that copies through the host (the
// adapters staged through it, planted) cannot be captured: its calls run
// eager where the copy comes, the key stays eager, and the results are
// those of graphs off with the same planted staging.
func TestDecodeGraphAbortEmulator(t *testing.T) {
	s := graphScenario{c: checkutil.GroupsConfig, p: FP32, lora: true}
	var res [2][][]model.Result
	var st GraphStats
	for k, on := range []bool{false, true} {
		be := openEmulator(t)
		be.d.stageNamed = "LoRA"
		be.SetDecodeGraphs(on)
		r := rand.New(rand.NewPCG(29, 3))
		m := model.NewZero(be, s.c)
		m.Params.Upload(checkutil.Randn(r, s.c.NumParams(), 0.3))
		withLoRA(t, m, r)
		g, err := m.NewGenerator(2, 40)
		if err != nil {
			t.Fatal(err)
		}
		out, err := g.Generate(graphRequests(r, s.c, false))
		if err != nil {
			t.Fatal(err)
		}
		res[k] = [][]model.Result{out}
		st = be.GraphStats()
		if on && be.Counters().GraphLaunches != 0 {
			t.Errorf("%d graph launches with the host copies in the region", be.Counters().GraphLaunches)
		}
	}
	t.Logf("%+v", st)
	if d := graphDiff(res[1], res[0]); d != "" {
		t.Errorf("with graphs %s", d)
	}
	if st.Aborts == 0 || st.Captures != 0 || st.Replays != 0 {
		t.Errorf("%+v: want the captures aborted", st)
	}
}

// TestDecodeGraphSwitch: RLHOST_CUDA_GRAPHS=0 opens the emulator with
// decode graphs off; SetDecodeGraphs turns them on; gpu.DecodeGraphOps
// follows.
func TestDecodeGraphSwitch(t *testing.T) {
	t.Setenv(GraphsEnv, "0")
	be := openEmulator(t)
	if be.DecodeGraphs() || gpu.DecodeGraphOps(be) != nil {
		t.Errorf("%s=0: graphs on", GraphsEnv)
	}
	be.SetDecodeGraphs(true)
	if !be.DecodeGraphs() || gpu.DecodeGraphOps(be) == nil {
		t.Error("SetDecodeGraphs(true): graphs off")
	}
	t.Setenv(GraphsEnv, "")
	if be := openEmulator(t); !be.DecodeGraphs() {
		t.Error("graphs off by default")
	}
}

// TestDecodeGraphMismatchesEmulator: a region whose launch arguments change
// every time (a scale alternating 1 and 2) is captured, found not to match
// and captured again until graphMaxFails mismatches in a row, then left
// eager; one whose calls stay the same is replayed; every region's work
// runs once either way (the product of the scales).
func TestDecodeGraphMismatchesEmulator(t *testing.T) {
	be := openEmulator(t)
	x := be.Alloc("x", 4)
	be.Upload(x, []float32{1, 1, 1, 1})
	want := float32(1)
	for i := range 10 {
		s := float32(1 + i%2)
		be.BeginDecodeGraph(7)
		be.Scale(x, s)
		be.EndDecodeGraph()
		want *= s
	}
	st := be.GraphStats()
	if st.Captures != graphMaxFails || st.Mismatches != graphMaxFails || st.Replays != 0 {
		t.Errorf("alternating scales: %+v, want %d captures and mismatches", st, graphMaxFails)
	}
	for range 5 {
		be.BeginDecodeGraph(8)
		be.Scale(x, 2)
		be.EndDecodeGraph()
		want *= 2
	}
	st2 := be.GraphStats()
	if st2.Captures != st.Captures+1 || st2.Replays != 3 || st2.Mismatches != st.Mismatches {
		t.Errorf("a constant scale: %+v after %+v, want one capture and 3 replays", st2, st)
	}
	got := make([]float32, 4)
	be.Download(got, x)
	if got[0] != want || got[3] != want {
		t.Errorf("x = %v, want %v", got, want)
	}
}

// TestDecodeGraphRefusedEmulator: when the capture refuses a call (the
// emulator's capture refusing attention_cached_split, as a driver refuses what
// it cannot capture), the region's calls run eager, the key stays eager,
// and the results are those without graphs.
func TestDecodeGraphRefusedEmulator(t *testing.T) {
	s := graphScenario{c: decodeQwenConfig(2), p: BF16, sampled: true}
	eager, _, _ := s.run(t, false, "")
	be := openEmulator(t)
	be.d.drv.(emuDriver).m.Refuse = "attention_cached_split"
	r := rand.New(rand.NewPCG(29, 3))
	be.SetPrecision(s.p)
	m := model.NewZero(be, s.c)
	m.Params.Upload(checkutil.Randn(r, s.c.NumParams(), 0.3))
	g, err := m.NewGenerator(2, 40)
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Generate(graphRequests(r, s.c, s.sampled))
	if err != nil {
		t.Fatal(err)
	}
	st := be.GraphStats()
	t.Logf("%+v", st)
	if d := graphDiff([][]model.Result{res}, eager); d != "" {
		t.Errorf("with the capture refused %s", d)
	}
	if st.Aborts == 0 || st.Captures != 0 || be.Counters().GraphLaunches != 0 {
		t.Errorf("%+v, %d graph launches: want the captures aborted", st, be.Counters().GraphLaunches)
	}
}
