package chatservertest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Skip and Fatal only record how the test would have ended.
type recorder struct {
	testing.TB
	ended string // "skip: MSG" or "fatal: MSG"
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.ended = "skip: " + fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.ended = "fatal: " + fmt.Sprint(args...)
	runtime.Goexit()
}

// modelPath runs ModelPath on a recorder in its own goroutine (Skip and Fatal end it).
func modelPath(t *testing.T) (string, string) {
	r := &recorder{TB: t}
	var p string
	done := make(chan struct{})
	go func() {
		defer close(done)
		p = ModelPath(r)
	}()
	<-done
	return p, r.ended
}

func TestModelPath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RLHOST_MODEL", file)
	if p, ended := modelPath(t); p != file || ended != "" {
		t.Errorf("RLHOST_MODEL=%s: %q, %q; want the file", file, p, ended)
	}

	missing := filepath.Join(t.TempDir(), "nothing.gguf")
	t.Setenv("RLHOST_MODEL", missing)
	t.Setenv("CI", "")
	if p, ended := modelPath(t); p != "" || !strings.HasPrefix(ended, "skip: ") || !strings.Contains(ended, missing) {
		t.Errorf("a missing RLHOST_MODEL outside CI: %q, %q; want a skip naming %s", p, ended, missing)
	}
	t.Setenv("CI", "true")
	if p, ended := modelPath(t); p != "" || !strings.HasPrefix(ended, "fatal: ") || !strings.Contains(ended, missing) {
		t.Errorf("a missing RLHOST_MODEL under CI: %q, %q; want a failure naming %s", p, ended, missing)
	}
}

func TestModuleRoot(t *testing.T) {
	root := moduleRoot()
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.Contains(string(b), "module github.com/rlhost/rlhost\n") {
		t.Fatalf("moduleRoot() = %q (go.mod: %v); want the host module's folder", root, err)
	}
}
