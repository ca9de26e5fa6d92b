package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/host/sft"
	"github.com/rlhost/rlhost/plugins/local"
	"github.com/rlhost/rlhost/sdk/task"
	"github.com/urfave/cli/v2"
)

func init() { extraCommands = append(extraCommands, sftCommand()) }

func sftCommand() *cli.Command {
	return &cli.Command{
		Name:      "sft",
		Usage:     "supervised fine-tuning on conversations (veRL SFT parquet) or on a run's rewarded trajectories",
		ArgsUsage: "[key=value ...]",
		Description: "Configuration: the defaults, then each --config YAML file, then the key=value overrides, with\n" +
			"the keys of veRL's SFT trainer (data.train_files=... optim.lr=1e-5 trainer.total_epochs=2 ...). See docs/sft.md.\n\n" +
			"With --from-traces RUN_DIR the training data are the trajectories of an earlier rlhost train run\n" +
			"(its local trace store) whose reward is at least --min-reward, with the exact token ids the run\n" +
			"sampled and its tool turns: written to RUN/data/traces.parquet, then trained on (RFT, STaR).",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "config", Aliases: []string{"c"}, Usage: "YAML config file (repeatable; later files win)"},
			&cli.BoolFlag{Name: "print-config", Usage: "print the resolved config and exit"},
			&cli.StringFlag{Name: "from-traces", Usage: "train on the trajectories of this rlhost train run directory (or its traces/traces.db)"},
			&cli.Float64Flag{Name: "min-reward", Value: math.Inf(-1), Usage: "with --from-traces: keep trajectories whose reward is at least this"},
			&cli.BoolFlag{Name: "include-validation", Usage: "with --from-traces: keep validation trajectories too"},
			&cli.BoolFlag{Name: "data-only", Usage: "with --from-traces: write the data and stop"},
		},
		Subcommands: []*cli.Command{sftCompareCommand()},
		Action: func(c *cli.Context) error {
			cfg, err := sft.Load(c.StringSlice("config"), c.Args().Slice())
			if err != nil {
				return err
			}
			if src := c.String("from-traces"); src != "" {
				out := filepath.Join(cfg.RunDir(), "data", "traces.parquet")
				n, st, err := tracesToSFT(c.Context, src, out, c.Float64("min-reward"), c.Bool("include-validation"))
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.ErrWriter, "from traces: %s: %d trajectories written to %s (%s)\n", src, n, out, st)
				if c.Bool("data-only") {
					return nil
				}
				cfg.Data.TrainFiles = sft.StringList{out}
			} else if c.Bool("data-only") {
				return cli.Exit("sft: --data-only goes with --from-traces", 2)
			}
			if c.Bool("print-config") {
				return yamlOut(c, cfg)
			}
			if err := cpu.SelfCheck(); err != nil {
				return fmt.Errorf("the BLAS library computes wrong results on this CPU (%v); set OPENBLAS_CORETYPE to a kernel it supports", err)
			}
			log := logger(c)
			tr, err := sft.New(c.Context, cfg, sft.Options{Log: log, Progress: c.App.ErrWriter})
			if err != nil {
				return err
			}
			defer tr.Close()
			fmt.Fprintf(c.App.ErrWriter, "run directory: %s (%d steps)\n", tr.RunDir(), tr.TotalSteps())
			if err := tr.Run(c.Context); err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "done: metrics %s/metrics.jsonl, curves %s/curves.png, model %s (rlhost train actor_rollout_ref.model.path=%s)\n",
				tr.RunDir(), tr.RunDir(), tr.LastCheckpoint, tr.LastCheckpoint)
			return nil
		},
	}
}

func yamlOut(c *cli.Context, cfg *sft.Config) error {
	f, err := os.CreateTemp("", "sft-config-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	f.Close()
	if err := cfg.WriteYAML(f.Name()); err != nil {
		return err
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	_, err = c.App.Writer.Write(b)
	return err
}

// traceStats counts the trajectories read from a trace store and why some were left out.
type traceStats struct {
	seen, failed, badLayout, duplicate int
}

func (s traceStats) String() string {
	return fmt.Sprintf("%d matched the filters; left out: %d failed, %d not laid out as one sequence, %d duplicates",
		s.seen, s.failed, s.badLayout, s.duplicate)
}

// tracesToSFT writes the trajectories of a run's trace store with reward >= minReward as
// token rows (input_ids, loss_mask, and the trajectory's identity) to out.
func tracesToSFT(ctx context.Context, src, out string, minReward float64, withVal bool) (int, traceStats, error) {
	var st traceStats
	store, err := local.OpenRun(src)
	if err != nil {
		return 0, st, err
	}
	defer store.Close()
	flt := local.Filter{Limit: 500}
	if !math.IsInf(minReward, -1) {
		flt.RewardMin = &minReward
	}
	if !withVal {
		f := false
		flt.Validate = &f
	}
	var rows []map[string]any
	seen := map[uint64]bool{}
	for flt.Offset = 0; ; flt.Offset += flt.Limit {
		list, err := store.List(ctx, flt)
		if err != nil {
			return 0, st, err
		}
		for _, t := range list {
			st.seen++
			if t.Error != "" {
				st.failed++
				continue
			}
			spans, err := store.Spans(ctx, t.TraceID)
			if err != nil {
				return 0, st, err
			}
			tk, err := local.TrajectoryTokens(spans)
			if errors.Is(err, local.ErrNotOneSequence) {
				st.badLayout++
				continue
			}
			if err != nil {
				return 0, st, fmt.Errorf("sft: --from-traces %s: trajectory %s: %w", src, t.TraceID, err)
			}
			ex := tokensExample(tk)
			h := fnv.New64a()
			for i, id := range ex.IDs {
				fmt.Fprintf(h, "%d/%v,", id, ex.Mask[i])
			}
			if seen[h.Sum64()] {
				st.duplicate++
				continue
			}
			seen[h.Sum64()] = true
			rows = append(rows, sft.TokenRow(ex, map[string]any{"trace_id": t.TraceID, "step": t.Step, "sample_index": t.SampleIndex,
				"rollout_n": t.RolloutN, "reward": t.Reward, "validate": t.Validate, "data_source": t.DataSource}))
		}
		if len(list) < flt.Limit {
			break
		}
	}
	if len(rows) == 0 {
		return 0, st, fmt.Errorf("sft: --from-traces %s: no trajectory to train on (%s)", src, st)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return 0, st, err
	}
	cols := []string{sft.ColInputIDs, sft.ColLossMask, "trace_id", "step", "sample_index", "rollout_n", "reward", "validate", "data_source"}
	if err := data.WriteTable(out, cols, rows); err != nil {
		return 0, st, err
	}
	return len(rows), st, nil
}

// tokensExample is a trajectory's token ids as an SFT example: the loss on the model's tokens.
func tokensExample(tk *local.Tokens) *sft.Example {
	ex := &sft.Example{}
	for _, id := range tk.PromptIDs {
		ex.IDs, ex.Mask = append(ex.IDs, int32(id)), append(ex.Mask, false)
	}
	for i, id := range tk.ResponseIDs {
		ex.IDs, ex.Mask = append(ex.IDs, int32(id)), append(ex.Mask, tk.ResponseMask[i] == 1)
	}
	return ex
}

// sftMessagesKey is the extra_info key under which a preprocessor gives a row's cold-start
// trajectory (the messages after the prompt); preprocess moves it into sft/SPLIT.parquet.
const sftMessagesKey = "sft_messages"

// takeSFTRow removes extra_info.sft_messages from a preprocessed row and returns the SFT row
// it gives (messages: the prompt and them; tools: the task's tool schemas as a JSON string),
// or nil when the row has none.
func takeSFTRow(r *task.Row, tools string) map[string]any {
	v, ok := r.ExtraInfo[sftMessagesKey]
	if !ok {
		return nil
	}
	delete(r.ExtraInfo, sftMessagesKey)
	cont, ok := v.([]any)
	if !ok || len(cont) == 0 {
		return nil
	}
	msgs := make([]any, 0, len(r.Prompt)+len(cont))
	for _, m := range r.Prompt {
		msgs = append(msgs, map[string]any{"role": m.Role, "content": m.Content})
	}
	row := map[string]any{"messages": append(msgs, cont...), "data_source": r.DataSource}
	if tools != "" {
		row["tools"] = tools
	}
	return row
}

// toolsJSON is the task's tools as the JSON list of OpenAI schemas ("" for none).
func toolsJSON(info task.Info) string {
	if len(info.Tools) == 0 {
		return ""
	}
	ts := make([]json.RawMessage, len(info.Tools))
	for i, t := range info.Tools {
		ts[i] = t.OpenAI()
	}
	b, _ := json.Marshal(ts)
	return string(b)
}

// sftDir is the folder of OUT where preprocess writes the cold-start rows: a folder of its
// own, as veRL keeps its SFT parquet files apart from its RL ones, so that a glob of the RL
// files (OUT/*.parquet) never takes a file of the other schema.
const sftDir = "sft"

// writeSFTSplit writes the cold-start rows of a split (nil entries are rows without one) to
// OUT/sft/SPLIT.parquet.
func writeSFTSplit(outDir, split string, rows []map[string]any, progressOut io.Writer) error {
	var out []map[string]any
	for _, r := range rows {
		if r != nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil
	}
	dst := filepath.Join(outDir, sftDir, split+".parquet")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	if err := data.WriteTable(dst, []string{"data_source", "messages", "tools"}, out); err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	fmt.Fprintf(progressOut, "%s: %d cold-start conversations -> %s (rlhost sft data.train_files=%s)\n", split, len(out), dst, dst)
	return nil
}

func sftCompareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "one figure of several rlhost train runs: validation reward, tool use under validation, tool calls in training",
		ArgsUsage: "LABEL=RUN_DIR ...",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "out", Value: "compare.png", Usage: "the PNG to write"}},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("sft compare: give LABEL=RUN_DIR arguments", 2)
			}
			var reward, frac, calls []metrics.Series
			for _, arg := range c.Args().Slice() {
				label, dir, ok := strings.Cut(arg, "=")
				if !ok {
					return cli.Exit(fmt.Sprintf("sft compare: %q: want LABEL=RUN_DIR", arg), 2)
				}
				steps, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
				if err != nil && !errors.Is(err, metrics.ErrTornLine) {
					return err
				}
				col := func(match func(string) bool) (xs, ys []float64) {
					for _, s := range steps {
						for k, v := range s.Values {
							if match(k) {
								xs, ys = append(xs, float64(s.Step)), append(ys, v)
								break
							}
						}
					}
					return xs, ys
				}
				is := func(key string) func(string) bool { return func(k string) bool { return k == key } }
				rx, ry := col(func(k string) bool {
					return strings.HasPrefix(k, "val-core/") && strings.HasSuffix(k, "/reward/mean@1")
				})
				fx, fy := col(is("val-aux/tool_call_fraction"))
				tx, ty := col(is("tool_calls/mean"))
				reward = append(reward, metrics.Series{Label: label, X: rx, Y: ry, Markers: true})
				frac = append(frac, metrics.Series{Label: label, X: fx, Y: fy, Markers: true})
				calls = append(calls, metrics.Series{Label: label, X: tx, Y: ty})
				fmt.Fprintf(c.App.Writer, "%s (%s)\n  step  val reward  val with tool call\n", label, dir)
				for i := range rx {
					f := math.NaN()
					for j := range fx {
						if fx[j] == rx[i] {
							f = fy[j]
						}
					}
					fmt.Fprintf(c.App.Writer, "  %4.0f  %10.3f  %18.3f\n", rx[i], ry[i], f)
				}
			}
			out := c.String("out")
			err := metrics.PlotFigure(out, "Tool use: "+strings.Join(c.Args().Slice(), " vs "), []metrics.Panel{
				{Title: "Validation reward", YLabel: "mean reward (greedy)", Series: reward},
				{Title: "Validation trajectories with a tool call", YLabel: "fraction", Series: frac, Fraction: true},
				{Title: "Tool calls per trajectory (training)", YLabel: "tool_calls/mean", Series: calls},
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, out)
			return nil
		},
	}
}
