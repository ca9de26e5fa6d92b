package sandbox

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Test outcomes.
const (
	Passed = "PASSED"
	Failed = "FAILED"
)

// TestRequest runs tests of an instance. Language is "python" (unittest ids such as
// tests.test_mod.TestX.test_y) or "go" (test names such as TestParse, looked up in every
// package of the module; TestParse/sub stands for its top-level test TestParse, see
// gorunner).
// TestPatch, when set, is applied first (a unified diff, as SWE-bench's test_patch), after the
// files it touches are reset to the base state, so that the tests run are the task's own.
type TestRequest struct {
	Language  string   `json:"language"`
	Tests     []string `json:"tests"`
	TestPatch string   `json:"test_patch,omitempty"`
	Limits    Limits   `json:"limits,omitempty"`
}

// TestReport says how each test ended (Passed or Failed; a test that did not run failed).
type TestReport struct {
	Results  map[string]string `json:"results"`
	Output   string            `json:"output"` // the end of the test command's output
	Error    string            `json:"error,omitempty"`
	Duration time.Duration     `json:"duration_ns"`
}

// The Python runner reads the ids from argv and writes one JSON object, {"results": test id ->
// outcome, "error": why all failed}, to descriptor 3 (the report pipe; see Manager.exec),
// never to its output: what the code under test prints cannot pass for a report. It moves the
// pipe off descriptor 3 first, and runs isolated (python3 -I -B: no PYTHON* variables, no
// bytecode files, no user site, the working tree is put on the path by the runner, so a
// sitecustomize.py of the tree is not imported). Before the first test it records every
// attribute of unittest's modules and classes and of builtins; after each test it checks that
// none was replaced, so that code under test that patches the framework (say
// unittest.TestCase.assertEqual, from the module under test) fails every test instead of
// passing them.
const pythonRunner = `import builtins, json, os, sys, unittest
report = os.fdopen(os.dup(3), "w")
os.close(3)
def framework():
    out = {}
    mods = [m for n, m in sorted(sys.modules.items()) if n == "unittest" or n.startswith("unittest.")] + [builtins]
    for m in mods:
        out[("sys.modules", m.__name__)] = m
        for name, obj in list(vars(m).items()):
            out[(m.__name__, name)] = obj
            if isinstance(obj, type):
                for k, v in list(vars(obj).items()):
                    out[(m.__name__, name, k)] = v
    return out
base = framework()
def changed():
    now = framework()
    return sorted({".".join(k[1:]) if k[0] == "sys.modules" else ".".join(k) for k, v in base.items() if now.get(k, base) is not v})
sys.path.insert(0, os.getcwd())
res, error = {}, ""
for tid in sys.argv[1:]:
    try:
        suite = unittest.defaultTestLoader.loadTestsFromName(tid)
        r = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(suite)
        res[tid] = "PASSED" if r.wasSuccessful() and r.testsRun > 0 else "FAILED"
    except BaseException as e:
        print("%s: %s: %s" % (tid, type(e).__name__, e), file=sys.stderr)
        res[tid] = "FAILED"
    c = changed()
    if c:
        error = "the code under test changed the test framework (%s)" % ", ".join(c[:5])
        res = {t: "FAILED" for t in sys.argv[1:]}
        break
report.write(json.dumps({"results": res, "error": error}))
report.close()
`

// goRunnerSource is the Go runner (gorunner/main.go), run in the working tree with the test
// names, descriptor 3 being the report pipe. It writes a generated test into each package
// holding hidden tests, which runs them as subtests and reports to a descriptor of the test
// binary's own only after all of them ran; the runner checks each report against the
// binary's exit status and writes the results so far to descriptor 3 after each package,
// one JSON line ({"results", "error"}, as the Python runner's object). The test binaries'
// stdout and stderr are the command's output.
//
//go:embed gorunner/main.go
var goRunnerSource string

// goRunnerFile is where RunTests puts the runner's binary in the instance's temporary folder
// (the Manager writes it before the command; the command moves it into a folder of its own,
// removed at the end).
const goRunnerFile = ".rlhost-gorunner"

// goRunnerPlaced runs the runner the Manager put in the instance; goRunnerFromSource builds it
// inside the instance from stdin first, in its own temporary folder (outside the tested tree,
// so the tree's go.mod or go.work take no part; its build output to stderr, without
// descriptor 3), when the Manager could not build it. Both exec it, so that no shell holds
// the report pipe beside it.
const (
	goRunnerPlaced = `out=$(mktemp -d) && mv "$TMPDIR/` + goRunnerFile + `" "$out/gorunner" || exit 1
exec "$out/gorunner" "$out"`
	goRunnerFromSource = `out=$(mktemp -d) || exit 1
cat > "$out/main.go" && printf 'module rlhost/gorunner\n\ngo 1.21\n' > "$out/go.mod" || exit 1
(cd "$out" && GOFLAGS= GOWORK=off go build -o gorunner .) >&2 3>&- || { rm -rf "$out"; exit 1; }
exec "$out/gorunner" "$out"`
)

// goRunnerBuild is the runner's binary, built by the Manager once (the host's go command is
// the one the instances see), kept in memory and written into each instance that runs Go
// tests: building it there cost about 0.6 s an evaluation. Not on a file the Manager keeps, so
// that no instance (in rlimit mode not as root they share the Manager's uid) can replace it
// for the next.
type goRunnerBuild struct {
	mu    sync.Mutex
	tried bool
	bin   []byte
	err   error
}

// goRunnerBinary returns the runner's binary, building it on first use; an error when it
// cannot be built here (then RunTests builds it in the instance).
func (m *Manager) goRunnerBinary() ([]byte, error) {
	g := &m.goRunner
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tried {
		return g.bin, g.err
	}
	g.tried = true
	g.bin, g.err = buildGoRunner()
	return g.bin, g.err
}

func buildGoRunner() ([]byte, error) {
	dir, err := os.MkdirTemp("", "rlhost-gorunner-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for name, text := range map[string]string{"main.go": goRunnerSource, "go.mod": "module rlhost/gorunner\n\ngo 1.21\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", "gorunner", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GO111MODULE=on")
	if _, err := os.UserCacheDir(); err != nil {
		cmd.Env = append(cmd.Env, "GOCACHE="+filepath.Join(dir, "cache"))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("sandbox: building the Go test runner: %v: %s", err, out)
	}
	return os.ReadFile(filepath.Join(dir, "gorunner"))
}

// placeGoRunner writes the runner's binary into the instance's temporary folder, replacing
// whatever is at that name and never following a link (os.Root), owned by the instance's uid.
func (m *Manager) placeGoRunner(id string, bin []byte) error {
	in, err := m.get(id)
	if err != nil {
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	root, err := os.OpenRoot(in.tmp)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.RemoveAll(goRunnerFile); err != nil {
		return err
	}
	f, err := root.OpenFile(goRunnerFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := f.Write(bin); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if in.uid >= 0 {
		return root.Lchown(goRunnerFile, in.uid, m.gid)
	}
	return nil
}

// parseReport reads a runner's report: the last line of JSON that holds results (the Python
// runner writes one object, the Go runner one line after each package, each superseding the
// last; a line cut short by a kill is skipped).
func parseReport(report []byte) (results map[string]string, errMsg string, ok bool) {
	lines := bytes.Split(report, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		var got struct {
			Results map[string]string
			Error   string
		}
		if err := json.Unmarshal(lines[i], &got); err == nil && got.Results != nil {
			return got.Results, got.Error, true
		}
	}
	return nil, "", false
}

var (
	pyID = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	goID = regexp.MustCompile(`^Test[A-Za-z0-9_]*(/[A-Za-z0-9_./-]+)?$`)
)

// patchPaths returns the files a unified diff touches (its "+++ b/" and "--- a/" lines).
func patchPaths(patch string) []string {
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(patch))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, pre := range []string{"+++ b/", "--- a/"} {
			if p, ok := strings.CutPrefix(line, pre); ok {
				p = strings.TrimSpace(p)
				if !seen[p] {
					seen[p] = true
					out = append(out, p)
				}
			}
		}
	}
	return out
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// RunTests applies the test patch and runs the tests in the instance.
func (m *Manager) RunTests(ctx context.Context, id string, req TestRequest) (TestReport, error) {
	if len(req.Tests) == 0 {
		return TestReport{}, badInput("no tests to run")
	}
	rep := TestReport{Results: map[string]string{}}
	if req.TestPatch != "" {
		paths := patchPaths(req.TestPatch)
		var b strings.Builder
		for _, p := range paths {
			c, err := cleanPath(p)
			if err != nil {
				return TestReport{}, badInput("test_patch: %v", err)
			}
			fmt.Fprintf(&b, "{ git checkout -q HEAD -- %s 2>/dev/null || rm -f -- %s; } && ", shellQuote(c), shellQuote(c))
		}
		b.WriteString("git apply --whitespace=nowarn -")
		res, err := m.Exec(ctx, id, ExecRequest{Command: b.String(), Stdin: req.TestPatch})
		if err != nil {
			return TestReport{}, err
		}
		if res.ExitCode != 0 || res.Error != "" {
			rep.Error = fmt.Sprintf("the test patch does not apply: %s%s", res.Stderr, res.Error)
			for _, t := range req.Tests {
				rep.Results[t] = Failed
			}
			return rep, nil
		}
	}
	var cmd ExecRequest
	switch req.Language {
	case "python":
		args := make([]string, len(req.Tests))
		for i, t := range req.Tests {
			if !pyID.MatchString(t) {
				return TestReport{}, badInput("python test id %q is not a dotted unittest name", t)
			}
			args[i] = t
		}
		cmd = ExecRequest{Command: "python3 -I -B - " + strings.Join(args, " "), Stdin: pythonRunner}
	case "go":
		for _, t := range req.Tests {
			if !goID.MatchString(t) {
				return TestReport{}, badInput("go test name %q does not start with Test or has odd characters", t)
			}
		}
		var args strings.Builder
		for _, t := range req.Tests {
			args.WriteString(" " + shellQuote(t))
		}
		cmd = ExecRequest{Command: goRunnerFromSource + args.String(), Stdin: goRunnerSource}
		if bin, err := m.goRunnerBinary(); err == nil {
			if err := m.placeGoRunner(id, bin); err != nil {
				return TestReport{}, fmt.Errorf("sandbox: placing the Go test runner: %w", err)
			}
			cmd = ExecRequest{Command: goRunnerPlaced + args.String()}
		}
	default:
		return TestReport{}, badInput("unknown test language %q (want python or go)", req.Language)
	}
	cmd.Limits = req.Limits
	if cmd.Limits.Wall == 0 {
		cmd.Limits.Wall = min(5*time.Minute, m.cfg.Max.Wall)
		cmd.Limits.CPU = min(5*time.Minute, m.cfg.Max.CPU)
	}
	if cmd.Limits.Output == 0 {
		cmd.Limits.Output = m.cfg.Max.Output
	}
	res, report, err := m.exec(ctx, id, cmd, true)
	if err != nil {
		return TestReport{}, err
	}
	rep.Duration = res.Duration
	rep.Error = res.Error
	out := res.Stdout + res.Stderr
	for _, t := range req.Tests {
		rep.Results[t] = Failed
	}
	if got, msg, ok := parseReport(report); ok {
		for _, t := range req.Tests {
			if got[t] == Passed {
				rep.Results[t] = Passed
			}
		}
		if msg != "" {
			rep.Error = msg
		}
	} else if rep.Error == "" {
		// the exit status tells a crash (1), a runner that never ran (0: no
		// script) and a kill from outside (137: SIGKILL, the OOM killer) apart
		rep.Error = fmt.Sprintf("the test runner did not report (exit status %d after %s: crashed, exited early or was killed)",
			res.ExitCode, res.Duration.Round(time.Millisecond))
	}
	if len(out) > 8000 {
		out = "...\n" + out[len(out)-8000:]
	}
	rep.Output = out
	return rep, nil
}

// Diff returns the working tree's changes against the base commit as a unified diff (new
// files included), as the instance's own uid computes it.
func (m *Manager) Diff(ctx context.Context, id string) (string, error) {
	res, err := m.Exec(ctx, id, ExecRequest{Command: "git add -A . >/dev/null 2>&1; git -c core.fsmonitor=false diff --cached --binary --no-ext-diff --no-textconv --no-color HEAD",
		Limits: Limits{Output: m.cfg.Max.Output}})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 || res.Error != "" {
		return res.Stdout, fmt.Errorf("sandbox: git diff: %s%s", res.Stderr, res.Error)
	}
	return res.Stdout, nil
}

// PatchStats counts the files, added and removed lines of a unified diff.
func PatchStats(patch string) (files, added, removed int) {
	for _, line := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(line, "diff --git "):
			files++
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
		case strings.HasPrefix(line, "+"):
			added++
		case strings.HasPrefix(line, "-"):
			removed++
		}
	}
	return
}

var _ = sort.Strings
