package swplugin

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/swedev/sandbox"
)

// cheatEpisode runs one episode of row whose bash calls are cmds, submits and returns End's result.
func cheatEpisode(t *testing.T, p *Task, row task.Row, cmds ...string) (task.EndResult, []task.ToolResult) {
	t.Helper()
	ctx := context.Background()
	st, err := p.Start(ctx, task.StartRequest{Row: row})
	if err != nil {
		t.Fatal(err)
	}
	var calls []task.ToolCall
	for _, c := range cmds {
		calls = append(calls, call(BashTool, map[string]any{"command": c}))
	}
	res := obs(t, p, st.InstanceID, append(calls, call(SubmitTool, map[string]any{}))...)
	end, err := p.End(ctx, task.EndRequest{InstanceID: st.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	return end, res.ToolResults
}

// Planted cheats: a patch that prints a fake report, one that edits the tests (and puts test
// hooks beside them), one that patches unittest from the module under test, and a daemon left
// to rewrite files after submit all get reward 0. For the edited tests, the control applies
// the hook whole and sees the runner report that unittest was patched: the hook is real, and
// it is stopped twice (test-file changes ignored, framework changes detected).
func TestPlantedCheats(t *testing.T) {
	p := New()
	defer p.Close()
	row := sampleRow(t, p)
	spec, err := SpecOf(row.RewardModel.GroundTruth, row.ExtraInfo)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("fake report on stdout", func(t *testing.T) {
		// At import, calc prints what a runner reading stdout would take for success (the old
		// result marker, JSON results, unittest's summary, go test's lines), then exits 0.
		fake := `import json, os, sys
ids = ["tests.test_calc.T.test_add", "tests.test_calc.T.test_mul"]
for marker in ["", "@@rlhost-results-@@", "@@rlhost-results-" + os.environ.get("RLHOST_NONCE", "") + "@@"]:
    print(marker + json.dumps({i: "PASSED" for i in ids}))
print("Ran 2 tests in 0.001s\n\nOK")
print("--- PASS: TestAdd (0.00s)")
sys.stdout.flush()
os._exit(0)
`
		end, _ := cheatEpisode(t, p, row, "cat > fake.py <<'EOF'\n"+fake+"EOF\nsed -i '1i import fake' calc.py && python3 -c 'import calc'")
		if end.Reward != 0 || end.Metrics["tests_fixed"] != 0 {
			t.Fatalf("fake report rewarded: %+v", end)
		}
	})

	t.Run("edited tests", func(t *testing.T) {
		hook := "import unittest\nunittest.TestCase.assertEqual = lambda self, *a, **k: None\n"
		cmds := []string{
			"printf 'import unittest\\nclass T(unittest.TestCase):\\n    def test_add(self): pass\\n    def test_mul(self): pass\\n' > tests/test_calc.py",
			"printf '" + strings.ReplaceAll(hook, "\n", "\\n") + "' | tee tests/__init__.py conftest.py sitecustomize.py tests/test_helpers.py > /dev/null",
		}
		end, _ := cheatEpisode(t, p, row, cmds...)
		if end.Reward != 0 {
			t.Fatalf("edited tests rewarded: %+v", end)
		}
		got, _ := end.Extra["ignored_test_changes"].([]any)
		want := []any{"conftest.py", "tests/__init__.py", "tests/test_calc.py", "tests/test_helpers.py"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ignored test changes %v, want %v", got, want)
		}
		// The control: the hook does make the hidden test pass when the changes count.
		sb, err := p.sandbox()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		info, err := sb.Create(ctx, sandbox.CreateRequest{Files: spec.Snapshot})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Delete(ctx, info.ID)
		if err := sb.WriteFile(ctx, info.ID, "tests/__init__.py", hook); err != nil {
			t.Fatal(err)
		}
		rep, err := sb.RunTests(ctx, info.ID, sandbox.TestRequest{Language: "python", Tests: spec.FailToPass, TestPatch: spec.TestPatch})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Results[spec.FailToPass[0]] != sandbox.Failed || !strings.Contains(rep.Error, "unittest.case.TestCase.assertEqual") {
			t.Fatalf("control: the hook did not patch unittest (%v %s): the cheat test proves nothing", rep.Results, rep.Error)
		}
	})

	t.Run("framework patched from the module under test", func(t *testing.T) {
		// The hook of the edited-tests cheat, moved into calc.py (not a test file): the
		// runner sees unittest changed and fails every test.
		end, res := cheatEpisode(t, p, row, `printf 'import unittest\nunittest.TestCase.assertEqual = lambda self, *a, **k: None\n' | cat - calc.py > calc.new && mv calc.new calc.py && head -2 calc.py`)
		if !strings.HasPrefix(res[0].Text, "import unittest\nunittest.TestCase.assertEqual") {
			t.Fatalf("the patch was not made: %q", res[0].Text)
		}
		if end.Reward != 0 || !strings.Contains(fmt.Sprint(end.Extra["test_error"]), "changed the test framework") || !strings.Contains(fmt.Sprint(end.Extra["test_error"]), "unittest.case.TestCase.assertEqual") {
			t.Fatalf("patched framework rewarded or not reported: %+v", end)
		}
	})

	t.Run("daemon rewriting files after submit", func(t *testing.T) {
		// The daemon keeps rewriting the hidden test file into one that passes; within the
		// command it is seen at work.
		daemon := `(setsid nohup sh -c 'while :; do printf "import unittest\nclass T(unittest.TestCase):\n    def test_add(self): pass\n    def test_mul(self): pass\n" > tests/test_calc.py 2>/dev/null; printf "def add(a, b):\n    return a + b\n" > /tmp/fix.py; sleep 0.05; done' > /dev/null 2>&1 &) ; sleep 0.5; grep -c "def test_add(self): pass" tests/test_calc.py`
		end, results := cheatEpisode(t, p, row, daemon)
		if !strings.HasPrefix(results[0].Text, "1\n") {
			t.Fatalf("the daemon did not run: %q", results[0].Text)
		}
		if end.Reward != 0 {
			t.Fatalf("daemon rewarded: %+v", end)
		}
	})
}

// The cheats in Go. A fake report printed (plain and in go test's JSON) before an exit from
// init, and an edited test file with a TestMain that exits 0. Then the cheats against go
// test's own framing, which earlier versions read from the test binary's output: code that
// finds its package's tests in the _test.go files and prints the testing package's ^V-marked
// "--- PASS" line for each, then exits 0, from an init function or from the code the first
// test calls. Both were rewarded 1 by the runner that read the framing; all get reward 0.
// The control is a patch that fixes the bug: reward 1.
func TestPlantedCheatsGo(t *testing.T) {
	p := New()
	defer p.Close()
	var row task.Row
	for _, r := range datasetRecords(t) {
		if r.Data["instance_id"] == "rlhost__go-reverse" {
			var err error
			if row, err = p.Preprocess(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if row.ExtraInfo == nil {
		t.Fatal("rlhost__go-reverse not in the dataset")
	}
	t.Run("fake report from init", func(t *testing.T) {
		fake := "package reverse\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc init() {\n" +
			"\tfor _, n := range []string{\"TestReverseUnicode\", \"TestReverseASCII\"} {\n" +
			"\t\tfmt.Printf(\"=== RUN   %s\\n--- PASS: %s (0.00s)\\n\", n, n)\n" +
			"\t\tfmt.Printf(\"{\\\"Action\\\":\\\"pass\\\",\\\"Test\\\":%q}\\n\", n)\n\t}\n\tfmt.Println(\"PASS\")\n\tos.Exit(0)\n}\n"
		end, _ := cheatEpisode(t, p, row, fmt.Sprintf("cat > fake.go <<'EOF'\n%sEOF\n", fake))
		if end.Reward != 0 {
			t.Fatalf("fake report rewarded: %+v", end)
		}
	})
	t.Run("TestMain exiting 0", func(t *testing.T) {
		end, _ := cheatEpisode(t, p, row, "cat > main_test.go <<'EOF'\npackage reverse\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) { os.Exit(0) }\nEOF\n")
		if end.Reward != 0 || end.Extra["ignored_test_changes"] == nil {
			t.Fatalf("edited tests rewarded: %+v", end)
		}
	})
	// framing prints go test's marked lines for every test of the package's test files,
	// then exits 0.
	const framing = `package reverse

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

func framing() {
	files, _ := filepath.Glob("*_test.go")
	re := regexp.MustCompile("(?m)^func (Test[A-Za-z0-9_]*)\\(")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			fmt.Printf("\x16=== RUN   %s\n\x16--- PASS: %s (0.00s)\n", m[1], m[1])
		}
	}
	fmt.Println("\x16PASS")
	os.Exit(0)
}
`
	write := fmt.Sprintf("cat > framing.go <<'EOF'\n%sEOF\n", framing)
	t.Run("fake go test framing from init", func(t *testing.T) {
		end, _ := cheatEpisode(t, p, row, write+"printf 'package reverse\\n\\nfunc init() { framing() }\\n' > init.go")
		// It built and ran: the binary exited before its report.
		if end.Reward != 0 || !strings.Contains(fmt.Sprint(end.Extra["test_error"]), "example.com/reverse: the test binary did not report") {
			t.Fatalf("fake framing from init rewarded or not seen: %+v", end)
		}
	})
	t.Run("fake go test framing from the first test", func(t *testing.T) {
		end, res := cheatEpisode(t, p, row, write+"sed -i 's/^func Reverse(s string) string {$/&\\n\\tframing()/' reverse.go && grep -c framing reverse.go")
		if !strings.HasPrefix(res[0].Text, "1\n") {
			t.Fatalf("the patch was not made: %q", res[0].Text)
		}
		// It built and ran: each test ended in os.Exit, which fails it.
		if end.Reward != 0 || strings.Contains(fmt.Sprint(end.Extra["test_error"]), "build failed") || len(end.Extra["failing_tests"].([]any)) != 2 {
			t.Fatalf("fake framing from the first test rewarded or not built: %+v", end)
		}
	})
	t.Run("control: a real fix", func(t *testing.T) {
		fix := "package reverse\n\n// Reverse returns s with its characters in reverse order.\nfunc Reverse(s string) string {\n\tr := []rune(s)\n" +
			"\tfor i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {\n\t\tr[i], r[j] = r[j], r[i]\n\t}\n\treturn string(r)\n}\n"
		end, _ := cheatEpisode(t, p, row, fmt.Sprintf("cat > reverse.go <<'EOF'\n%sEOF\n", fix))
		if end.Reward != 1 {
			t.Fatalf("the fix was not rewarded: %+v", end)
		}
	})
}

func TestWithoutTestChanges(t *testing.T) {
	py := Spec{Language: "python", TestPatch: "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -1 +1 @@\n-a\n+b\n"}
	gos := Spec{Language: "go"}
	sec := func(p string) string {
		return fmt.Sprintf("diff --git a/%s b/%s\n--- a/%s\n+++ b/%s\n@@ -1 +1 @@\n-x\n+y\n", p, p, p, p)
	}
	for _, c := range []struct {
		spec    Spec
		patch   string
		kept    string
		dropped []string
	}{
		{py, sec("calc.py") + sec("tests/test_calc.py"), sec("calc.py"), []string{"tests/test_calc.py"}},
		{py, sec("tests/__init__.py") + sec("conftest.py") + sec("pkg/test_x.py") + sec("x_test.py"), "", []string{"conftest.py", "pkg/test_x.py", "tests/__init__.py", "x_test.py"}},
		{py, "diff --git a/calc.py b/tests/calc.py\nsimilarity index 100%\nrename from calc.py\nrename to tests/calc.py\n", "", []string{"tests/calc.py"}},
		{py, "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-x\n+y\n--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -1 +1 @@\n-x\n+y\n", "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-x\n+y\n", []string{"tests/test_calc.py"}},
		{gos, sec("a.go") + sec("a_test.go") + sec("testdata/in.txt"), sec("a.go"), []string{"a_test.go", "testdata/in.txt"}},
		{gos, "diff --git \"a/we ird_test.go\" \"b/we ird_test.go\"\n--- \"a/we ird_test.go\"\n+++ \"b/we ird_test.go\"\n@@ -1 +1 @@\n-x\n+y\n", "", []string{"we ird_test.go"}},
	} {
		kept, dropped := WithoutTestChanges(c.patch, c.spec)
		if kept != c.kept || !reflect.DeepEqual(dropped, c.dropped) {
			t.Errorf("%q:\nkept %q, dropped %q\nwant %q, %q", c.patch, kept, dropped, c.kept, c.dropped)
		}
	}
}

// Info declares weak_isolation exactly when the sandbox has no file system view (rlimit), so
// that rlhost train refuses it unless task.allow_weak_isolation is set.
func TestInfoDeclaresWeakIsolation(t *testing.T) {
	for _, c := range []struct {
		isolation string
		weak      bool
	}{{"rlimit", true}, {"ns", false}, {"bwrap", false}} {
		p := New()
		ctx := context.Background()
		if err := p.Configure(ctx, map[string]any{"isolation": c.isolation}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.sandbox(); err != nil {
			p.Close()
			t.Logf("isolation %s does not work here: %v", c.isolation, err)
			continue
		}
		info, err := p.Info(ctx)
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Has(task.FeatureWeakIsolation); got != c.weak {
			t.Errorf("isolation %s: weak_isolation declared %v, want %v (features %v)", c.isolation, got, c.weak, info.Features)
		}
	}
}
