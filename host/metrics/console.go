package metrics

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
)

// Console writes one line per step with the numbers a person watches during training
// (see [Summary]); with full set, the line is followed by every metric, one per line.
type Console struct {
	mu     sync.Mutex
	w      io.Writer
	full   bool
	failed error
}

// NewConsole returns a console logger that prints the one-line [Summary] of each step.
func NewConsole(w io.Writer) Logger { return &Console{w: w} }

// NewConsoleFull returns a console logger that prints the summary line and then every
// metric of the step, sorted by name.
func NewConsoleFull(w io.Writer) Logger { return &Console{w: w, full: true} }

// Log writes the step in one Write call, so lines of concurrent writers do not interleave.
func (c *Console) Log(s Step) error {
	text := Summary(s) + "\n"
	if c.full {
		text += Dump(s)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.w, text); err != nil {
		return fmt.Errorf("metrics: console: %w", err)
	}
	return nil
}

// Fail records the cause, printed by Close.
func (c *Console) Fail(cause error) {
	c.mu.Lock()
	c.failed = cause
	c.mu.Unlock()
}

// Close prints "run failed: cause" when [Fail] was called; it does not close w.
func (c *Console) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		if _, err := fmt.Fprintf(c.w, "run failed: %v\n", c.failed); err != nil {
			return fmt.Errorf("metrics: console: %w", err)
		}
	}
	return nil
}

// summaryField is one entry of the summary line: the label printed and how a value shows.
type summaryField struct {
	key, label string
	format     func(float64) string
}

func plain(v float64) string { return formatValue(v) }

func seconds(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return formatValue(v)
	}
	return fmt.Sprintf("%.1fs", v)
}

var summaryFields = []summaryField{
	{ScoreMean, "score", plain},
	{RewardMean, "reward", plain},
	{PGLoss, "pg_loss", plain},
	{PPOKL, "kl", plain},
	{Entropy, "entropy", plain},
	{GradNorm, "grad_norm", plain},
	{ResponseLengthMean, "resp_len", func(v float64) string { return fmt.Sprintf("%.1f", v) }},
	{ResponseClipRatio, "clipped", func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }},
	{NumTurnsMean, "num_turns", func(v float64) string { return fmt.Sprintf("%.2f", v) }},
	{ToolCallsMean, "tool_calls", func(v float64) string { return fmt.Sprintf("%.2f", v) }},
	{Throughput, "tok/s", func(v float64) string { return fmt.Sprintf("%.1f", v) }},
	{TimingGen, "gen", seconds},
	{TimingStep, "step_time", seconds},
}

// Summary is the one-line summary of a step: the step number, the train score and reward,
// validation rewards per data source, losses, response length, turns and tool calls,
// throughput and times, each shown only when present. For example:
//
//	step 12 | score 0.4375 | val openai/gsm8k 0.51 | pg_loss -0.0123 | kl 0.0003 | resp_len 212.5 | clipped 3% | tok/s 41.2 | step_time 83.1s
func Summary(s Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d", s.Step)
	add := func(label, value string) { fmt.Fprintf(&b, " | %s %s", label, value) }
	for i, f := range summaryFields {
		if v, ok := s.Values[f.key]; ok {
			add(f.label, f.format(v))
		}
		if i == 1 { // validation right after the train score
			for _, k := range s.Keys() {
				if ds, ok := valDataSource(k); ok {
					add("val "+ds, formatValue(s.Values[k]))
				}
			}
		}
	}
	return b.String()
}

// valDataSource reports the data source of a "val-core/<ds>/reward/mean@1" key.
func valDataSource(key string) (string, bool) {
	ds, ok := strings.CutPrefix(key, "val-core/")
	if !ok {
		return "", false
	}
	ds, ok = strings.CutSuffix(ds, "/reward/mean@1")
	return ds, ok && ds != ""
}

// Dump lists every metric of s, sorted by name, one "  name  value" line each.
func Dump(s Step) string {
	keys := s.Keys()
	width := 0
	for _, k := range keys {
		width = max(width, len(k))
	}
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, k, formatValue(s.Values[k]))
	}
	return b.String()
}
