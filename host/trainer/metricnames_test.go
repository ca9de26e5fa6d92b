package trainer

import (
	"context"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/host/tracing"
	"github.com/rlhost/rlhost/host/tracing/tracingtest"
	"github.com/rlhost/rlhost/sdk/trace"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md's list of the metrics of rlhost train")

const (
	metricsDoc      = "../../docs/metrics.md"
	metricsDocBegin = "<!-- BEGIN METRICS: generated from host/trainer/metricnames.go by `make metrics-docs`; do not edit -->"
	metricsDocEnd   = "<!-- END METRICS -->"
)

// metricsMarkdown renders metricTable as docs/metrics.md lists it: a table per section, one row
// per name; a name without a doc of its own joins the row above it (the max and min of a mean).
func metricsMarkdown() string {
	var b strings.Builder
	section := ""
	var names []string
	doc, by := "", ""
	flush := func() {
		if len(names) == 0 {
			return
		}
		if by != "" {
			doc += " (from `" + by + "`)"
		}
		fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(names, ", "), doc)
		names = nil
	}
	for _, m := range metricTable {
		if m.section != section {
			flush()
			if section != "" {
				b.WriteString("\n")
			}
			section = m.section
			fmt.Fprintf(&b, "### %s\n\n| metric | what |\n|---|---|\n", section)
		}
		if m.doc != "" {
			flush()
			doc, by = m.doc, m.by
		}
		names = append(names, "`"+m.name+"`")
	}
	flush()
	return b.String()
}

// TestMetricsDoc: docs/metrics.md lists the metrics of metricTable, as metricsMarkdown renders
// them (-update rewrites the list).
func TestMetricsDoc(t *testing.T) {
	raw, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, metricsDocBegin), strings.Index(doc, metricsDocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q block", metricsDoc, metricsDocBegin, metricsDocEnd)
	}
	want := metricsDocBegin + "\n\n" + metricsMarkdown() + "\n" + metricsDocEnd
	if got := doc[i : j+len(metricsDocEnd)]; got != want {
		if *update {
			if err := os.WriteFile(metricsDoc, []byte(doc[:i]+want+doc[j+len(metricsDocEnd):]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's list of metrics differs from metricTable: run `make metrics-docs`", metricsDoc)
	}
}

// TestMetricTable: every name is declared once, its placeholders are <word>s, and a doc opens
// each row.
func TestMetricTable(t *testing.T) {
	seen := map[string]bool{}
	placeholder := regexp.MustCompile(`^[a-z0-9_./:@-]*(<[a-z_ ]+>[a-z0-9_./:@-]*)*$`)
	for i, m := range metricTable {
		if seen[m.name] {
			t.Errorf("%s is declared twice", m.name)
		}
		seen[m.name] = true
		if !placeholder.MatchString(m.name) {
			t.Errorf("%s: a name is lower-case path segments with <placeholders>", m.name)
		}
		if m.doc == "" && (i == 0 || metricTable[i-1].section != m.section) {
			t.Errorf("%s opens a section without a doc", m.name)
		}
	}
	for _, c := range []struct{ name, want string }{
		{fillName(taskRetried, "gsm8k"), "task/gsm8k/retried"},
		{fillName(dataSourceScoreMean, "openai/gsm8k"), "data_source/openai/gsm8k/score/mean"},
		{fillName(valCoreReward, "a<b>"), metrics.ValRewardKey("a<b>")},
		{ValTaskRewardKey("arith"), "val-core/task:arith/reward/mean@1"},
		{fillName(timingGen), "timing_s/gen"},
	} {
		if c.name != c.want {
			t.Errorf("fillName: %q, want %q", c.name, c.want)
		}
	}
}

// metricPatterns are the names of metricTable as regular expressions: a placeholder matches
// one or more characters (a data source may hold slashes).
func metricPatterns() []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, m := range metricTable {
		parts := regexp.MustCompile(`<[^>]+>`).Split(m.name, -1)
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		out = append(out, regexp.MustCompile("^"+strings.Join(parts, ".+")+"$"))
	}
	return out
}

// unlisted returns the names of vals that no name of metricTable matches.
func unlisted(vals map[string]float64) []string {
	pats := metricPatterns()
	var out []string
	for k := range vals {
		if !slices.ContainsFunc(pats, func(p *regexp.Regexp) bool { return p.MatchString(k) }) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// checkListed fails the test when a step logged a metric that docs/metrics.md does not list.
// loggedSteps calls it on every run the tests make.
func checkListed(t *testing.T, steps []metrics.Step) {
	t.Helper()
	for _, s := range steps {
		if u := unlisted(s.Values); len(u) > 0 {
			t.Errorf("step %d logged metrics that metricnames.go does not declare (nor docs/metrics.md list): %v", s.Step, u)
		}
	}
}

// TestMetricsOfOtherPackages: the names declared as another package's (metricsBy) are the
// names its function makes, no more, no fewer.
func TestMetricsOfOtherPackages(t *testing.T) {
	made := map[string]map[string]float64{
		"rollout.Metrics": rollout.Metrics([]*rollout.Output{{ResponseIDs: []int{1, 2}, ResponseMask: []float32{1, 1}}}),
	}
	ext := map[string]float64{}
	for k, v := range rollout.ExternalDropMetrics(nil) {
		ext[rolloutExternal+k] = v
	}
	made["rollout.ExternalDropMetrics"] = ext
	mems := map[string]*tracingtest.Memory{"local": {}, "mlflow": {}}
	tr, err := tracing.New(context.Background(), tracing.Config{Backends: []string{"local", "mlflow"}, RunDir: t.TempDir()},
		func(_ context.Context, name string) (trace.Backend, error) { return mems[name], nil })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		tr.Close(ctx)
	}()
	made["tracing.Tracer.StepMetrics"] = tr.StepMetrics()

	all := metricPatterns()
	declared := map[string][]string{}
	for _, m := range metricTable {
		if m.by != "" {
			declared[m.by] = append(declared[m.by], m.name)
		}
	}
	for by, names := range declared {
		vals, ok := made[by]
		if !ok {
			t.Errorf("%s: metricsBy declares its names, but this test does not call it: add it to made", by)
			continue
		}
		pats := map[string]*regexp.Regexp{}
		for i, m := range metricTable {
			if m.by == by {
				pats[m.name] = all[i]
			}
		}
		for _, name := range names {
			found := false
			for k := range vals {
				found = found || pats[name].MatchString(k)
			}
			if !found {
				t.Errorf("%s is declared as %s's, which does not make it (it makes %v)", name, by, slices.Sorted(maps.Keys(vals)))
			}
		}
		for k := range vals {
			if !slices.ContainsFunc(names, func(n string) bool { return pats[n].MatchString(k) }) {
				t.Errorf("%s makes %s, which metricnames.go does not declare", by, k)
			}
		}
	}
}

// trainerSources parses the package's non-test Go files.
func trainerSources(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = f
	}
	return fset, files
}

// stringConsts are the string constants of a package's non-test files whose values hold a
// slash (metric names): name -> value.
func stringConsts(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	out := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if d, ok := n.(*ast.GenDecl); ok && d.Tok == token.CONST {
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								if v, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(v, "/") {
									out[name.Name] = v
								}
							}
						}
					}
				}
			}
			return true
		})
	}
	return out
}

// TestMetricNamesDeclared holds the trainer's code to metricnames.go, so that docs/metrics.md
// lists what the trainer writes and nothing else: outside metricnames.go no string literal
// names a metric (starts as one of the table's names does, "actor/", "timing_s/", ...; a span
// attribute's name may) and
// no host/metrics name constant is used that the table does not list; and every name
// metricnames.go declares for the trainer is used outside it.
func TestMetricNamesDeclared(t *testing.T) {
	fset, files := trainerSources(t)
	prefixes := map[string]bool{}
	listed := map[string]bool{}
	for _, m := range metricTable {
		prefixes[m.name[:strings.IndexAny(m.name, "/")+1]] = true
		listed[m.name] = true
	}
	hostMetrics := stringConsts(t, "../metrics") // ScoreMean, TimingGen, ...
	declared := map[string]bool{}
	ast.Inspect(files["metricnames.go"], func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, name := range vs.Names {
				if i >= len(vs.Values) || name.Name == "_" {
					continue
				}
				if call, ok := vs.Values[i].(*ast.CallExpr); ok {
					if f, ok := call.Fun.(*ast.Ident); ok && (f.Name == "metric" || f.Name == "metricsBy") {
						declared[name.Name] = true
					}
				}
			}
		}
		return true
	})
	if len(declared) < 50 {
		t.Fatalf("found %d declarations in metricnames.go; the test no longer reads them", len(declared))
	}
	used := map[string]bool{}
	for path, f := range files {
		if path == "metricnames.go" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				// A span's attributes (reward/<component> on a trajectory's root span) are
				// named like metrics, but are not metrics.
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "SetAttr" {
					for _, a := range x.Args[1:] {
						ast.Inspect(a, func(n ast.Node) bool {
							if id, ok := n.(*ast.Ident); ok {
								used[id.Name] = true
							}
							return true
						})
					}
					return false
				}
			case *ast.BasicLit:
				if s, err := strconv.Unquote(x.Value); err == nil && x.Kind == token.STRING {
					if i := strings.IndexByte(s, '/'); i > 0 && prefixes[s[:i+1]] {
						t.Errorf("%s: %q names a metric: declare it in metricnames.go", fset.Position(x.Pos()), s)
					}
				}
			case *ast.SelectorExpr:
				if pkg, ok := x.X.(*ast.Ident); ok && pkg.Name == "metrics" {
					if v, ok := hostMetrics[x.Sel.Name]; ok && !listed[v] {
						t.Errorf("%s: metrics.%s (%s) is not in metricnames.go", fset.Position(x.Pos()), x.Sel.Name, v)
					}
				}
			case *ast.Ident:
				used[x.Name] = true
			}
			return true
		})
	}
	for name := range declared {
		if !used[name] {
			t.Errorf("metricnames.go declares %s, which nothing outside it writes: remove it (and its line in docs/metrics.md)", name)
		}
	}
}

// TestStepMetricsListed: a GRPO step with a KL loss, two PPO epochs (so old log-probs) and
// validation logs only metrics docs/metrics.md lists (loggedSteps), among them those of each
// of its phases.
func TestStepMetricsListed(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	dir := filepath.Join(t.TempDir(), "run")
	tr := startTrainer(t, append(grpoRun(t, dir), "trainer.test_freq=1", "actor_rollout_ref.actor.use_kl_loss=true",
		"actor_rollout_ref.actor.ppo_epochs=2"), Options{})
	runToEnd(t, tr)
	s := loggedSteps(t, dir, 1)[0].Values
	for _, k := range []string{trainingGlobalStep, timingGen, rolloutFailedFraction, metrics.NumTurnsMean, timingReward, rewardFailedFraction,
		timingOldLogProb, timingRef, actorKLLoss, actorPGLoss, timingUpdateActor, criticScoreMean, timingStep, perfThroughput,
		fillName(valCoreReward, "openai/gsm8k"), timingTesting} {
		if _, ok := s[k]; !ok {
			t.Errorf("the step did not log %s", k)
		}
	}
}
