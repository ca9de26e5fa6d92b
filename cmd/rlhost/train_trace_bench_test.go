package main

import (
	"database/sql"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/plugins/local"
	"github.com/urfave/cli/v2"
)

// BenchmarkTrainStepTracing measures what tracing every trajectory costs a real training step:
// `rlhost train` on GSM8K with the default model, the same seed and config, once with tracing
// off (backend none) and once with the local backend tracing every sample with token2text, in
// pairs (b.N pairs, ABBA order so that drifts of the machine's load cancel). The rollouts are
// the same token for token (the seed decides them, not tracing), so the runs do the same
// work; the difference in timing_s/step is tracing's.
//
// Reported: step-s-off and step-s-on (median step time), overhead-% (mean paired difference
// over the mean untraced step), noise-% (the standard error of that overhead: the paired
// differences' standard deviation / sqrt(pairs x steps) / mean step), median-overhead-% (the
// median of the paired relative differences: one step stalled by another job on a shared
// machine moves the mean, not the median), cpu-s-off and cpu-s-on
// (CPU of the whole run: host and plugin processes), B/traj (bytes of traces.db and its WAL
// per trajectory), diverged-pairs (pairs whose rollouts differed: should be 0). The first
// step of each run (warm-up) is left out.
//
//	go test -run '^$' -bench TrainStepTracing -benchtime 5x ./cmd/rlhost
//
// Go runs a benchmark once with b.N = 1 before the b.N asked for, so -benchtime 5x runs 1 + 5
// pairs and reports the last 5.
//
// RLHOST_BENCH_STEPS (default 3), RLHOST_BENCH_BATCH (2), RLHOST_BENCH_N (2) and
// RLHOST_BENCH_RESPONSE (32 tokens) set the run: small, so that pairs fit in minutes, and
// pessimistic for the ratio (tracing's cost per trajectory barely depends on its length,
// compute grows with it).
func BenchmarkTrainStepTracing(b *testing.B) {
	model := os.Getenv("RLHOST_MODEL")
	if model == "" {
		model, _ = filepath.Abs(filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
	}
	if _, err := os.Stat(model); err != nil {
		b.Skipf("the default model is missing at %s: run `make model`", model)
	}
	in := filepath.Join("..", "..", "..", "shared", "data", "gsm8k")
	if _, err := os.Stat(filepath.Join(in, "test.jsonl")); err != nil {
		b.Skipf("GSM8K not found at %s", in)
	}
	data := filepath.Join(b.TempDir(), "data")
	if _, err := runApp("preprocess", "--task", "gsm8k", "--input", in, "--output-dir", data); err != nil {
		b.Fatal(err)
	}
	steps, batch, n, resp := envInt("RLHOST_BENCH_STEPS", 3), envInt("RLHOST_BENCH_BATCH", 2), envInt("RLHOST_BENCH_N", 2), envInt("RLHOST_BENCH_RESPONSE", 32)
	if steps < 2 {
		b.Fatal("RLHOST_BENCH_STEPS: at least 2 (the first step is a warm-up)")
	}
	base := []string{"train", "--task", "gsm8k",
		"data.train_files=" + filepath.Join(data, "test.parquet"), "data.val_files=[]",
		fmt.Sprint("data.train_batch_size=", batch), fmt.Sprint("actor_rollout_ref.rollout.n=", n),
		fmt.Sprint("data.max_response_length=", resp), fmt.Sprint("actor_rollout_ref.actor.ppo_mini_batch_size=", batch),
		fmt.Sprint("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=", batch),
		fmt.Sprint("actor_rollout_ref.rollout.max_num_seqs=", batch*n),
		fmt.Sprint("trainer.total_training_steps=", steps), "trainer.val_before_train=false", "trainer.test_freq=-1",
		"trainer.save_freq=-1", "trainer.logger=[jsonl]", "trainer.seed=7", "actor_rollout_ref.model.path=" + model}
	modes := []struct {
		name string
		args []string
	}{
		{"off", []string{"actor_rollout_ref.rollout.trace.backend=none"}},
		{"on", []string{"actor_rollout_ref.rollout.trace.backend=local", "actor_rollout_ref.rollout.trace.max_samples_per_step=null",
			"actor_rollout_ref.rollout.trace.token2text=true"}},
	}
	var stepOff, stepOn, diffs, rel, cpuOff, cpuOn []float64
	var bytes, trajs int64
	diverged := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		var times [2][]float64
		var respLen [2][]float64
		for _, m := range order {
			dir := filepath.Join(b.TempDir(), modes[m].name)
			cpu0 := cpuSeconds()
			if out, err := runApp(append(append(slices.Clone(base), "trainer.run_dir="+dir), modes[m].args...)...); err != nil {
				b.Fatalf("train (tracing %s): %v\n%s", modes[m].name, err, out)
			}
			cpu := cpuSeconds() - cpu0
			ms, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
			if err != nil || len(ms) != steps {
				b.Fatalf("tracing %s: %d steps logged, %v", modes[m].name, len(ms), err)
			}
			for _, s := range ms[1:] {
				times[m] = append(times[m], s.Values[metrics.TimingStep])
				respLen[m] = append(respLen[m], s.Values["response_length/mean"])
			}
			if m == 0 {
				cpuOff = append(cpuOff, cpu)
				if _, err := os.Stat(filepath.Join(dir, "traces", "traces.db")); err == nil {
					b.Fatal("tracing off wrote traces.db")
				}
				continue
			}
			cpuOn = append(cpuOn, cpu)
			if v := ms[len(ms)-1].Values; v["tracing/dropped"] != 0 || v["tracing/spooled"] != 0 {
				b.Fatalf("tracing on: dropped %v, spooled %v", v["tracing/dropped"], v["tracing/spooled"])
			}
			nb, nt := traceBytes(b, dir)
			if want := int64(steps * batch * n); nt != want {
				b.Fatalf("tracing on: %d trajectories stored; want %d", nt, want)
			}
			bytes, trajs = bytes+nb, trajs+nt
		}
		if !slices.Equal(respLen[0], respLen[1]) { // the same seed should make the same rollouts
			diverged++
			b.Logf("pair %d: the traced and untraced runs generated differently (response lengths %v and %v)", i, respLen[1], respLen[0])
		}
		stepOff, stepOn = append(stepOff, times[0]...), append(stepOn, times[1]...)
		for k := range times[0] {
			diffs = append(diffs, times[1][k]-times[0][k])
			rel = append(rel, (times[1][k]-times[0][k])/times[0][k])
		}
	}
	b.StopTimer()
	meanOff := mean(stepOff)
	b.ReportMetric(median(stepOff), "step-s-off")
	b.ReportMetric(median(stepOn), "step-s-on")
	b.ReportMetric(100*mean(diffs)/meanOff, "overhead-%")
	b.ReportMetric(100*stddev(diffs)/math.Sqrt(float64(len(diffs)))/meanOff, "noise-%")
	b.ReportMetric(100*median(rel), "median-overhead-%")
	b.ReportMetric(mean(cpuOff), "cpu-s-off")
	b.ReportMetric(mean(cpuOn), "cpu-s-on")
	b.ReportMetric(float64(bytes)/float64(trajs), "B/traj")
	b.ReportMetric(float64(diverged), "diverged-pairs")
	b.ReportMetric(0, "ns/op")
	b.Logf("steps (s), untraced: %.3f", stepOff)
	b.Logf("steps (s), traced:   %.3f", stepOn)
}

// runApp runs the CLI in-process; its console output is returned for errors.
func runApp(args ...string) (string, error) {
	var out syncBuffer
	a := app()
	a.Writer, a.ErrWriter = &out, &out
	a.ExitErrHandler = func(*cli.Context, error) {}
	err := a.Run(append([]string{"rlhost"}, args...))
	s := out.String()
	return s[max(0, len(s)-4000):], err
}

// traceBytes returns the bytes of a run's trace store (database and WAL) and its trajectories.
func traceBytes(b *testing.B, dir string) (int64, int64) {
	var size int64
	for _, suffix := range []string{"", "-wal"} {
		if st, err := os.Stat(filepath.Join(dir, "traces", "traces.db"+suffix)); err == nil {
			size += st.Size()
		}
	}
	s, err := local.OpenRun(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n sql.NullInt64
	if err := s.DB().QueryRow(`SELECT count(*) FROM trajectories`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return size, n.Int64
}

// cpuSeconds is the CPU time of this process and of its children that ended (the plugins).
func cpuSeconds() float64 {
	var total float64
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		}
	}
	return total
}

func envInt(name string, def int) int {
	var v int
	if s := strings.TrimSpace(os.Getenv(name)); s != "" {
		if _, err := fmt.Sscan(s, &v); err == nil && v > 0 {
			return v
		}
	}
	return def
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	if len(y)%2 == 1 {
		return y[len(y)/2]
	}
	return (y[len(y)/2-1] + y[len(y)/2]) / 2
}

func stddev(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	m, s := mean(x), 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return math.Sqrt(s / float64(len(x)-1))
}
