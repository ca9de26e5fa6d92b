package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	t.Logf("isolation: %s", m.Isolation())
	return m
}

// eachIsolation runs f as a subtest for each isolation mode, skipping the
// modes that do not work here (New fails).
func eachIsolation(t *testing.T, f func(t *testing.T, mode string)) {
	for _, mode := range []string{"bwrap", "ns", "rlimit"} {
		t.Run(mode, func(t *testing.T) {
			m, err := New(Config{Isolation: mode})
			if err != nil {
				t.Skipf("isolation %s does not work here: %v", mode, err)
			}
			m.Close()
			f(t, mode)
		})
	}
}

var pyRepo = map[string]string{
	"calc.py":            "def add(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a * b\n",
	"tests/__init__.py":  "",
	"tests/test_calc.py": "import unittest\nfrom calc import add, mul\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n",
}

func create(t *testing.T, m *Manager, files map[string]string) string {
	t.Helper()
	info, err := m.Create(context.Background(), CreateRequest{Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

func run(t *testing.T, m *Manager, id, command string, l Limits) ExecResult {
	t.Helper()
	res, err := m.Exec(context.Background(), id, ExecRequest{Command: command, Limits: l})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return res
}

func TestCreateExecDelete(t *testing.T) {
	m := newManager(t, Config{})
	info, err := m.Create(context.Background(), CreateRequest{Files: pyRepo})
	if err != nil {
		t.Fatal(err)
	}
	want, err := BaseCommit(pyRepo)
	if err != nil || info.BaseCommit != want {
		t.Fatalf("base commit %s, BaseCommit gives %s (%v)", info.BaseCommit, want, err)
	}
	res := run(t, m, info.ID, "cat calc.py | head -1; echo err >&2; exit 3", Limits{})
	if res.Stdout != "def add(a, b):\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.Error != "" {
		t.Fatalf("got %+v", res)
	}
	if err := m.WriteFile(context.Background(), info.ID, "pkg/new.txt", "hello"); err != nil {
		t.Fatal(err)
	}
	if got, err := m.ReadFile(context.Background(), info.ID, "pkg/new.txt", 0); err != nil || got != "hello" {
		t.Fatalf("read back %q, %v", got, err)
	}
	if res := run(t, m, info.ID, "echo more >> pkg/new.txt && cat pkg/new.txt", Limits{}); res.Stdout != "hellomore\n" {
		t.Fatalf("the command cannot edit a written file: %+v", res)
	}
	diff, err := m.Diff(context.Background(), info.ID)
	if err != nil || !strings.Contains(diff, "+++ b/pkg/new.txt") {
		t.Fatalf("diff %q, %v", diff, err)
	}
	dir := filepath.Join(m.Root(), fmt.Sprintf("%d-%s", os.Getpid(), info.ID))
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("instance directory left behind: %v", err)
	}
	if _, err := m.Exec(context.Background(), info.ID, ExecRequest{Command: "true"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exec after delete: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	m := newManager(t, Config{})
	ctx := context.Background()
	for _, files := range []map[string]string{nil, {"../x": "a"}, {"/etc/x": "a"}, {".git/config": "a"}, {"a\x00b": "x"}} {
		if _, err := m.Create(ctx, CreateRequest{Files: files}); !errors.Is(err, ErrBadInput) {
			t.Errorf("files %q: got %v, want a bad-input error", files, err)
		}
	}
	if _, err := m.Create(ctx, CreateRequest{Files: pyRepo, BaseCommit: "0123"}); err == nil || !strings.Contains(err.Error(), "base_commit 0123") {
		t.Errorf("wrong base commit: %v", err)
	}
	id := create(t, m, pyRepo)
	if err := os.Symlink("/etc", filepath.Join(m.Root(), fmt.Sprintf("%d-%s", os.Getpid(), id), "work", "etc")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../../x", "/etc/passwd", "etc/passwd", "missing.py", "tests", ""} {
		if _, err := m.ReadFile(ctx, id, p, 0); !errors.Is(err, ErrBadInput) {
			t.Errorf("read %q: got %v, want a bad-input error", p, err)
		}
	}
	for _, p := range []string{"../../x", "etc/evil", ".git/hooks/pre-commit"} {
		if err := m.WriteFile(ctx, id, p, "x"); !errors.Is(err, ErrBadInput) {
			t.Errorf("write %q: got %v, want a bad-input error", p, err)
		}
	}
	if _, err := m.Exec(ctx, id, ExecRequest{Command: "true", Limits: Limits{Wall: time.Hour}}); !errors.Is(err, ErrBadInput) {
		t.Errorf("a limit over the maximum: %v", err)
	}
	if _, err := m.Exec(ctx, id, ExecRequest{Command: "  "}); !errors.Is(err, ErrBadInput) {
		t.Errorf("empty command: %v", err)
	}
	if _, err := m.RunTests(ctx, id, TestRequest{Language: "cobol", Tests: []string{"x"}}); !errors.Is(err, ErrBadInput) {
		t.Errorf("unknown language: %v", err)
	}
	if _, err := m.RunTests(ctx, id, TestRequest{Language: "python", Tests: []string{"x; rm -rf /"}}); !errors.Is(err, ErrBadInput) {
		t.Errorf("shell in a test id: %v", err)
	}
}

func TestRunTests(t *testing.T) {
	m := newManager(t, Config{})
	ctx := context.Background()
	id := create(t, m, pyRepo)
	tests := []string{"tests.test_calc.T.test_add", "tests.test_calc.T.test_mul", "tests.test_calc.T.test_missing"}
	rep, err := m.RunTests(ctx, id, TestRequest{Language: "python", Tests: tests})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{tests[0]: Failed, tests[1]: Passed, tests[2]: Failed}
	if fmt.Sprint(rep.Results) != fmt.Sprint(want) {
		t.Fatalf("results %v, want %v\n%s", rep.Results, want, rep.Output)
	}
	// A test patch replaces what the model did to the test files.
	if err := m.WriteFile(ctx, id, "tests/test_calc.py", "import unittest\nclass T(unittest.TestCase):\n    def test_add(self): pass\n"); err != nil {
		t.Fatal(err)
	}
	patch := "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -7,2 +7,4 @@\n     def test_mul(self):\n         self.assertEqual(mul(2, 3), 6)\n+    def test_zero(self):\n+        self.assertEqual(mul(0, 5), 0)\n"
	rep, err = m.RunTests(ctx, id, TestRequest{Language: "python", Tests: []string{"tests.test_calc.T.test_add", "tests.test_calc.T.test_zero"}, TestPatch: patch})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results["tests.test_calc.T.test_add"] != Failed || rep.Results["tests.test_calc.T.test_zero"] != Passed {
		t.Fatalf("after the test patch: %v %s\n%s", rep.Results, rep.Error, rep.Output)
	}
	if _, err := m.RunTests(ctx, id, TestRequest{Language: "python", Tests: []string{"tests.test_calc.T.test_add"}, TestPatch: "not a patch"}); err != nil {
		t.Fatal(err)
	}
	// A test that ends the runner's process: no report, and the error says how it ended.
	if err := m.WriteFile(ctx, id, "tests/test_die.py", "import os, unittest\nclass T(unittest.TestCase):\n    def test_die(self): os._exit(3)\n"); err != nil {
		t.Fatal(err)
	}
	rep, err = m.RunTests(ctx, id, TestRequest{Language: "python", Tests: []string{"tests.test_die.T.test_die"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results["tests.test_die.T.test_die"] != Failed || !strings.Contains(rep.Error, "did not report (exit status 3 after ") {
		t.Fatalf("a test that exits the runner: %v %q", rep.Results, rep.Error)
	}
	// Go.
	goRepo := map[string]string{"go.mod": "module example.com/m\n\ngo 1.21\n",
		"m.go":      "package m\n\nfunc Abs(x int) int {\n\tif x < 0 {\n\t\treturn x\n\t}\n\treturn x\n}\n",
		"m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestAbsPos(t *testing.T) {\n\tif Abs(2) != 2 {\n\t\tt.Fatal()\n\t}\n}\n\nfunc TestAbsNeg(t *testing.T) {\n\tif Abs(-2) != 2 {\n\t\tt.Fatal(\"Abs(-2)\")\n\t}\n}\n"}
	gid := create(t, m, goRepo)
	rep, err = m.RunTests(ctx, gid, TestRequest{Language: "go", Tests: []string{"TestAbsPos", "TestAbsNeg"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results["TestAbsPos"] != Passed || rep.Results["TestAbsNeg"] != Failed {
		t.Fatalf("go results %v %s\n%s", rep.Results, rep.Error, rep.Output)
	}
	if m.goRunner.bin == nil {
		t.Fatalf("the Manager did not build the Go runner: %v", m.goRunner.err)
	}
	// Where the Manager cannot build the runner, the instance builds it from its source.
	m.goRunner.bin, m.goRunner.err = nil, errors.New("no go command here")
	rep, err = m.RunTests(ctx, gid, TestRequest{Language: "go", Tests: []string{"TestAbsPos", "TestAbsNeg"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results["TestAbsPos"] != Passed || rep.Results["TestAbsNeg"] != Failed {
		t.Fatalf("go results, runner built in the instance: %v %s\n%s", rep.Results, rep.Error, rep.Output)
	}
}

// The faults of the issue: each is contained, reported, and leaves nothing behind.
func TestFaultsContained(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fork bombs and floods")
	}
	eachIsolation(t, faultsContained)
}

func faultsContained(t *testing.T, mode string) {
	root, err := os.MkdirTemp("", "rlhost-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	m := newManager(t, Config{Root: root, Isolation: mode, Defaults: Limits{Wall: 5 * time.Second, CPU: 3 * time.Second, Memory: 1 << 30, Procs: 64,
		FileSize: 1 << 20, Output: 4 << 10, OutputAbort: 1 << 20, Disk: 4 << 20}})
	ctx := context.Background()
	id := create(t, m, pyRepo)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cases := []struct {
		name, cmd string
		check     func(ExecResult) error
	}{
		{"loop forever", "while :; do :; done", func(r ExecResult) error {
			if r.Killed != "wall" && r.Killed != "cpu" {
				return fmt.Errorf("not killed by a time limit")
			}
			return nil
		}},
		{"sleep past the wall clock", "sleep 100", func(r ExecResult) error {
			if r.Killed != "wall" || !strings.Contains(r.Error, "did not finish within 5s") {
				return fmt.Errorf("not killed at the wall clock")
			}
			return nil
		}},
		{"fork bomb", "bomb() { bomb | bomb & }; bomb; sleep 2; echo survived", func(r ExecResult) error {
			return nil // what matters is below: nothing of it is left and the next command runs
		}},
		{"print gigabytes", "yes 0123456789012345678901234567890123456789", func(r ExecResult) error {
			if r.Killed != "output" || !r.StdoutTruncated || len(r.Stdout) != 4<<10 {
				return fmt.Errorf("output not cut and aborted")
			}
			return nil
		}},
		{"fill the disk with one file", "head -c 100000000 /dev/zero > big; echo rc=$?", func(r ExecResult) error {
			if !strings.Contains(r.Stdout+r.Stderr+r.Error, "File size limit") && !strings.Contains(r.Error, "size limit") {
				return fmt.Errorf("file size limit not reported")
			}
			return nil
		}},
		{"fill the disk with many files", "for i in $(seq 10); do head -c 900000 /dev/zero > f$i; done", func(r ExecResult) error {
			if !strings.Contains(r.Error, "over the limit") {
				return fmt.Errorf("disk quota not reported")
			}
			return nil
		}},
		{"network", fmt.Sprintf("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", %d), timeout=2); print(\"connected\")'", ln.Addr().(*net.TCPAddr).Port), func(r ExecResult) error {
			if strings.Contains(r.Stdout, "connected") || r.ExitCode == 0 {
				return fmt.Errorf("reached the host's network")
			}
			return nil
		}},
		{"escape the working tree", "echo x > /etc/rlhost-escape; echo x > ../../rlhost-escape; echo x > $HOME/../../rlhost-escape2; ls /root", func(r ExecResult) error {
			for _, p := range []string{"/etc/rlhost-escape", filepath.Join(m.Root(), "rlhost-escape")} {
				if _, err := os.Stat(p); err == nil {
					os.Remove(p)
					return fmt.Errorf("wrote %s", p)
				}
			}
			if r.ExitCode == 0 {
				return fmt.Errorf("listed /root")
			}
			return nil
		}},
		{"memory", "python3 -c 'x = bytearray(3 << 30); print(\"allocated\")'", func(r ExecResult) error {
			if strings.Contains(r.Stdout, "allocated") || !strings.Contains(r.Stderr, "MemoryError") {
				return fmt.Errorf("allocated past the memory limit")
			}
			return nil
		}},
		{"background process outliving the command", "(sleep 300 &) ; echo started", func(r ExecResult) error { return nil }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "escape the working tree" && os.Geteuid() != 0 {
				t.Skip("not root: the command runs as this user")
			}
			if c.name == "network" && mode == "rlimit" {
				t.Skip("rlimit isolation has no network namespace (docs/swedev.md)")
			}
			start := time.Now()
			r := run(t, m, id, c.cmd, Limits{})
			if err := c.check(r); err != nil {
				t.Errorf("%v: %+v", err, short(r))
			}
			if time.Since(start) > 15*time.Second {
				t.Errorf("took %s", time.Since(start))
			}
			in, _ := m.get(id)
			if in.uid >= 0 {
				if n := countUID(in.uid); n != 0 {
					t.Errorf("%d processes of the instance left after the command", n)
				}
			}
			next := run(t, m, id, "echo ok", Limits{})
			if next.Stdout != "ok\n" {
				t.Errorf("the instance does not work after the fault: %+v", short(next))
			}
		})
	}
	in, _ := m.get(id)
	if err := m.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if in.uid >= 0 {
		if n := countUID(in.uid); n != 0 {
			t.Errorf("%d processes left after delete", n)
		}
	}
	ents, _ := os.ReadDir(m.Root())
	for _, e := range ents {
		if e.Name() != "gocache" {
			t.Errorf("left in the root after delete: %s", e.Name())
		}
	}
}

func short(r ExecResult) ExecResult {
	if len(r.Stdout) > 200 {
		r.Stdout = r.Stdout[:200] + "..."
	}
	if len(r.Stderr) > 200 {
		r.Stderr = r.Stderr[:200] + "..."
	}
	return r
}

func countUID(uid int) int { return countUIDStat(uid) }

func TestLeaseReclaims(t *testing.T) {
	m := newManager(t, Config{Lease: 1500 * time.Millisecond})
	id := create(t, m, pyRepo)
	time.Sleep(800 * time.Millisecond)
	run(t, m, id, "true", Limits{}) // renews
	time.Sleep(1000 * time.Millisecond)
	if m.Len() != 1 {
		t.Fatal("a renewed lease ran out")
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if m.Len() != 0 {
		t.Fatal("the instance outlived its lease")
	}
	if _, err := m.Exec(context.Background(), id, ExecRequest{Command: "true"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exec after the lease: %v", err)
	}
}

// Many instances on few slots: every command runs, in about the order it came.
func TestQueueNoStarvation(t *testing.T) {
	m := newManager(t, Config{Slots: 2})
	const n = 16
	ids := make([]string, n)
	for i := range ids {
		ids[i] = create(t, m, pyRepo)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := m.Exec(context.Background(), id, ExecRequest{Command: fmt.Sprintf("sleep 0.2; echo %d", i)})
			if err != nil || r.Stdout != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("instance %d: %+v %v", i, r, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m.Len() != n {
		t.Fatalf("%d instances alive, want %d", m.Len(), n)
	}
}
