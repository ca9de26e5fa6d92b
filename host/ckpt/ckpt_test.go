package ckpt

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestStepsCommitPrune(t *testing.T) {
	run := t.TempDir()
	if s := Steps(run); len(s) != 0 {
		t.Fatalf("no checkpoints folder: steps %v", s)
	}
	for _, step := range []int{10, 2, 5} {
		tmp := StepDir(run, step) + ".tmp"
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "state.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Commit(tmp, StepDir(run, step)); err != nil {
			t.Fatal(err)
		}
	}
	// A partial checkpoint, a file and a stray folder are not checkpoints.
	os.MkdirAll(StepDir(run, 20)+".tmp", 0o755)
	os.WriteFile(filepath.Join(Dir(run), "global_step_30"), nil, 0o644)
	os.MkdirAll(filepath.Join(Dir(run), "global_step_x"), 0o755)
	if s := Steps(run); !reflect.DeepEqual(s, []int{2, 5, 10}) {
		t.Fatalf("steps %v, want [2 5 10] (numeric order, complete folders only)", s)
	}
	Prune(run, 0)
	if s := Steps(run); len(s) != 3 {
		t.Fatalf("keep 0 must keep all: %v", s)
	}
	Prune(run, 2)
	if s := Steps(run); !reflect.DeepEqual(s, []int{5, 10}) {
		t.Fatalf("after Prune(2): %v, want [5 10]", s)
	}
	// Commit replaces an older checkpoint of the same step.
	tmp := StepDir(run, 10) + ".tmp"
	os.MkdirAll(tmp, 0o755)
	os.WriteFile(filepath.Join(tmp, "new"), nil, 0o644)
	if err := Commit(tmp, StepDir(run, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(StepDir(run, 10), "state.json")); !os.IsNotExist(err) {
		t.Fatal("Commit kept the replaced checkpoint's files")
	}
}

// A committed checkpoint carries a manifest that Verify checks file by file: a file cut
// short, changed in place, or missing, and a manifest that is unreadable, make it damaged,
// with the file named; one without a manifest (written before there were any) is ErrNoManifest.
func TestManifest(t *testing.T) {
	run := t.TempDir()
	commit := func(step int) string {
		tmp := StepDir(run, step) + ".tmp"
		os.MkdirAll(filepath.Join(tmp, "actor"), 0o755)
		os.WriteFile(filepath.Join(tmp, "actor", "model.safetensors"), []byte("0123456789abcdef"), 0o644)
		os.WriteFile(filepath.Join(tmp, "state.json"), []byte(`{"step": 1}`), 0o644)
		if err := Commit(tmp, StepDir(run, step)); err != nil {
			t.Fatal(err)
		}
		return StepDir(run, step)
	}
	dir := commit(1)
	if err := Verify(dir); err != nil {
		t.Fatalf("a fresh checkpoint: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	if !strings.Contains(string(b), `"path": "actor/model.safetensors"`) || !strings.Contains(string(b), `"size": 16`) ||
		strings.Contains(string(b), `"path": "manifest.json"`) {
		t.Errorf("manifest:\n%s", b)
	}
	model := filepath.Join(dir, "actor", "model.safetensors")
	for _, c := range []struct {
		name   string
		damage func()
		want   string
	}{
		{"truncated", func() { os.Truncate(model, 10) }, "actor/model.safetensors is 10 bytes, the manifest says 16"},
		{"changed", func() { os.WriteFile(model, []byte("0123456789abcdeX"), 0o644) }, "actor/model.safetensors does not match its SHA-256"},
		{"missing", func() { os.Remove(model) }, "actor/model.safetensors is missing"},
		{"manifest cut short", func() {
			m := filepath.Join(dir, ManifestName)
			b, _ := os.ReadFile(m)
			os.WriteFile(m, b[:len(b)/2], 0o644)
		}, "manifest.json is not a manifest"},
	} {
		dir = commit(1)
		c.damage()
		var d *DamagedError
		if err := Verify(dir); !errors.As(err, &d) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v; want a DamagedError naming %s and %q", c.name, err, dir, c.want)
		}
	}
	dir = commit(1)
	os.Remove(filepath.Join(dir, ManifestName))
	if err := Verify(dir); !errors.Is(err, ErrNoManifest) {
		t.Errorf("without a manifest: %v; want ErrNoManifest", err)
	}
}
