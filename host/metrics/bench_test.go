package metrics

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchStep is a step the size of a veRL GRPO step's metrics (about 60 values).
func benchStep(step int) Step {
	v := make(map[string]float64, 60)
	for _, k := range []string{ScoreMean, RewardMean, PGLoss, PPOKL, Entropy, GradNorm, ResponseLengthMean,
		ResponseLengthMax, ResponseLengthMin, ResponseClipRatio, PromptLengthMean, Throughput, TimingGen,
		TimingOldLogProb, TimingRef, TimingUpdateActor, TimingStep, NumTurnsMean, ToolCallsMean} {
		v[k] = math.Sin(float64(step + len(k)))
	}
	for i := len(v); i < 60; i++ {
		v[fmt.Sprintf("extra/metric_%02d/mean", i)] = float64(step*i) / 7
	}
	return Step{Step: step, Time: time.Unix(1700000000+int64(step), 0), Values: v}
}

// BenchmarkJSONLLog: one step appended and fsync'd.
func BenchmarkJSONLLog(b *testing.B) {
	l, err := NewJSONL(filepath.Join(b.TempDir(), "metrics.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.Log(benchStep(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMLflowRun: a run of 20 steps of 60 metrics against the real server, from
// NewMLflow to Close (everything delivered). RLHOST_MLFLOW_URI names a running server;
// otherwise one is started.
func BenchmarkMLflowRun(b *testing.B) {
	uri := mlflowURIForBench(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := NewMLflow(context.Background(), MLflowConfig{TrackingURI: uri, Experiment: "rlhost-bench", RunName: fmt.Sprint("go-", i)})
		if err != nil {
			b.Fatal(err)
		}
		for step := 1; step <= 20; step++ {
			l.Log(benchStep(step))
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*20*60)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkMLflowLog: what the training loop pays per step (queueing only).
func BenchmarkMLflowLog(b *testing.B) {
	uri := mlflowURIForBench(b)
	l, err := NewMLflow(context.Background(), MLflowConfig{TrackingURI: uri, Experiment: "rlhost-bench", RunName: "go-log", QueueSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	steps := make([]Step, b.N)
	for i := range steps {
		steps[i] = benchStep(i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.Log(steps[i])
	}
	b.StopTimer()
	l.Close()
}

// BenchmarkPlot: the three-panel figure of a 200-step run.
func BenchmarkPlot(b *testing.B) {
	var steps []Step
	for i := 1; i <= 200; i++ {
		s := benchStep(i)
		s.Values[ScoreMean] = 0.1 + 0.6*(1-math.Exp(-float64(i)/50))
		if i%10 == 0 {
			s.Values[ValRewardKey("openai/gsm8k")] = 0.1 + 0.003*float64(i)
			s.Values["val-core/openai/gsm8k/acc/mean@1"] = 0.1 + 0.003*float64(i)
		}
		steps = append(steps, s)
	}
	out := filepath.Join(b.TempDir(), "curves.png")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Plot(steps, out); err != nil {
			b.Fatal(err)
		}
	}
}

func mlflowURIForBench(b *testing.B) string {
	if uri := os.Getenv("RLHOST_MLFLOW_URI"); uri != "" {
		return uri
	}
	return realMLflow(b).URI
}
