package trainer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/dist"
	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/plugins/local"
)

// TestRankReduceDeclared: every metric the trainer declares has a rule for merging the
// ranks' values, but an external engine's (one rank only); a <placeholder> is filled with
// a name that has a slash in it, as data sources do.
func TestRankReduceDeclared(t *testing.T) {
	for _, m := range metricTable {
		if m.section == inEngine {
			continue
		}
		name := m.name
		for range 3 {
			name = fillName(name, "openai/gsm8k")
		}
		if _, _, ok := rankReduce(name); !ok {
			t.Errorf("%s (%s): no rule for merging the ranks' values", name, m.section)
		}
	}
	for name, want := range map[string]string{
		"data_source/openai/gsm8k/score/mean": "ds:openai/gsm8k",
		"task/gsm8k/response_length/mean":     "task:gsm8k",
		"critic/advantages/mean":              "tok",
		metrics.ScoreMean:                     "traj",
		metrics.ValRewardKey("openai/gsm8k"):  "ds:openai/gsm8k",
		ValTaskRewardKey("gsm8k"):             "task:gsm8k",
		"val-aux/tool_call_fraction":          "traj",
	} {
		if k, w, _ := rankReduce(name); k != reduceMean || w != want {
			t.Errorf("%s: kind %d weight %q, want a mean by %q", name, k, w, want)
		}
	}
}

// TestMergeFigures: two ranks' figures merge as one rank's over both shares: means weighted
// by each rank's count (a data source only one rank has keeps that rank's value), sums,
// extremes, the slowest rank's seconds, and the values every rank shares taken once.
func TestMergeFigures(t *testing.T) {
	ranks := []rankFigures{
		{Vals: map[string]float64{metrics.ScoreMean: 1, "critic/score/max": 1, "critic/score/min": 0.5, "rollout/dropped": 1,
			"timing_s/gen": 3, "critic/advantages/mean": 0.2, actorGradNorm: 7, "data_source/a/score/mean": 0.25},
			Weights: map[string]float64{"traj": 4, "tok": 10, "ds:a": 4, "rank": 1}},
		{Vals: map[string]float64{metrics.ScoreMean: 0, "critic/score/max": 0.75, "critic/score/min": 0, "rollout/dropped": 2,
			"timing_s/gen": 5, "critic/advantages/mean": -0.3, actorGradNorm: 7},
			Weights: map[string]float64{"traj": 2, "tok": 30, "rank": 1}},
	}
	got := mergeFigures(ranks)
	want := map[string]float64{metrics.ScoreMean: 4.0 / 6, "critic/score/max": 1, "critic/score/min": 0, "rollout/dropped": 3,
		"timing_s/gen": 5, "critic/advantages/mean": (0.2*10 - 0.3*30) / 40, actorGradNorm: 7, "data_source/a/score/mean": 0.25}
	if len(got) != len(want) {
		t.Errorf("merged %v, want %v", got, want)
	}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-12 {
			t.Errorf("%s: %v, want %v", k, got[k], w)
		}
	}
}

// TestTrainRanksMatchOneRank: a GRPO step of the default model on 2 ranks (goroutines over
// dist.NewLocal, each with its own task plugin process and model) trains as one rank does on
// the whole batch: each rank takes one prompt and its group, the update's loss and gradient
// norm are one rank's, the weights after the step one rank's (and the two ranks' the same
// bits), the merged metrics one rank's; rank 0 alone writes metrics.jsonl. An entropy
// bonus gives every weight a gradient whatever the advantages (a group of equal scores has
// none).
// The optimizer is whole on each rank here (fsdp_size=1); the other multi-rank runs shard it
// (ZeRO-1, the default).
func TestTrainRanksMatchOneRank(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model three times")
	}
	ranksMatchOneRank(t, 2, func(dir string) []string {
		return append(grpoRun(t, dir), "actor_rollout_ref.actor.entropy_coeff=0.01", "actor_rollout_ref.actor.fsdp_config.fsdp_size=1")
	}, nil)
}

// TestTrainFourRanksMatchOneRank is TestTrainRanksMatchOneRank on 4 ranks, a prompt each, over
// four GSM8K-like rows, with the optimizer sharded (ZeRO-1).
func TestTrainFourRanksMatchOneRank(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model on one rank and on four")
	}
	ranksMatchOneRank(t, 4, func(dir string) []string {
		return append(fourRowRun(t, dir), "actor_rollout_ref.actor.entropy_coeff=0.01")
	}, nil)
}

// fourRowRun is grpoRun over four GSM8K-like rows (gsmRows), a step's batch: a prompt a rank
// on 4 ranks.
func fourRowRun(t *testing.T, dir string) []string {
	t.Helper()
	pq := filepath.Join(t.TempDir(), "train4.parquet")
	if err := data.WriteParquet(pq, gsmRows()); err != nil {
		t.Fatal(err)
	}
	return append(grpoRun(t, dir), "data.train_files="+pq, "data.train_batch_size=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
		"actor_rollout_ref.rollout.max_num_seqs=8")
}

// gsmRows are four GSM8K-like rows.
func gsmRows() []data.Row {
	var rows []data.Row
	for i, q := range [][2]string{{"What is 2+3?", "5"}, {"Tom has 4 apples and eats 1. How many are left?", "3"},
		{"What is 6 times 7?", "42"}, {"A box holds 12 eggs. How many eggs are in 3 boxes?", "36"}} {
		rows = append(rows, data.Row{DataSource: "openai/gsm8k", Ability: "math", AgentName: "single_turn_agent",
			Prompt:      []data.Message{{Role: "user", Content: q[0] + " Give the answer as a number."}},
			RewardModel: data.RewardModel{Style: "rule", GroundTruth: q[1]},
			ExtraInfo:   map[string]any{"index": int64(i), "split": "train"}})
	}
	return rows
}

// TestTrainRanksMatchOneRankPPO is TestTrainRanksMatchOneRank for PPO with a critic (GAE,
// KL in the reward, the critic and the actor updated in the step): the critic's update and
// the batch's values, returns and explained variance (from sums over the ranks) are one
// rank's too.
func TestTrainRanksMatchOneRankPPO(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model with a critic three times")
	}
	ranksMatchOneRank(t, 2, func(dir string) []string {
		return append(gaeRun(t, dir), "trainer.total_training_steps=1", "trainer.critic_warmup=0", "trainer.save_freq=-1",
			"actor_rollout_ref.actor.entropy_coeff=0.01")
	}, []string{"critic/vf_loss", "critic/grad_norm", "critic/vf_explained_var", "critic/values/mean", "critic/returns/mean",
		"critic/returns/max", "actor/reward_kl_penalty", metrics.RewardMean})
}

// ranksMatchOneRank runs the overrides' one step on one rank and on n, and compares them.
func ranksMatchOneRank(t *testing.T, n int, run func(dir string) []string, extra []string) {
	t.Helper()
	dir1 := filepath.Join(t.TempDir(), "one")
	tr := startTrainer(t, run(dir1), Options{})
	init := append([]float32(nil), tr.actor.Params.Data...)
	if err := tr.Run(context.Background()); err != nil {
		tr.Close()
		t.Fatal(err)
	}
	one := append([]float32(nil), tr.actor.Params.Data...)
	tr.Close()
	want := loggedSteps(t, dir1, 1)[0].Values

	dir2 := filepath.Join(t.TempDir(), "two")
	params := runRanks(t, n, run(dir2))
	got := loggedSteps(t, dir2, 1)[0].Values
	moved := 0
	for i := range one {
		if one[i] != init[i] {
			moved++
		}
	}
	if moved < len(one)/2 {
		t.Fatalf("the step moved %d of %d weights", moved, len(one))
	}
	for r := 1; r < n; r++ {
		for i := range params[0] {
			if params[0][i] != params[r][i] {
				t.Fatalf("parameter %d: %g on rank 0, %g on rank %d", i, params[0][i], params[r][i], r)
			}
		}
	}
	// AdamW's first step moves a weight by about lr*sign(g): where g is within rounding of 0
	// the sums' other order may flip it; elsewhere the step is one rank's
	lr := loadConfig(t, run(dir1)).ActorRolloutRef.Actor.Optim.LR
	var off int
	for i := range one {
		if math.Abs(float64(params[0][i]-one[i])) > lr/2 {
			off++
		}
	}
	t.Logf("%d of %d weights more than lr/2 from one rank's; grad norm %v on %d ranks, %v on one", off, len(one), got[metrics.GradNorm], n, want[metrics.GradNorm])
	if want[metrics.GradNorm] == 0 {
		t.Fatal("the step had no gradient")
	}
	if off > len(one)/10000 {
		t.Errorf("%d of %d weights more than lr/2 (%g) from one rank's", off, len(one), lr/2)
	}
	for _, k := range append([]string{metrics.ScoreMean, "critic/score/max", "critic/score/min", metrics.ResponseLengthMean,
		metrics.PromptLengthMean, "critic/advantages/mean", metrics.PGLoss, metrics.GradNorm, metrics.Entropy,
		metrics.NumTurnsMean, "response_model_tokens/max", trainingGlobalStep}, extra...) {
		w, g := want[k], got[k]
		if _, ok := want[k]; !ok || math.IsNaN(g) || math.Abs(g-w) > 1e-4*math.Max(1, math.Abs(w)) {
			t.Errorf("%s: %v on %d ranks, %v on one", k, g, n, w)
		}
	}
}

// TestTrainRankFailures: a rank whose task plugin is gone fails its trajectories or rewards,
// and the job's failure budget (trainer.max_failed_fraction 0.25 of the job's 4, one step in a
// row) stops every rank alike, each naming the job's counts. A rank that never reaches a
// collective (a process killed) makes rank 0's next collective fail after the
// communicator's timeout, naming it, instead of waiting for it.
func TestTrainRankFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the default model on two ranks, twice")
	}
	for _, c := range []struct {
		name    string
		timeout time.Duration
		rank1   func(tr *Trainer) error // what rank 1 does once started
		want    []string                // in rank 0's error (and rank 1's, when it runs)
	}{
		{"plugin gone", time.Minute, func(tr *Trainer) error {
			tr.tasks.Close()
			return tr.Run(context.Background())
		}, []string{"of 4", "failed on 2 ranks", "not trained on"}},
		{"rank lost", 5 * time.Second, nil, []string{"never reached", "rank(s) 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			comms := dist.NewLocal(2, c.timeout)
			trs := make([]*Trainer, 2)
			for r := range trs {
				tr, err := New(context.Background(), loadConfig(t, append(grpoRun(t, dir),
					"trainer.max_failed_fraction=0.25", "trainer.max_consecutive_failed_steps=1")), Options{Comm: comms[r]})
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				defer tr.Close()
				trs[r] = tr
			}
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				if c.rank1 == nil {
					done <- nil
					return
				}
				done <- c.rank1(trs[1])
			}()
			err := trs[0].Run(context.Background())
			took := time.Since(start)
			err1 := <-done
			if err == nil {
				t.Fatal("rank 0 finished the run")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("rank 0: %v; want %q in it", err, w)
				}
				if c.rank1 != nil && (err1 == nil || !strings.Contains(err1.Error(), w)) {
					t.Errorf("rank 1: %v; want %q in it", err1, w)
				}
			}
			t.Logf("rank 0 stopped after %v: %v", took.Round(time.Millisecond), err)
			t.Logf("rank 1: %v", err1)
			if took > c.timeout+30*time.Second {
				t.Errorf("rank 0 took %v to stop (collectives' timeout %v)", took, c.timeout)
			}
		})
	}
}

// runRanks runs a trainer of overrides on each of n in-process ranks to its end and returns
// each rank's weights; a rank that fails fails the test.
func runRanks(t *testing.T, n int, overrides []string) [][]float32 {
	t.Helper()
	params, _ := runRanksOut(t, n, overrides)
	return params
}

// runRanksOut is runRanks that also returns what each rank printed (Options.Progress).
func runRanksOut(t *testing.T, n int, overrides []string) ([][]float32, []string) {
	t.Helper()
	debug.FreeOSMemory() // the models of the tests before: returned to the system
	comms := dist.NewLocal(n, 5*time.Minute)
	params := make([][]float32, n)
	out := make([]strings.Builder, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := New(context.Background(), loadConfig(t, overrides), Options{Comm: c, Progress: &out[r]})
			if err != nil {
				c.Abort(err)
				errs[r] = err
				return
			}
			defer tr.Close()
			if errs[r] = tr.Run(context.Background()); errs[r] == nil {
				params[r] = append([]float32(nil), tr.actor.Params.Data...)
			}
		}()
	}
	wg.Wait()
	printed := make([]string, n)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%d ranks: rank %d: %v", n, r, err)
		}
		printed[r] = out[r].String()
	}
	return params, printed
}

// TestTrainRanksValidate: validation (trainer.val_only, greedy, val_kwargs.n=2) on 2
// ranks runs each rank's share of the set, 2 of its 3 prompts on rank 0 and 1 on rank 1
// (its progress bar counts them), and merges the figures into the whole set's: the
// val-core score, the val-aux means and val/dropped of one rank's run of the whole set.
// Rank 0's trace store (the local backend) holds every rank's trajectories, the same
// samples and rewards as one rank's run. A one-prompt set on 2 ranks leaves rank 1 nothing
// to validate; it still takes part in the merge.
func TestTrainRanksValidate(t *testing.T) {
	if testing.Short() {
		t.Skip("validates the default model on one rank and on two")
	}
	pq := filepath.Join(t.TempDir(), "val3.parquet")
	if err := data.WriteParquet(pq, gsmRows()[:3]); err != nil {
		t.Fatal(err)
	}
	over := func(dir string) []string {
		o := append(grpoRun(t, dir), "data.val_files="+pq, "data.val_max_samples=3", "trainer.val_only=true",
			"actor_rollout_ref.rollout.val_kwargs.n=2") // greedy: a sampled token can differ with the decode batch's rounding
		// the local trace backend beside the task plugin grpoRun built
		if out, err := exec.Command("go", "build", "-o", filepath.Join(os.Getenv("RLHOST_PLUGIN_PATH"), "rlhost-trace-local"),
			"../../plugins/local/cmd/rlhost-trace-local").CombinedOutput(); err != nil {
			t.Fatalf("building the local trace plugin: %v\n%s", err, out)
		}
		return o
	}
	dir1 := filepath.Join(t.TempDir(), "one")
	_, one := runRanksOut(t, 1, over(dir1))
	dir2 := filepath.Join(t.TempDir(), "two")
	_, two := runRanksOut(t, 2, over(dir2))
	for r, want := range []string{"6/6 trajectories", "4/4 trajectories", "2/2 trajectories"} {
		got := append(one, two...)[r]
		if !strings.Contains(got, want) {
			t.Errorf("run %d's validation does not count %q:\n%s", r, want, got)
		}
	}
	w, g := loggedSteps(t, dir1, 1)[0].Values, loggedSteps(t, dir2, 1)[0].Values
	for _, k := range []string{metrics.ValRewardKey("openai/gsm8k"), "val-aux/response_length/mean", "val-aux/num_turns/mean",
		"val-aux/tool_calls/mean", "val/dropped"} {
		if _, ok := w[k]; !ok || math.Abs(g[k]-w[k]) > 1e-9*math.Max(1, math.Abs(w[k])) {
			t.Errorf("%s: %v on 2 ranks, %v on one", k, g[k], w[k])
		}
	}
	t.Logf("validation on 2 ranks: score %v, response length %v (one rank: %v, %v)", g[metrics.ValRewardKey("openai/gsm8k")],
		g["val-aux/response_length/mean"], w[metrics.ValRewardKey("openai/gsm8k")], w["val-aux/response_length/mean"])
	var traced [2][]string
	for i, dir := range []string{dir1, dir2} {
		st, err := local.OpenRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		list, err := st.List(context.Background(), local.Filter{})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range list {
			traced[i] = append(traced[i], fmt.Sprintf("sample %d rollout %d validate %v reward %.4f tokens %d", tr.SampleIndex, tr.RolloutN,
				tr.Validate, tr.Reward, tr.ResponseTokens))
		}
		slices.Sort(traced[i])
	}
	if len(traced[0]) != 6 || !slices.Equal(traced[0], traced[1]) {
		t.Errorf("traced on one rank:\n%s\non 2 ranks:\n%s", strings.Join(traced[0], "\n"), strings.Join(traced[1], "\n"))
	}

	// a set smaller than the job: rank 1 validates nothing and still takes part
	pq1 := filepath.Join(t.TempDir(), "val1.parquet")
	if err := data.WriteParquet(pq1, gsmRows()[:1]); err != nil {
		t.Fatal(err)
	}
	dir3 := filepath.Join(t.TempDir(), "small")
	_, small := runRanksOut(t, 2, append(over(dir3), "data.val_files="+pq1))
	if !strings.Contains(small[0], "2/2 trajectories") || !strings.Contains(small[1], "validate (step 0) 0 trajectories") {
		t.Errorf("one prompt on 2 ranks: rank 0 printed\n%s\nrank 1\n%s", small[0], small[1])
	}
	s := loggedSteps(t, dir3, 1)[0].Values
	if got, want := s[metrics.ValRewardKey("openai/gsm8k")], w[metrics.ValRewardKey("openai/gsm8k")]; math.IsNaN(got) || s["val/dropped"] != 0 {
		t.Errorf("one prompt on 2 ranks: score %v (3 prompts: %v), val/dropped %v", got, want, s["val/dropped"])
	}
}

// TestTrainResumeAtAnotherWorldSize: rank 0's checkpoint of a 4-rank run with the optimizer
// sharded (ZeRO-1) holds the whole state (weights, AdamW's moments gathered from the four
// shards, its step, the sampler's place), so the run resumes from it on 2 ranks (each
// reading its shard of the moments) and on 1 alike: their next step has the same gradient
// norm to 8 digits, their weights after it are within lr/2 of each other (AdamW's
// sign-like first moves, see TestTrainRanksMatchOneRank), their moments after it (the 2
// ranks' gathered again) agree, and the step drew the same batch.
func TestTrainResumeAtAnotherWorldSize(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model on 4 ranks, then resumes it on 2 and 1")
	}
	base := filepath.Join(t.TempDir(), "run")
	over := func(dir string, steps int) []string {
		return append(fourRowRun(t, dir), "actor_rollout_ref.actor.entropy_coeff=0.01", "trainer.save_freq=1",
			fmt.Sprintf("trainer.total_training_steps=%d", steps))
	}
	runRanks(t, 4, over(base, 1))
	var params, moments [2][]float32
	var steps [2]map[string]float64
	for i, n := range []int{2, 1} {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("resumed-%d", n))
		if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		params[i] = runRanks(t, n, over(dir, 2))[0]
		logged := loggedSteps(t, dir, 2)
		steps[i] = logged[1].Values
		b, err := os.ReadFile(filepath.Join(dir, "checkpoints", "global_step_2", "optimizer.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 8*len(params[i]) {
			t.Fatalf("optimizer.bin of %d bytes resumed on %d, want the moments of %d parameters", len(b), n, len(params[i]))
		}
		moments[i] = make([]float32, len(b)/4)
		for j := range moments[i] {
			moments[i][j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
		}
	}
	g2, g1 := steps[0][metrics.GradNorm], steps[1][metrics.GradNorm]
	if g1 == 0 || math.Abs(g2-g1) > 1e-7*g1 {
		t.Errorf("step 2's gradient norm: %v resumed on 2 ranks, %v on 1", g2, g1)
	}
	for _, k := range []string{trainingEpoch, metrics.PromptLengthMean, metrics.ResponseLengthMean, metrics.ScoreMean} {
		if math.Abs(steps[0][k]-steps[1][k]) > 1e-6*math.Max(1, math.Abs(steps[1][k])) {
			t.Errorf("step 2's %s: %v resumed on 2 ranks, %v on 1", k, steps[0][k], steps[1][k])
		}
	}
	lr := loadConfig(t, over(base, 2)).ActorRolloutRef.Actor.Optim.LR
	off := 0
	for i := range params[0] {
		if math.Abs(float64(params[0][i]-params[1][i])) > lr/2 {
			off++
		}
	}
	t.Logf("step 2: gradient norm %v on 2 ranks, %v on 1; %d weights more than lr/2 apart", g2, g1, off)
	if off > len(params[0])/10000 {
		t.Errorf("%d of %d weights more than lr/2 apart after resuming on 2 and 1 ranks", off, len(params[0]))
	}
	// the moments: m and v each within 1e-4 of the largest (the sums' order differs)
	n := len(params[0])
	for i, name := range []string{"first", "second"} {
		a, b := moments[0][i*n:(i+1)*n], moments[1][i*n:(i+1)*n]
		var worst, scale float64
		for j := range a {
			worst = max(worst, math.Abs(float64(a[j]-b[j])))
			scale = max(scale, math.Abs(float64(b[j])))
		}
		t.Logf("AdamW %s moments after step 2: largest %.3g, 2 ranks and 1 at most %.3g apart", name, scale, worst)
		if scale == 0 || !(worst <= 1e-4*scale) {
			t.Errorf("AdamW %s moments after step 2: resumed on 2 ranks and on 1 up to %.3g apart (largest %.3g)", name, worst, scale)
		}
	}
}
