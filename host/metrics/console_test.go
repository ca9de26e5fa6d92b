package metrics

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		name string
		step Step
		want string
	}{
		{"empty", Step{Step: 3}, "step 3"},
		{"typical", Step{Step: 12, Values: map[string]float64{
			ScoreMean: 0.4375, PGLoss: -0.0123, PPOKL: 0.0003, ResponseLengthMean: 212.46, ResponseClipRatio: 0.03125,
			Throughput: 41.23, TimingStep: 83.14, TimingGen: 50, NumTurnsMean: 2.5, ToolCallsMean: 1.25,
			ValRewardKey("openai/gsm8k"): 0.51, "actor/lr": 1e-6,
		}}, "step 12 | score 0.4375 | val openai/gsm8k 0.51 | pg_loss -0.0123 | kl 0.0003 | resp_len 212.5 | clipped 3% | num_turns 2.50 | tool_calls 1.25 | tok/s 41.2 | gen 50.0s | step_time 83.1s"},
		{"non-finite", Step{Step: 1, Values: map[string]float64{GradNorm: math.NaN(), PGLoss: math.Inf(1), TimingStep: math.Inf(-1)}},
			"step 1 | pg_loss +Inf | grad_norm NaN | step_time -Inf"},
		{"two val sources, sorted", Step{Step: 2, Values: map[string]float64{ValRewardKey("b"): 1, ValRewardKey("a"): 0, RewardMean: 0.5}},
			"step 2 | reward 0.5 | val a 0 | val b 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Summary(tc.step); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestConsole(t *testing.T) {
	var buf bytes.Buffer
	c := NewConsole(&buf)
	c.Log(Step{Step: 1, Values: map[string]float64{ScoreMean: 0.5, "actor/lr": 1e-6}})
	if got := buf.String(); got != "step 1 | score 0.5\n" {
		t.Errorf("summary: %q", got)
	}
	buf.Reset()
	full := NewConsoleFull(&buf)
	full.Log(Step{Step: 2, Values: map[string]float64{ScoreMean: 0.5, "actor/lr": 1e-6}})
	want := "step 2 | score 0.5\n  actor/lr           1e-06\n  critic/score/mean  0.5\n"
	if got := buf.String(); got != want {
		t.Errorf("full dump:\n%q\nwant\n%q", got, want)
	}
	buf.Reset()
	Fail(full, errors.New("out of memory"))
	full.Close()
	if got := buf.String(); got != "run failed: out of memory\n" {
		t.Errorf("close after Fail: %q", got)
	}
}

type recordLogger struct {
	steps  []int
	err    error
	closed int
	failed error
	id     string
}

func (r *recordLogger) Log(s Step) error { r.steps = append(r.steps, s.Step); return r.err }
func (r *recordLogger) Close() error     { r.closed++; return r.err }
func (r *recordLogger) Fail(err error)   { r.failed = err }
func (r *recordLogger) RunID() string    { return r.id }

func TestMulti(t *testing.T) {
	a, b, c := &recordLogger{}, &recordLogger{err: errors.New("disk full")}, &recordLogger{id: "run-1"}
	m := Multi(a, nil, Multi(b, c))
	if err := m.Log(Step{Step: 5}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Log: %v", err)
	}
	if len(a.steps) != 1 || len(b.steps) != 1 || len(c.steps) != 1 {
		t.Errorf("not every logger got the step: %v %v %v", a.steps, b.steps, c.steps)
	}
	if got := RunID(m); got != "run-1" {
		t.Errorf("RunID = %q", got)
	}
	if got := RunID(NewConsole(&bytes.Buffer{})); got != "" {
		t.Errorf("RunID of a console = %q", got)
	}
	Fail(m, nil)
	if a.failed == nil || c.failed == nil {
		t.Error("Fail did not reach the loggers inside Multi")
	}
	if err := m.Close(); err == nil || a.closed != 1 || c.closed != 1 {
		t.Errorf("Close: %v, closed %d %d", err, a.closed, c.closed)
	}
}
