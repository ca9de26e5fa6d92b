package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rlhost/rlhost/plugins/local"
	"github.com/rlhost/rlhost/plugins/local/localparquet"
	"github.com/rlhost/rlhost/plugins/local/viewer"
	"github.com/urfave/cli/v2"
)

func init() { extraCommands = append(extraCommands, tracesCommand()) }

func tracesCommand() *cli.Command {
	runFlag := &cli.StringFlag{Name: "run", Required: true, Usage: "run directory (or its traces/traces.db)"}
	tokFlag := &cli.StringFlag{Name: "tokenizer", Usage: "model (GGUF file or directory) whose tokenizer decodes turns stored as token ids (default: the run's actor_rollout_ref.model.path)"}
	filters := []cli.Flag{
		runFlag,
		&cli.StringFlag{Name: "step", Usage: "a step (3) or a range (3-7, 3-, -7)"},
		&cli.StringFlag{Name: "sample", Usage: "sample index"},
		&cli.StringFlag{Name: "rollout", Usage: "rollout number (0..n-1)"},
		&cli.StringFlag{Name: "validate", Usage: "true: validation rollouts only; false: training rollouts only"},
		&cli.StringFlag{Name: "reward", Usage: "reward range: 1 (exactly), 0.5- (at least), -0.5 (at most), 0-1"},
		&cli.StringFlag{Name: "id", Usage: "trace id prefix"},
	}
	return &cli.Command{
		Name:  "traces",
		Usage: "look at the rollout traces of a run (the local trace store)",
		Description: "The local trace backend stores every traced trajectory in RUN_DIR/traces/traces.db (SQLite).\n" +
			"These commands read it, also while the run is writing it.",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "trajectories matching the filters, or a summary per step (--by-step)",
				Flags: append(append([]cli.Flag{}, filters...),
					&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most this many rows"},
					&cli.BoolFlag{Name: "by-step", Usage: "a line per step: trajectories, samples, mean reward and length"},
					&cli.BoolFlag{Name: "json", Usage: "JSON lines instead of a table"}),
				Action: func(c *cli.Context) error {
					st, flt, err := openFiltered(c)
					if err != nil {
						return err
					}
					defer st.Close()
					return tracesList(c.Context, c.App.Writer, st, flt, c.Bool("by-step"), c.Bool("json"))
				},
			},
			{
				Name:      "show",
				Usage:     "one trajectory as a chat: prompt, responses, tool calls and results",
				ArgsUsage: "TRACE_ID (a prefix is enough)",
				Flags:     []cli.Flag{runFlag, tokFlag, &cli.BoolFlag{Name: "json", Usage: "the trajectory and its spans as JSON"}},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return fmt.Errorf("traces show: want one trace id, got %d arguments", c.NArg())
					}
					st, err := local.OpenRun(c.String("run"))
					if err != nil {
						return err
					}
					defer st.Close()
					setRunDecoder(c.Context, st, c.String("tokenizer"), c.App.ErrWriter)
					return tracesShow(c.Context, c.App.Writer, st, c.Args().First(), c.Bool("json"))
				},
			},
			{
				Name: "compare",
				Usage: "the rollouts of one sample across steps (--run, --sample), or two runs' validation at one step " +
					"(RUN_A RUN_B): rewards, lengths and a word diff of the responses",
				ArgsUsage: "[RUN_A RUN_B]",
				Flags: []cli.Flag{&cli.StringFlag{Name: "run", Usage: "run directory (or its traces/traces.db)"}, tokFlag,
					&cli.Int64Flag{Name: "sample", Usage: "sample index (with RUN_A RUN_B: only this validation sample)"},
					&cli.StringFlag{Name: "steps", Usage: "comma-separated steps (default: every step the sample was traced at)"},
					&cli.Int64Flag{Name: "step", Value: -1, Usage: "RUN_A RUN_B: the validation step (default: the last one both runs validated at)"},
					&cli.BoolFlag{Name: "validate", Usage: "compare validation rollouts"},
					&cli.IntFlag{Name: "rollout", Value: 0, Usage: "the rollout whose responses are diffed between consecutive steps"},
				},
				Action: func(c *cli.Context) error {
					switch {
					case c.NArg() == 2:
						if c.IsSet("run") {
							return fmt.Errorf("traces compare: give two runs (RUN_A RUN_B) or --run, not both")
						}
						return compareRunsCommand(c)
					case c.NArg() != 0:
						return fmt.Errorf("traces compare: want RUN_A RUN_B (two runs' validation) or --run RUN --sample N (a sample across steps), got %d arguments", c.NArg())
					case !c.IsSet("run") || !c.IsSet("sample"):
						return fmt.Errorf("traces compare: want --run RUN --sample N (a sample across steps) or RUN_A RUN_B (two runs' validation at one step)")
					}
					var steps []int64
					for _, s := range strings.Split(c.String("steps"), ",") {
						if s = strings.TrimSpace(s); s == "" {
							continue
						}
						n, err := strconv.ParseInt(s, 10, 64)
						if err != nil {
							return fmt.Errorf("--steps: %q is not a step number", s)
						}
						steps = append(steps, n)
					}
					st, err := local.OpenRun(c.String("run"))
					if err != nil {
						return err
					}
					defer st.Close()
					setRunDecoder(c.Context, st, c.String("tokenizer"), c.App.ErrWriter)
					return tracesCompare(c.Context, c.App.Writer, st, c.Int64("sample"), c.Bool("validate"), steps, int64(c.Int("rollout")))
				},
			},
			{
				Name:  "serve",
				Usage: "the trace viewer in a browser, on 127.0.0.1",
				Flags: []cli.Flag{runFlag, tokFlag,
					&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8765", Usage: "listen address (127.0.0.1:0 picks a free port)"},
					&cli.StringFlag{Name: "against", Usage: "a second run: the viewer also compares the two runs' validation step by step"},
				},
				Action: func(c *cli.Context) error {
					st, err := local.OpenRun(c.String("run"))
					if err != nil {
						return err
					}
					defer st.Close()
					setRunDecoder(c.Context, st, c.String("tokenizer"), c.App.ErrWriter)
					var other *local.Store
					if p := c.String("against"); p != "" {
						if other, err = local.OpenRun(p); err != nil {
							return err
						}
						defer other.Close()
						setRunDecoder(c.Context, other, c.String("tokenizer"), c.App.ErrWriter)
					}
					return tracesServe(c.Context, c.App.Writer, st, other, c.String("addr"))
				},
			},
			{
				Name:  "export",
				Usage: "trajectories and their spans as JSONL or parquet (a row per trajectory), for pandas",
				Flags: append(append([]cli.Flag{}, filters...),
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "output file (.jsonl or .parquet)"},
					&cli.StringFlag{Name: "format", Usage: "jsonl or parquet (default: from the output's extension)"}),
				Action: func(c *cli.Context) error {
					st, flt, err := openFiltered(c)
					if err != nil {
						return err
					}
					defer st.Close()
					return tracesExport(c.Context, c.App.ErrWriter, st, flt, c.String("output"), c.String("format"))
				},
			},
		},
	}
}

func openFiltered(c *cli.Context) (*local.Store, local.Filter, error) {
	flt, err := parseFilter(c.String("step"), c.String("sample"), c.String("rollout"), c.String("validate"), c.String("reward"))
	if err != nil {
		return nil, flt, err
	}
	flt.TraceID = c.String("id")
	st, err := local.OpenRun(c.String("run"))
	return st, flt, err
}

// parseFilter turns the filter flags (also the viewer's query parameters) into a Filter.
func parseFilter(step, sample, rollout, validate, reward string) (local.Filter, error) {
	return viewer.ParseFilter(step, sample, rollout, validate, reward)
}

func tracesList(ctx context.Context, w io.Writer, st *local.Store, flt local.Filter, byStep, asJSON bool) error {
	if byStep {
		steps, err := st.Steps(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSONLines(w, steps)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "step\tvalidate\ttrajectories\tsamples\tmean reward\tmean response tokens\terrors\t")
		for _, s := range steps {
			fmt.Fprintf(tw, "%d\t%v\t%d\t%d\t%.3f\t%.1f\t%d\t\n", s.Step, s.Validate, s.Trajectories, s.Samples, s.MeanReward, s.MeanTokens, s.Errors)
		}
		return tw.Flush()
	}
	total, err := st.Count(ctx, flt)
	if err != nil {
		return err
	}
	list, err := st.List(ctx, flt)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSONLines(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRACE\tSTEP\tSAMPLE\tROLLOUT\tVALIDATE\tREWARD\tASSISTANT TURNS\tRESP TOKENS\tSECONDS\tERROR")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%v\t%.3f\t%d\t%d\t%.2f\t%s\n", t.TraceID[:min(12, len(t.TraceID))], t.Step, t.SampleIndex,
			t.RolloutN, t.Validate, t.Reward, t.Turns, t.ResponseTokens, float64(t.End-t.Start)/1e9, clip(t.Error, 40))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if total > len(list) {
		fmt.Fprintf(w, "(%d of %d trajectories; --limit shows more)\n", len(list), total)
	}
	return nil
}

func writeJSONLines[T any](w io.Writer, xs []T) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, x := range xs {
		if err := enc.Encode(x); err != nil {
			return err
		}
	}
	return nil
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func tracesShow(ctx context.Context, w io.Writer, st *local.Store, id string, asJSON bool) error {
	t, spans, err := st.Get(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"trajectory": t, "chat": local.Chat(spans, st.Decoder()), "spans": local.ExportSpansOf(spans)})
	}
	fmt.Fprintf(w, "trace %s  step %d  sample %d  rollout %d  validate %v  reward %g\n", t.TraceID, t.Step, t.SampleIndex, t.RolloutN, t.Validate, t.Reward)
	fmt.Fprintf(w, "experiment %s  agent %s  task %s  data source %s  %d assistant turns, %d prompt / %d response tokens, %.2fs\n\n",
		t.ExperimentName, t.AgentName, t.Task, t.DataSource, t.Turns, t.PromptTokens, t.ResponseTokens, float64(t.End-t.Start)/1e9)
	for _, m := range local.Chat(spans, st.Decoder()) {
		head := "[" + m.Role
		if m.Name != "" {
			head += " " + m.Name
		}
		head += fmt.Sprintf("]  %.1f ms", m.DurationMS)
		if m.Role == "user" || m.Role == "context" {
			head = "[" + m.Role + "]"
		}
		for k, v := range m.Attributes {
			head += fmt.Sprintf("  %s=%v", k, v)
		}
		fmt.Fprintln(w, head)
		if m.Arguments != "" {
			fmt.Fprintln(w, indent("arguments: "+m.Arguments))
		}
		fmt.Fprintln(w, indent(m.Content))
		if m.Error != "" {
			fmt.Fprintln(w, indent("ERROR: "+m.Error))
		}
		fmt.Fprintln(w)
	}
	if t.Error != "" {
		fmt.Fprintf(w, "trajectory failed: %s\n", t.Error)
	}
	return nil
}

func tracesCompare(ctx context.Context, w io.Writer, st *local.Store, sample int64, validate bool, steps []int64, rollout int64) error {
	groups, err := st.Compare(ctx, sample, validate, steps)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "sample %d (validate %v)\n", sample, validate)
	fmt.Fprintln(tw, "STEP\tROLLOUT\tREWARD\tWORDS\tRESP TOKENS\tTRACE\tRESPONSE")
	for _, g := range groups {
		for _, r := range g.Rollouts {
			fmt.Fprintf(tw, "%d\t%d\t%.3f\t%d\t%d\t%s\t%s\n", g.Step, r.RolloutN, r.Reward, r.Words, r.ResponseTokens,
				r.TraceID[:min(12, len(r.TraceID))], clip(r.Text, 60))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Word diff of one rollout between consecutive steps: [-removed-] {+added+}.
	var prev *local.CompareEntry
	var prevStep int64
	for _, g := range groups {
		for i := range g.Rollouts {
			r := &g.Rollouts[i]
			if r.RolloutN != rollout {
				continue
			}
			if prev != nil {
				fmt.Fprintf(w, "\nrollout %d, step %d -> step %d (reward %g -> %g, %d -> %d words):\n", rollout, prevStep, g.Step,
					prev.Reward, r.Reward, prev.Words, r.Words)
				fmt.Fprintln(w, indent(diffText(local.Diff(prev.Text, r.Text))))
			}
			prev, prevStep = r, g.Step
		}
	}
	return nil
}

func tracesServe(ctx context.Context, w io.Writer, st, other *local.Store, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--addr %q: the viewer serves traces without authentication, so it listens on a loopback address only (127.0.0.1)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: viewer.HandlerCompare(st, other), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(w, "trace viewer of %s on http://%s/ (Ctrl-C stops it)\n", st.Path(), ln.Addr())
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

func tracesExport(ctx context.Context, log io.Writer, st *local.Store, flt local.Filter, output, format string) error {
	if format == "" {
		switch strings.ToLower(filepath.Ext(output)) {
		case ".parquet", ".pq":
			format = "parquet"
		case ".jsonl", ".json", ".ndjson":
			format = "jsonl"
		default:
			return fmt.Errorf("--output %s: say --format jsonl or --format parquet", output)
		}
	}
	tmp := output + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	var n int
	switch format {
	case "jsonl":
		n, err = st.ExportJSONL(ctx, f, flt)
	case "parquet":
		n, err = localparquet.Export(ctx, st, f, flt)
	default:
		err = fmt.Errorf("--format %q: want jsonl or parquet", format)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, output)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	fmt.Fprintf(log, "wrote %d trajectories to %s\n", n, output)
	return nil
}

func compareRunsCommand(c *cli.Context) error {
	var stores [2]*local.Store
	for i, p := range []string{c.Args().Get(0), c.Args().Get(1)} {
		st, err := local.OpenRun(p)
		if err != nil {
			return err
		}
		defer st.Close()
		setRunDecoder(c.Context, st, c.String("tokenizer"), c.App.ErrWriter)
		stores[i] = st
	}
	step := c.Int64("step")
	if step < 0 {
		common, err := local.CommonValidationSteps(c.Context, stores[0], stores[1])
		if err != nil {
			return err
		}
		if len(common) == 0 {
			return fmt.Errorf("traces compare: %s and %s have no validation step in common (validation is traced at trainer.test_freq)",
				c.Args().Get(0), c.Args().Get(1))
		}
		step = common[len(common)-1]
	}
	var sample *int64
	if c.IsSet("sample") {
		v := c.Int64("sample")
		sample = &v
	}
	return tracesCompareRuns(c.Context, c.App.Writer, stores[0], stores[1], c.Args().Get(0), c.Args().Get(1), step, sample)
}

// tracesCompareRuns prints two runs' validation rollouts at one step, paired by sample and
// rollout: both rewards, lengths, and a word diff where the responses differ.
func tracesCompareRuns(ctx context.Context, w io.Writer, a, b *local.Store, nameA, nameB string, step int64, sample *int64) error {
	pairs, err := local.CompareRuns(ctx, a, b, step)
	if err != nil {
		return err
	}
	var sumA, sumB float64
	var nA, nB, same int
	for _, p := range pairs {
		if p.A != nil {
			sumA += p.A.Reward
			nA++
		}
		if p.B != nil {
			sumB += p.B.Reward
			nB++
		}
		if p.A != nil && p.B != nil && p.A.Text == p.B.Text {
			same++
		}
	}
	fmt.Fprintf(w, "validation at step %d\n  A %s: %d rollouts, mean reward %.3f\n  B %s: %d rollouts, mean reward %.3f\n"+
		"  %d of %d pairs answered identically\n\n",
		step, nameA, nA, sumA/float64(max(nA, 1)), nameB, nB, sumB/float64(max(nB, 1)), same, len(pairs))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SAMPLE\tROLLOUT\tREWARD A\tREWARD B\tWORDS A\tWORDS B\tSAME")
	side := func(e *local.CompareEntry) (string, string) {
		if e == nil {
			return "-", "-"
		}
		return fmt.Sprintf("%.3f", e.Reward), fmt.Sprint(e.Words)
	}
	for _, p := range pairs {
		if sample != nil && p.SampleIndex != *sample {
			continue
		}
		ra, wa := side(p.A)
		rb, wb := side(p.B)
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%v\n", p.SampleIndex, p.RolloutN, ra, rb, wa, wb, p.A != nil && p.B != nil && p.A.Text == p.B.Text)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range pairs {
		if (sample != nil && p.SampleIndex != *sample) || p.A == nil || p.B == nil || p.A.Text == p.B.Text {
			continue
		}
		fmt.Fprintf(w, "\nsample %d rollout %d, A -> B (reward %g -> %g, %d -> %d words):\n", p.SampleIndex, p.RolloutN,
			p.A.Reward, p.B.Reward, p.A.Words, p.B.Words)
		fmt.Fprintln(w, indent(diffText(p.Diff)))
	}
	return nil
}

// diffText writes a word diff as text: [-removed-] {+added+}.
func diffText(ops []local.DiffOp) string {
	var b strings.Builder
	for _, op := range ops {
		switch op.Op {
		case "=":
			b.WriteString(op.Text)
		case "-":
			b.WriteString("[-" + op.Text + "-]")
		case "+":
			b.WriteString("{+" + op.Text + "+}")
		}
		b.WriteByte(' ')
	}
	return b.String()
}
