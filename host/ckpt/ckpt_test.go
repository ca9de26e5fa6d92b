package ckpt

import (
	"os"
	"path/filepath"
	"reflect"
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
