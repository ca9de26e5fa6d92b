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

// Paths from requests never lead out of the working tree or into .git.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a.py", "../x", "/etc/passwd", "a/../../b", ".git/config", "./a", "a/./b/../c", "", ".", "a\x00b", ".gitignore"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := cleanPath(p)
		if err != nil {
			return
		}
		if strings.HasPrefix(c, "/") || c == ".." || strings.HasPrefix(c, "../") || c == ".git" || strings.HasPrefix(c, ".git/") || strings.ContainsRune(c, 0) {
			t.Fatalf("cleanPath(%q) = %q", p, c)
		}
		if j := filepath.Join("/w", c); !strings.HasPrefix(j, "/w/") {
			t.Fatalf("cleanPath(%q) = %q joins to %q", p, c, j)
		}
	})
}

// patchPaths and PatchStats take any text.
func FuzzPatchPaths(f *testing.F) {
	f.Add("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	f.Add("+++ b/../../etc/passwd\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range patchPaths(s) {
			if strings.Contains(p, "\n") {
				t.Fatalf("path with a newline: %q", p)
			}
		}
		if files, added, removed := PatchStats(s); files < 0 || added < 0 || removed < 0 {
			t.Fatal("negative counts")
		}
	})
}

// A Manager removes the working trees a dead Manager left behind.
func TestStaleRootsRemoved(t *testing.T) {
	root, err := os.MkdirTemp("", "rlhost-sandbox-test-") // t.TempDir's parent is closed to other uids
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	stale := filepath.Join(root, "999999999-deadbeef")
	if err := os.MkdirAll(filepath.Join(stale, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Config{Root: root})
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale tree kept: %v", err)
	}
	_ = m
}

// Delete does not wait for a running command's time limit.
func TestDeleteKillsRunningCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs the per-instance uid (root)")
	}
	m := newManager(t, Config{})
	id := create(t, m, pyRepo)
	done := make(chan ExecResult, 1)
	go func() {
		r, _ := m.Exec(context.Background(), id, ExecRequest{Command: "sleep 50"})
		done <- r
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := m.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Delete took %s", d)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the command still runs after Delete")
	}
}

// A report is the last line of JSON holding results: the Python runner's one object, the Go
// runner's line per package (each superseding the last), a line cut short by a kill skipped.
func TestParseReport(t *testing.T) {
	for _, c := range []struct {
		rep, want, err string
		ok             bool
	}{
		{`{"results": {"a": "PASSED"}, "error": ""}`, "map[a:PASSED]", "", true},
		{"{\"results\":{\"a\":\"FAILED\"}}\n{\"results\":{\"a\":\"PASSED\"},\"error\":\"x: build failed\"}\n", "map[a:PASSED]", "x: build failed", true},
		{"{\"results\":{\"a\":\"FAILED\"}}\n{\"results\":{\"a\":\"PAS", "map[a:FAILED]", "", true},
		{"{\"results\":{\"a\":\"FAILED\"}}\n{\"error\":\"no results\"}\n", "map[a:FAILED]", "", true},
		{"", "map[]", "", false},
		{"--- PASS: a\n", "map[]", "", false},
	} {
		got, msg, ok := parseReport([]byte(c.rep))
		if fmt.Sprint(got) != c.want || msg != c.err || ok != c.ok {
			t.Errorf("%q: %v %q %v; want %s %q %v", c.rep, got, msg, ok, c.want, c.err, c.ok)
		}
	}
}

// parseReport takes any bytes.
func FuzzParseReport(f *testing.F) {
	f.Add([]byte("{\"results\":{\"a\":\"PASSED\"}}\n{\"results\":{\"a\":\"FAI"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, _, ok := parseReport(b); ok != (got != nil) {
			t.Fatalf("%q: ok %v with results %v", b, ok, got)
		}
	})
}
