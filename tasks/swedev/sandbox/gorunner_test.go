package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goRunnerRepo has a package for each thing the Go runner must get right; want is what each
// hidden test must end as.
var goRunnerRepo = map[string]string{
	"go.mod": "module example.com/r\n\ngo 1.21\n",
	// Internal tests; TestDup is defined here and in d, where it fails.
	"a/a.go":      "package a\n\nfunc Abs(x int) int {\n\tif x < 0 {\n\t\treturn x\n\t}\n\treturn x\n}\n",
	"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestAbsPos(t *testing.T) {\n\tif Abs(2) != 2 {\n\t\tt.Fatal()\n\t}\n}\n\nfunc TestAbsNeg(t *testing.T) {\n\tif Abs(-2) != 2 {\n\t\tt.Fatal(\"Abs(-2) is not 2\")\n\t}\n}\n\nfunc TestDup(t *testing.T) {}\n",
	// Only external test files.
	"b/b.go":      "package b\n\nfunc Two() int { return 2 }\n",
	"b/b_test.go": "package b_test\n\nimport (\n\t\"testing\"\n\n\t\"example.com/r/b\"\n)\n\nfunc TestB(t *testing.T) {\n\tif b.Two() != 2 {\n\t\tt.Fatal()\n\t}\n}\n",
	// Internal and external tests, a TestMain, subtests named as hidden tests.
	"c/c.go":         "package c\n\nfunc Inc(x int) int { return x + 1 }\n",
	"c/main_test.go": "package c\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) { os.Exit(m.Run()) }\n\nfunc TestCIn(t *testing.T) {\n\tif Inc(1) != 2 {\n\t\tt.Fatal()\n\t}\n}\n",
	"c/x_test.go": "package c_test\n\nimport (\n\t\"testing\"\n\n\t\"example.com/r/c\"\n)\n\nfunc TestCEx(t *testing.T) {\n\tt.Run(\"sub\", func(t *testing.T) {\n\t\tif c.Inc(2) != 3 {\n\t\t\tt.Fatal()\n\t\t}\n\t})\n}\n\n" +
		"func TestCTable(t *testing.T) {\n\tt.Run(\"good\", func(t *testing.T) {})\n\tt.Run(\"bad\", func(t *testing.T) { t.Fatal(\"bad\") })\n}\n",
	// A panic, parallel tests (one failing after the others returned), a skip.
	"d/d.go": "package d\n",
	"d/d_test.go": "package d\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestDPanic(t *testing.T) { panic(\"boom\") }\n\nfunc TestDOK(t *testing.T) {}\n\n" +
		"func TestDParallel(t *testing.T) {\n\tt.Parallel()\n\ttime.Sleep(50 * time.Millisecond)\n}\n\nfunc TestDParallelFail(t *testing.T) {\n\tt.Parallel()\n\ttime.Sleep(100 * time.Millisecond)\n\tt.Error(\"late\")\n}\n\n" +
		"func TestDSkip(t *testing.T) { t.Skip(\"not here\") }\n\nfunc TestDup(t *testing.T) { t.Fatal(\"dup\") }\n",
	// A build failure.
	"e/e.go":      "package e\n\nfunc (\n",
	"e/e_test.go": "package e\n\nimport \"testing\"\n\nfunc TestE(t *testing.T) {}\n",
	// Code under test that prints go test's framing for its package's tests, then exits 0
	// from an init function.
	"f/f.go":      "package f\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc init() {\n\tfmt.Print(\"\\x16=== RUN   TestF\\n\\x16--- PASS: TestF (0.00s)\\nPASS\\n\")\n\tos.Exit(0)\n}\n",
	"f/f_test.go": "package f\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) {}\n",
	// Code under test that, during the test, writes a report without the nonce to every
	// descriptor it has (the report's, moved, among them), then exits 0 at once.
	"g/g.go":      "package g\n\nimport \"syscall\"\n\nfunc G() {\n\tfor fd := 3; fd < 200; fd++ {\n\t\tsyscall.Write(fd, []byte(`{\"results\":{\"TestG\":\"PASSED\"}}`))\n\t}\n\tsyscall.Exit(0)\n}\n",
	"g/g_test.go": "package g\n\nimport \"testing\"\n\nfunc TestG(t *testing.T) { G() }\n",
	// A TestMain that exits 0 whatever m.Run said, and one that exits 1 after every test
	// passed: the exit status disagrees with the report.
	"i/i_test.go": "package i\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tm.Run()\n\tos.Exit(0)\n}\n\nfunc TestIPass(t *testing.T) {}\n\nfunc TestIFail(t *testing.T) { t.Fatal() }\n",
	"j/j_test.go": "package j\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tm.Run()\n\tos.Exit(1)\n}\n\nfunc TestJ(t *testing.T) {}\n",
	// A process left running by one package's test (a new session, so not of its process
	// group), which would make another package's test pass during its run.
	"k/k_test.go": "package k\n\nimport (\n\t\"os/exec\"\n\t\"syscall\"\n\t\"testing\"\n)\n\nfunc TestK(t *testing.T) {\n\tcmd := exec.Command(\"/bin/sh\", \"-c\", \"sleep 0.5; touch ../l/flag\")\n\tcmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}\n\tif err := cmd.Start(); err != nil {\n\t\tt.Fatal(err)\n\t}\n}\n",
	"l/l_test.go": "package l\n\nimport (\n\t\"os\"\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestL(t *testing.T) {\n\ttime.Sleep(1500 * time.Millisecond)\n\tif _, err := os.Stat(\"flag\"); err != nil {\n\t\tt.Fatal(\"no flag from the process package k left\")\n\t}\n}\n",
}

var goRunnerWant = map[string]string{
	"TestAbsPos": Passed, "TestAbsNeg": Failed, "TestDup": Failed,
	"TestB":   Passed,
	"TestCIn": Passed, "TestCEx/sub": Passed, "TestCTable/good": Failed, "TestCTable/bad": Failed,
	"TestDPanic": Failed, "TestDOK": Passed, "TestDParallel": Passed, "TestDParallelFail": Failed, "TestDSkip": Failed,
	"TestE":     Failed,
	"TestF":     Failed,
	"TestG":     Failed,
	"TestIPass": Failed, "TestIFail": Failed,
	"TestJ": Failed,
	"TestK": Passed, "TestL": Failed,
	"TestMissing": Failed,
}

// The Go runner in every isolation mode that runs here: results only from the generated
// test's report, checked against the exit status; the package's failures stay its own.
func TestRunTestsGo(t *testing.T) {
	eachIsolation(t, func(t *testing.T, mode string) {
		m := newManager(t, Config{Isolation: mode})
		ctx := context.Background()
		id := create(t, m, goRunnerRepo)
		var tests []string
		for n := range goRunnerWant {
			tests = append(tests, n)
		}
		rep, err := m.RunTests(ctx, id, TestRequest{Language: "go", Tests: tests})
		if err != nil {
			t.Fatal(err)
		}
		for n, want := range goRunnerWant {
			if rep.Results[n] != want {
				t.Errorf("%s: %s, want %s", n, rep.Results[n], want)
			}
		}
		for _, e := range []string{"example.com/r/e: build failed", "example.com/r/f: the test binary did not report",
			"example.com/r/g: the test binary's report is unreadable or not the runner's (exit status 0)", "not defined in any package's test files: TestMissing",
			"example.com/r/i: the test binary exited with status 0 after reporting a failed test",
			"example.com/r/j: the test binary exited with status 1 after reporting every test passed"} {
			if !strings.Contains(rep.Error, e) {
				t.Errorf("error %q lacks %q", rep.Error, e)
			}
		}
		// The tests' output is the command's output: the failure message, the panic, and
		// the framing f printed (output, not a result).
		for _, o := range []string{"Abs(-2) is not 2", "panic: boom", "--- PASS: TestF", "no flag from the process package k left"} {
			if !strings.Contains(rep.Output, o) {
				t.Errorf("output lacks %q", o)
			}
		}
		if t.Failed() {
			t.Logf("results %v\nerror %s\noutput:\n%s", rep.Results, rep.Error, rep.Output)
		}
		// The generated files are gone, the tree is as it was.
		if d, err := m.Diff(ctx, id); err != nil || d != "" {
			t.Errorf("the run changed the tree (%v):\n%s", err, d)
		}
	})
}

// A package that hangs until the time limit fails its tests; the packages that reported
// before it keep their results, as the framing before a kill counted in earlier versions.
func TestRunTestsGoTimeLimit(t *testing.T) {
	m := newManager(t, Config{})
	ctx := context.Background()
	id := create(t, m, map[string]string{
		"go.mod":      "module example.com/h\n\ngo 1.21\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
		"z/z_test.go": "package z\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestZ(t *testing.T) { time.Sleep(time.Hour) }\n",
	})
	wall := 25 * time.Second
	rep, err := m.RunTests(ctx, id, TestRequest{Language: "go", Tests: []string{"TestA", "TestZ"}, Limits: Limits{Wall: wall, CPU: wall}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results["TestA"] != Passed || rep.Results["TestZ"] != Failed || !strings.Contains(rep.Error, fmt.Sprintf("did not finish within %s", wall)) {
		t.Fatalf("results %v, error %q\n%s", rep.Results, rep.Error, rep.Output)
	}
}

// The runner's binary is written into the instance's temporary folder without following what
// the instance may have left at its name.
func TestPlaceGoRunnerNoFollow(t *testing.T) {
	m := newManager(t, Config{})
	id := create(t, m, map[string]string{"a.txt": "a\n"})
	in, err := m.get(id)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(target, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(in.tmp, goRunnerFile)); err != nil {
		t.Fatal(err)
	}
	if err := m.placeGoRunner(id, []byte("binary")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "host\n" {
		t.Fatalf("the link was followed: the host file holds %q", b)
	}
	st, err := os.Lstat(filepath.Join(in.tmp, goRunnerFile))
	if err != nil || !st.Mode().IsRegular() {
		t.Fatalf("placed: %v %v", st, err)
	}
}
