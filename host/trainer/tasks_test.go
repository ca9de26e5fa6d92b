package trainer

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/dist"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// twoTasks is a routing table of two tasks (no processes: routing needs only the declared
// data sources).
func twoTasks() *taskSet {
	a := &runTask{name: "gsm8k", sources: []string{"openai/gsm8k"}, weight: 1}
	b := &runTask{name: "arith", sources: []string{"arith", "arith_hard"}, weight: 0.5}
	return &taskSet{list: []*runTask{a, b}, log: hclog.NewNullLogger(),
		bySource: map[string]*runTask{"openai/gsm8k": a, "arith": b, "arith_hard": b}}
}

func writeRows(t *testing.T, path string, sources ...string) {
	t.Helper()
	var rows []data.Row
	for i, ds := range sources {
		rows = append(rows, data.Row{DataSource: ds, Prompt: []data.Message{{Role: "user", Content: "q"}},
			RewardModel: data.RewardModel{Style: "rule", GroundTruth: "1"}, ExtraInfo: map[string]any{"index": int64(i)}})
	}
	if err := data.WriteParquet(path, rows); err != nil {
		t.Fatal(err)
	}
}

// A row whose data_source no loaded task serves stops loading before any prompt is made,
// and the error names the key, the file, the row, the source and every loaded task.
func TestUnknownDataSourceFailsFast(t *testing.T) {
	dir := t.TempDir()
	writeRows(t, filepath.Join(dir, "a.parquet"), "openai/gsm8k", "arith")
	writeRows(t, filepath.Join(dir, "b.parquet"), "arith_hard", "openai/gsm8k", "search_r1")
	_, _, err := loadExamples(context.Background(), "data.train_files", []string{filepath.Join(dir, "*.parquet")}, rollout.Chat{}, twoTasks(),
		"single_turn_agent", 512, true, "error", 0, nil)
	if err == nil {
		t.Fatal("loading rows of an unserved data_source succeeded")
	}
	for _, want := range []string{"data.train_files", filepath.Join(dir, "b.parquet") + " row 2", `data_source "search_r1"`,
		"gsm8k (openai/gsm8k); arith (arith, arith_hard)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// A row that rlhost preprocess would skip (data.CheckRow: no data_source, no prompt text) stops
// loading with the file and the row, in a run of one task too.
func TestInvalidRowFailsFast(t *testing.T) {
	dir := t.TempDir()
	writeRows(t, filepath.Join(dir, "a.parquet"), "openai/gsm8k", "openai/gsm8k", "")
	one := &runTask{name: "gsm8k", sources: []string{"openai/gsm8k"}}
	set := &taskSet{list: []*runTask{one}, bySource: map[string]*runTask{"openai/gsm8k": one}, log: hclog.NewNullLogger()}
	_, _, err := loadExamples(context.Background(), "data.train_files", []string{filepath.Join(dir, "a.parquet")}, rollout.Chat{}, set,
		"single_turn_agent", 512, true, "error", 0, nil)
	want := "trainer: data.train_files: " + filepath.Join(dir, "a.parquet") + " row 2: column data_source: is empty"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("loading a row without data_source: %v; want %q", err, want)
	}
}

func TestRouteSingleTaskTakesEverySource(t *testing.T) {
	a := &runTask{name: "gsm8k", sources: []string{"openai/gsm8k"}}
	s := &taskSet{list: []*runTask{a}, bySource: map[string]*runTask{"openai/gsm8k": a}, log: hclog.NewNullLogger()}
	if rt, ok := s.route("other"); !ok || rt != a {
		t.Errorf("a run of one task must take rows of any data_source; got %v %v", rt, ok)
	}
	if _, ok := twoTasks().route("other"); ok {
		t.Error("a mixed run routed an undeclared data_source")
	}
}

func examplesOf(sources map[string]int) []example {
	var out []example
	for _, ds := range sortedNames(sources) {
		for i := 0; i < sources[ds]; i++ {
			out = append(out, example{Row: task.Row{DataSource: ds}})
		}
	}
	return out
}

// data.sampling_weights: the share of each source in the batches follows the weights (not
// the row counts), a source of weight 0 never appears, and Seek to a saved position gives
// the same batches as the run that saved it.
func TestWeightedSampler(t *testing.T) {
	exs := examplesOf(map[string]int{"a": 900, "b": 90, "c": 10})
	s, err := newSamplerFor(exs, 10, 7, true, map[string]float64{"a": 1, "b": 3, "c": 0})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	const steps = 400
	var saved [][]int
	var epoch, pos int
	for k := 0; k < steps; k++ {
		if k == 250 {
			epoch, pos = s.Epoch, s.Pos
		}
		b := s.Next()
		if k >= 250 {
			saved = append(saved, b)
		}
		for _, i := range b {
			count[exs[i].Row.DataSource]++
		}
	}
	if count["c"] != 0 {
		t.Errorf("source c has weight 0 but was drawn %d times", count["c"])
	}
	share := float64(count["b"]) / float64(steps*10)
	if math.Abs(share-0.75) > 0.03 {
		t.Errorf("source b (weight 3 of 4) is %.3f of the prompts, want 0.75", share)
	}
	// b has 90 rows: over 3000 draws each is drawn 3000/90 times, near evenly (epochs).
	per := map[int]int{}
	for _, b := range saved {
		for _, i := range b {
			per[i]++
		}
	}
	r, err := newSamplerFor(exs, 10, 7, true, map[string]float64{"a": 1, "b": 3, "c": 0})
	if err != nil {
		t.Fatal(err)
	}
	r.Seek(epoch, pos)
	for k, want := range saved {
		got := r.Next()
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("after Seek(%d, %d), batch %d differs: %v vs %v", epoch, pos, k, got, want)
			}
		}
	}
	if _, err := newSamplerFor(exs, 10, 7, true, map[string]float64{"a": 1, "b": 1}); err == nil || !strings.Contains(err.Error(), `no weight for data_source "c"`) {
		t.Errorf("missing weight: %v", err)
	}
	if _, err := newSamplerFor(exs, 10, 7, true, map[string]float64{"a": 1, "b": 1, "c": 1, "d": 2}); err == nil || !strings.Contains(err.Error(), `names data_source "d", which no usable row`) {
		t.Errorf("unused weight: %v", err)
	}
}

func outsFor(sources []string, uids []string) []*rollout.Output {
	var out []*rollout.Output
	for i, ds := range sources {
		out = append(out, &rollout.Output{Sample: &rollout.Sample{Row: task.Row{DataSource: ds}, UID: uids[i]}})
	}
	return out
}

func TestGroupsNeverMixTasks(t *testing.T) {
	tr := &Trainer{tasks: twoTasks()}
	ok := outsFor([]string{"openai/gsm8k", "openai/gsm8k", "arith", "arith_hard"}, []string{"u0", "u0", "u1", "u1"})
	if err := tr.checkGroupsOneTask(ok); err != nil {
		t.Error(err)
	}
	bad := outsFor([]string{"openai/gsm8k", "arith"}, []string{"u0", "u0"})
	if err := tr.checkGroupsOneTask(bad); err == nil || !strings.Contains(err.Error(), "group u0 holds trajectories of tasks gsm8k and arith") {
		t.Errorf("mixed group: %v", err)
	}
}

// task.adv_norm_scope=task whitens each task's trajectories on their own (mean 0, variance 1
// per task); global whitens the batch as one (veRL), leaving each task's mean off 0 when the
// tasks' rewards differ. Task weights scale the scores first.
func TestAdvantageScopeAndWeights(t *testing.T) {
	sources := []string{"openai/gsm8k", "openai/gsm8k", "openai/gsm8k", "arith", "arith", "arith"}
	outs := outsFor(sources, []string{"a", "b", "c", "d", "e", "f"})
	scores := []float64{1, 0, 1, 10, 12, 14}
	const T = 3
	mask := make([]float32, len(outs)*T)
	for i := range mask {
		mask[i] = 1
	}
	for _, scope := range []string{"global", "task"} {
		cfg := config.Default()
		cfg.Algorithm.AdvEstimator = "reinforce_plus_plus"
		cfg.Task.AdvNormScope = scope
		tr := &Trainer{cfg: cfg, tasks: twoTasks()}
		w := tr.weightedScores(outs, scores)
		if w[0] != 1 || w[3] != 5 {
			t.Fatalf("weighted scores %v: want gsm8k x1, arith x0.5", w)
		}
		rewards := make([]float32, len(outs)*T)
		for i := range outs {
			rewards[i*T+T-1] = float32(w[i])
		}
		adv, _, err := tr.estimate(outs, algo.AdvantageInput{TokenRewards: rewards, Mask: mask, B: len(outs), T: T,
			Groups: []string{"a", "b", "c", "d", "e", "f"}, Gamma: 1})
		if err != nil {
			t.Fatal(err)
		}
		gMean := algo.MaskedMean(adv[:3*T], mask[:3*T])
		aMean := algo.MaskedMean(adv[3*T:], mask[3*T:])
		switch scope {
		case "task":
			if math.Abs(gMean) > 1e-5 || math.Abs(aMean) > 1e-5 {
				t.Errorf("scope task: per-task advantage means %v, %v; want 0", gMean, aMean)
			}
		case "global":
			if math.Abs(gMean) < 0.5 || math.Abs(gMean+aMean) > 1e-5 {
				t.Errorf("scope global: per-task means %v, %v; want opposite and far from 0", gMean, aMean)
			}
		}
	}
}

// TestAdvantageScopeTaskOverRanks: task.adv_norm_scope=task on 2 ranks whitens each task over
// the whole batch, each task's sums added over the ranks, though rank 1 holds no trajectory of
// one task (it still takes part in that task's sums): every estimator gives one rank's
// advantages.
func TestAdvantageScopeTaskOverRanks(t *testing.T) {
	sources := []string{"openai/gsm8k", "openai/gsm8k", "openai/gsm8k", "arith", "arith", "arith"}
	uids := []string{"a", "a", "b", "c", "d", "d"} // groups whole on a rank
	outs := outsFor(sources, uids)
	scores := []float64{1, 0, 1, 10, 12, 14}
	const T = 3
	in := algo.AdvantageInput{TokenRewards: make([]float32, len(outs)*T), Mask: make([]float32, len(outs)*T),
		Values: make([]float32, len(outs)*T), B: len(outs), T: T, Groups: uids, Gamma: 1, Lam: 0.95}
	for i := range in.Mask {
		in.Mask[i] = float32(min(1, (i+1)%5)) // some tokens masked
		in.Values[i] = float32(i%4) * 0.3
	}
	for i := range outs {
		in.TokenRewards[i*T+T-1] = float32(scores[i])
	}
	cut := 4 // rank 0: three gsm8k and one arith; rank 1: two arith, no gsm8k
	for _, est := range []string{"reinforce_plus_plus", "gae", "reinforce_plus_plus_baseline", "gpg", "grpo"} {
		cfg := config.Default()
		cfg.Algorithm.AdvEstimator = est
		cfg.Task.AdvNormScope = "task"
		one, _, err := (&Trainer{cfg: cfg, tasks: twoTasks()}).estimate(outs, in)
		if err != nil {
			t.Fatal(err)
		}
		comms := dist.NewLocal(2, 10*time.Second)
		got := make([][]float32, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r, c := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lo, hi := 0, cut
				if r == 1 {
					lo, hi = cut, len(outs)
				}
				p := in
				p.B = hi - lo
				p.TokenRewards, p.Mask, p.Values = in.TokenRewards[lo*T:hi*T], in.Mask[lo*T:hi*T], in.Values[lo*T:hi*T]
				p.Groups = in.Groups[lo:hi]
				p.Sum = func(xs []float64) error { return c.AllReduce64(context.Background(), xs, dist.Sum) }
				got[r], _, errs[r] = (&Trainer{cfg: cfg, tasks: twoTasks()}).estimate(outs[lo:hi], p)
				if errs[r] != nil {
					c.Abort(errs[r])
				}
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%s: rank %d: %v", est, r, err)
			}
		}
		both := append(slices.Clone(got[0]), got[1]...)
		for i := range one {
			if math.Abs(float64(both[i]-one[i])) > 1e-5 {
				t.Fatalf("%s: advantage %d is %v on 2 ranks, %v on one (2 ranks %v, one %v)", est, i, both[i], one[i], both, one)
			}
		}
	}
}
