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

// The same three cheats in Go: a fake report printed (plain and in go test's JSON) before an
// exit from init, an edited test file with a TestMain that exits 0, both reward 0.
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
	fake := "package reverse\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc init() {\n" +
		"\tfor _, n := range []string{\"TestReverseUnicode\", \"TestReverseASCII\"} {\n" +
		"\t\tfmt.Printf(\"=== RUN   %s\\n--- PASS: %s (0.00s)\\n\", n, n)\n" +
		"\t\tfmt.Printf(\"{\\\"Action\\\":\\\"pass\\\",\\\"Test\\\":%q}\\n\", n)\n\t}\n\tfmt.Println(\"PASS\")\n\tos.Exit(0)\n}\n"
	end, _ := cheatEpisode(t, p, row, fmt.Sprintf("cat > fake.go <<'EOF'\n%sEOF\n", fake))
	if end.Reward != 0 {
		t.Fatalf("fake report rewarded: %+v", end)
	}
	end, _ = cheatEpisode(t, p, row, "cat > main_test.go <<'EOF'\npackage reverse\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) { os.Exit(0) }\nEOF\n")
	if end.Reward != 0 || end.Extra["ignored_test_changes"] == nil {
		t.Fatalf("edited tests rewarded: %+v", end)
	}
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
