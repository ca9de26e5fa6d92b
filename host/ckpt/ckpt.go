// Package ckpt lays out a run's checkpoints, shared by `rlhost train` and `rlhost sft`: each is a
// directory RUN_DIR/checkpoints/global_step_N, written under global_step_N.tmp and renamed when
// complete, so a crash never leaves a partial checkpoint that looks complete. The last file
// written before the rename is manifest.json, the size and SHA-256 of every other file
// (manifest.go): a checkpoint damaged afterwards (a disk that filled up, a copy cut short)
// fails Verify, and resuming skips it.
package ckpt

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Dir is the folder of a run's checkpoints.
func Dir(runDir string) string { return filepath.Join(runDir, "checkpoints") }

// StepDir is the folder of the checkpoint of step (complete or not).
func StepDir(runDir string, step int) string {
	return filepath.Join(Dir(runDir), fmt.Sprintf("global_step_%d", step))
}

// Steps lists the steps of the complete checkpoints of a run, oldest first. A missing folder
// has none.
func Steps(runDir string) []int {
	entries, _ := os.ReadDir(Dir(runDir))
	var steps []int
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "global_step_") || strings.HasSuffix(name, ".tmp") {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "global_step_")); err == nil {
			steps = append(steps, n)
		}
	}
	sort.Ints(steps)
	return steps
}

// Commit makes the written folder tmp the checkpoint final (replacing an older one of the same
// step): it writes tmp's manifest (WriteManifest, every file flushed to disk), then renames
// tmp to final.
func Commit(tmp, final string) error {
	if err := WriteManifest(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(final); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return syncDir(filepath.Dir(final))
}

// Prune removes the oldest complete checkpoints of a run until at most keep are left; keep <= 0
// keeps all.
func Prune(runDir string, keep int) {
	if keep <= 0 {
		return
	}
	steps := Steps(runDir)
	for len(steps) > keep {
		os.RemoveAll(StepDir(runDir, steps[0]))
		steps = steps[1:]
	}
}
