package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/sdk/conformance"
	"github.com/rlhost/rlhost/sdk/task"
)

var (
	buildOnce sync.Map // mode -> path
	buildDir  string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlhost-fixtures-")
	if err != nil {
		panic(err)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixture builds testdata/fixture in the given mode as rlhost-task-fixture and returns its path.
func fixture(t *testing.T, mode string, env ...string) string {
	t.Helper()
	key := mode + strings.Join(env, ",")
	if p, ok := buildOnce.Load(key); ok {
		return p.(string)
	}
	dir := filepath.Join(buildDir, strings.NewReplacer("=", "_", ",", "_").Replace(key))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "rlhost-task-fixture")
	cmd := exec.Command("go", "build", "-o", out, "-ldflags", "-X main.mode="+mode, "./testdata/fixture")
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building fixture %s: %v\n%s", mode, err, b)
	}
	buildOnce.Store(key, out)
	return out
}

func failed(rep conformance.Report) map[string]string {
	out := map[string]string{}
	for _, r := range rep.Results {
		if r.Err != nil {
			out[r.Name] = r.Err.Error()
		}
	}
	return out
}

func TestGoodFixturePasses(t *testing.T) {
	conformance.RunBinary(t, fixture(t, "good"), conformance.Options{})
}

// Each broken fixture must fail, and in the check that names its fault, with a message that
// says what is wrong.
func TestBrokenFixturesRejected(t *testing.T) {
	cases := []struct {
		mode  string
		check string
		want  string
	}{
		{"crash", "Start/Obs/End round trip", "the plugin exited during this check"},
		{"crash", "Start/Obs/End round trip", "about to crash on purpose"},
		{"crash", "Score round trip", `not run: the plugin exited during "Start/Obs/End round trip"`},
		{"badhandshake", "handshake line", "want CORE|APP|NETWORK|ADDRESS|grpc"},
		{"badhandshake", "launch", "printed something other than the go-plugin handshake line"},
		{"hang", "Info consistent", "no answer within 2s (does the plugin hang?)"},
		{"wrongversion", "handshake line", "chose protocol version 2, not one of those offered [1]"},
		{"wrongversion", "launch", "speaks another protocol version"},
		{"badschema", "tool schemas valid", `parameters.properties.answer.type: "strng" is not a JSON Schema type`},
		{"nosources", "Info consistent", "it declares no data_source (Info.DataSources)"},
		{"othersource", "Preprocess samples", `sample 0: row data_source "fixture" is not among the data sources Info declares (other)`},
		{"panic", "Score round trip", "Score: panic: runtime error: index out of range [2] with length 2 (at main.grade main.go:"},
		{"panic", "Score round trip", "<- main.fixture.Score main.go:"},
		{"exitearly", "alive and healthy throughout", "the plugin exited"},
		{"freeze", "alive and healthy throughout", `stopped answering health checks`},
		{"freeze", "Start/Obs/End round trip", "no answer within 2s"},
		{"stdout", "nothing on stdout after handshake", `(the first: "scoring 2 items")`},
	}
	for _, c := range cases {
		t.Run(c.mode+"/"+c.check, func(t *testing.T) {
			t.Parallel()
			rep := conformance.CheckBinary(context.Background(), fixture(t, c.mode),
				conformance.Options{CallTimeout: 2 * time.Second, StartTimeout: 3 * time.Second})
			if !rep.Failed() {
				t.Fatalf("fixture %s passed conformance; want a failure", c.mode)
			}
			f := failed(rep)
			msg, ok := f[c.check]
			if !ok {
				var sb strings.Builder
				rep.Write(&sb)
				t.Fatalf("check %q did not fail for fixture %s; report:\n%s", c.check, c.mode, sb.String())
			}
			if !strings.Contains(msg, c.want) {
				t.Fatalf("check %q failed with %q; want it to mention %q", c.check, msg, c.want)
			}
			if c.mode == "panic" && (strings.Contains(msg, "\n") || strings.Contains(msg, "goroutine")) {
				t.Fatalf("a panic's message is %q; want one line, without the goroutine dump", msg)
			}
		})
	}
}

// The host and the kit take the handshake line's certificate in standard base64 with or
// without its padding (go-plugin itself decodes only the unpadded form): fixtures that print
// the line themselves, with a certificate whose base64 has padding, pass conformance either way.
func TestCertificatePaddingAccepted(t *testing.T) {
	for _, mode := range []string{"padcert", "rawcert"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			conformance.RunBinary(t, fixture(t, mode), conformance.Options{})
		})
	}
}

func TestNotExecutableAndOtherArch(t *testing.T) {
	good := fixture(t, "good")
	dir := t.TempDir()
	noexec := filepath.Join(dir, "rlhost-task-noexec")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noexec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := conformance.CheckBinary(context.Background(), noexec, conformance.Options{})
	if msg := failed(rep)["executable"]; !strings.Contains(msg, "not executable: run `chmod +x") {
		t.Errorf("non-executable file: got %q", msg)
	}
	other := "arm64"
	if strings.Contains(os.Getenv("GOARCH"), "arm64") {
		other = "amd64"
	}
	arm := fixture(t, "good", "GOARCH="+other, "CGO_ENABLED=0")
	rep = conformance.CheckBinary(context.Background(), arm, conformance.Options{})
	if msg := failed(rep)["executable"]; !strings.Contains(msg, "is built for "+other) {
		t.Errorf("binary for %s: got %q", other, msg)
	}
}

func TestParseHandshake(t *testing.T) {
	cases := []struct {
		line string
		ok   bool
	}{
		{"1|1|unix|/tmp/plugin123|grpc|", true},
		{"1|1|unix|/tmp/plugin123|grpc|MIIBcert", true},
		{"1|1|tcp|127.0.0.1:1234|grpc", true},
		{"1|1|tcp|10.0.0.1:1234|grpc", false},
		{"2|1|unix|/tmp/p|grpc", false},
		{"1|x|unix|/tmp/p|grpc", false},
		{"1|1|pipe|/tmp/p|grpc", false},
		{"1|1|unix||grpc", false},
		{"1|1|unix|/tmp/p|netrpc", false},
		{"hello", false},
		{"1|1|unix|/tmp/p|grpc|cert|extra", false},
	}
	for _, c := range cases {
		_, err := conformance.ParseHandshake(c.line)
		if (err == nil) != c.ok {
			t.Errorf("ParseHandshake(%q): err=%v, want ok=%v", c.line, err, c.ok)
		}
	}
}

func TestCheckToolParameters(t *testing.T) {
	cases := []struct {
		schema string
		want   string // "" = valid
	}{
		{`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`, ""},
		{`{"type":"object","properties":{}}`, ""},
		{`{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"}}}}`, ""},
		{`{"type":"object","properties":{"op":{"type":"string","enum":["+","-"]}}}`, ""},
		{`{"type":"object","properties":{"v":{"type":["string","null"]}}}`, ""},
		{``, "empty"},
		{`{"type":"object",`, "not valid JSON"},
		{`[]`, "must be a JSON object"},
		{`{"type":"string"}`, `must have "type": "object"`},
		{`{"type":"object","properties":{"a":{"type":"text"}}}`, `"text" is not a JSON Schema type`},
		{`{"type":"object","properties":{"a":"string"}}`, "must be a schema object"},
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`, `names "b", which is not in properties`},
		{`{"type":"object","properties":{"a":{"type":"array","items":"int"}}}`, "items must be a schema object"},
		{`{"type":"object","properties":{"a":{"enum":[]}}}`, "enum must be a non-empty list"},
		{`{"type":"object","required":"a"}`, "required must be a list"},
	}
	for _, c := range cases {
		err := conformance.CheckToolParameters(json.RawMessage(c.schema))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.schema, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error mentioning %q", c.schema, err, c.want)
		}
	}
}

// inproc is a small, correct task for RunTask.
type inproc struct{ *task.ToolEnv }

func (i inproc) Info(context.Context) (task.Info, error) {
	return task.Info{Name: "inproc", Version: "1", Tools: i.ToolSpecs(), DefaultAgentLoop: task.ToolAgent, DataSources: []string{"inproc"},
		Samples: []task.Sample{{Split: "train", Record: map[string]any{"q": "2"}, ReferenceSolution: "2"}}}, nil
}

func (inproc) Preprocess(_ context.Context, r task.Record) (task.Row, error) {
	q, ok := r.Data["q"].(string)
	if !ok {
		return task.Row{}, task.InvalidArgument("record %d: no string field q", r.Index)
	}
	return task.Row{DataSource: "inproc", Prompt: []task.Message{{Role: "user", Content: "say " + q}},
		RewardModel: task.RewardModel{Style: "rule", GroundTruth: q}, ExtraInfo: map[string]any{"index": r.Index}}, nil
}

func (inproc) Score(_ context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	out := make([]task.ScoreResult, len(items))
	for i, it := range items {
		if strings.TrimSpace(it.Solution) == fmt.Sprint(it.GroundTruth) {
			out[i].Score = 1
		}
	}
	return out, nil
}

type upper struct{}

func (upper) Spec() task.ToolSpec {
	return task.ToolSpec{Name: "upper", Description: "Upper-case text.", Parameters: task.SchemaObject("text", `{"type":"string"}`)}
}

func (upper) Call(_ context.Context, c task.ToolInvocation) (task.ToolOutput, error) {
	s, ok := c.Arguments["text"].(string)
	if !ok {
		return task.ToolOutput{}, fmt.Errorf("text must be a string")
	}
	return task.ToolOutput{Text: strings.ToUpper(s)}, nil
}

func TestRunTaskInProcess(t *testing.T) {
	conformance.RunTask(t, inproc{&task.ToolEnv{Tools: []task.Tool{upper{}}}})
}

func traceFixture(t *testing.T, mode string) string {
	t.Helper()
	dir := filepath.Join(buildDir, "trace-"+mode)
	out := filepath.Join(dir, "rlhost-trace-fixture")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	os.MkdirAll(dir, 0o755)
	cmd := exec.Command("go", "build", "-o", out, "-ldflags", "-X main.mode="+mode, "./testdata/tracefixture")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building trace fixture: %v\n%s", err, b)
	}
	return out
}

func TestTraceBackendChecks(t *testing.T) {
	conformance.RunBinary(t, traceFixture(t, "good"), conformance.Options{})
	rep := conformance.CheckBinary(context.Background(), traceFixture(t, "unavailable"), conformance.Options{})
	if msg := failed(rep)["Init/Export/Flush"]; !strings.Contains(msg, "Unavailable") || !strings.Contains(msg, "the store is down") {
		t.Fatalf("a backend whose Export fails: %q", msg)
	}
}

// scoreOnly implements Task alone (Info and Score): its features are just "score".
type scoreOnly struct {
	ref  float64 // what the reference solution scores
	comp float64 // its "format" component
}

func (scoreOnly) Info(context.Context) (task.Info, error) {
	row := task.Row{DataSource: "scoreonly", Prompt: []task.Message{{Role: "user", Content: "say 7"}},
		RewardModel: task.RewardModel{Style: "rule", GroundTruth: "7"}}
	return task.Info{Name: "scoreonly", Version: "1", DataSources: []string{"scoreonly"},
		Samples: []task.Sample{{Split: "train", Row: &row, ReferenceSolution: "7"}}}, nil
}

func (s scoreOnly) Score(_ context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	out := make([]task.ScoreResult, len(items))
	for i, it := range items {
		if it.Solution == "7" {
			out[i] = task.ScoreResult{Score: s.ref, Components: map[string]float64{"format": s.comp}}
		}
	}
	return out, nil
}

func TestScoreMustBeFinite(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	cases := []struct {
		name string
		impl scoreOnly
		want string // "" = passes
	}{
		{"finite", scoreOnly{ref: 1, comp: 0.5}, ""},
		{"+Inf", scoreOnly{ref: inf}, `reference solution "7" is +Inf, not a finite number`},
		{"NaN", scoreOnly{ref: nan}, `reference solution "7" is NaN, not a finite number`},
		{"-Inf", scoreOnly{ref: math.Inf(-1)}, `is -Inf, not a finite number`},
		{"component NaN", scoreOnly{ref: 1, comp: nan}, `component "format" is NaN, not a finite number`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := conformance.CheckTask(t, c.impl)
			msg, failedScore := failed(rep)["Score round trip"]
			switch {
			case c.want == "" && rep.Failed():
				var sb strings.Builder
				rep.Write(&sb)
				t.Fatalf("a correct score-only task failed:\n%s", sb.String())
			case c.want != "" && !failedScore:
				t.Fatalf("Score round trip passed; want a failure mentioning %q", c.want)
			case c.want != "" && !strings.Contains(msg, c.want):
				t.Fatalf("Score round trip failed with %q; want it to mention %q", msg, c.want)
			}
		})
	}
}

// The host calls nothing behind an undeclared feature, so the kit checks nothing there: a
// plugin that declares only "score" has its Configure and Prompt checks skipped.
func TestUndeclaredFeaturesSkipped(t *testing.T) {
	rep := conformance.CheckTask(t, scoreOnly{ref: 1})
	skipped := map[string]string{}
	for _, r := range rep.Results {
		if r.Skipped != "" {
			skipped[r.Name] = r.Skipped
		}
	}
	for _, name := range []string{"Configure {}", "Prompt round trip", "Start/Obs/End round trip"} {
		if !strings.Contains(skipped[name], "does not declare") && !strings.Contains(skipped[name], "no environment") {
			t.Errorf("check %q: skipped=%q; want it skipped for an undeclared feature", name, skipped[name])
		}
	}
}

// declaring is scoreOnly with extra features declared in Info.
type declaring struct {
	scoreOnly
	features []string
}

func (d declaring) Info(ctx context.Context) (task.Info, error) {
	info, err := d.scoreOnly.Info(ctx)
	info.Features = append(info.Features, d.features...)
	return info, err
}

// Every feature the SDK names is known to the kit (a swedev plugin whose sandbox has no file
// system view declares weak_isolation); a feature it does not name fails "Info consistent".
func TestDeclaredFeaturesKnown(t *testing.T) {
	for _, f := range []string{task.FeatureWeakIsolation, task.FeatureInteraction, task.FeatureHostService} {
		rep := conformance.CheckTask(t, declaring{scoreOnly{ref: 1}, []string{f}})
		if msg, bad := failed(rep)["Info consistent"]; bad {
			t.Errorf("declaring %q: Info consistent failed: %s", f, msg)
		}
	}
	rep := conformance.CheckTask(t, declaring{scoreOnly{ref: 1}, []string{"no_such_feature"}})
	if msg := failed(rep)["Info consistent"]; !strings.Contains(msg, `unknown feature "no_such_feature"`) {
		t.Errorf("declaring no_such_feature: Info consistent gave %q; want an unknown-feature failure", msg)
	}
}
