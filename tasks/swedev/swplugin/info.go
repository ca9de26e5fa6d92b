package swplugin

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/swedev/sandbox"
)

// SystemPrompt tells the model how to work.
const SystemPrompt = `You are a software engineer fixing a bug in a repository. ` +
	`Use the bash tool to run commands in the repository's root (for example to read files or run the tests), ` +
	`and the str_replace_editor tool to view and edit files (paths relative to the repository root). ` +
	`Make the smallest change that fixes the issue; do not change the tests. When you are done, call submit.`

// UserPrompt is the user turn of a task.
func UserPrompt(repo, problem string, files []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Repository: %s\nFiles:\n", repo)
	for _, f := range files {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	fmt.Fprintf(&b, "\nIssue:\n%s\n", strings.TrimSpace(problem))
	return b.String()
}

var sampleRecord = map[string]any{
	"instance_id":       "sample__calc-1",
	"repo":              "sample/calc",
	"language":          "python",
	"problem_statement": "add(2, 3) returns -1 instead of 5.",
	"FAIL_TO_PASS":      []any{"tests.test_calc.T.test_add"},
	"PASS_TO_PASS":      []any{"tests.test_calc.T.test_mul"},
	"snapshot": map[string]any{
		"calc.py":            "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
		"tests/__init__.py":  "",
		"tests/test_calc.py": "import unittest\n\nfrom calc import add, mul\n\n\nclass T(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n",
	},
	"test_patch": "diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n" +
		"@@ -7,2 +7,5 @@ class T(unittest.TestCase):\n     def test_mul(self):\n         self.assertEqual(mul(2, 3), 6)\n" +
		"+\n+    def test_add(self):\n+        self.assertEqual(add(2, 3), 5)\n",
	"patch": "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n \n \n def mul(a, b):\n",
}

// Info describes the plugin. It declares task.FeatureWeakIsolation when the sandbox's
// isolation leaves the machine's files readable to the model's commands (sandbox.IsWeak).
func (t *Task) Info(ctx context.Context) (task.Info, error) {
	var features []string
	if iso := t.isolation(ctx); iso != "" && sandbox.IsWeak(iso) {
		features = append(features, task.FeatureWeakIsolation)
	}
	return task.Info{
		Features:         features,
		Name:             Name,
		Version:          Version,
		Description:      "software-engineering episodes in sandboxes (bash, file editor, submit), rewarded 1 when the hidden tests pass",
		Tools:            t.ToolSpecs(),
		DefaultAgentLoop: task.ToolAgent,
		DataSources:      []string{DefaultDataSource},
		DefaultInputs:    []task.InputFile{{Split: "train", Name: "train.jsonl"}, {Split: "test", Name: "test.jsonl"}},
		ConfigSchema: []byte(`{"type":"object","properties":{` +
			`"sandbox_url":{"type":"string","description":"URL of a remote rlhost-sandbox; empty runs the sandbox in the plugin"},` +
			`"sandbox_token":{"type":"string","description":"bearer token of the remote sandbox"},` +
			`"isolation":{"type":"string","enum":["","bwrap","ns","rlimit"],"description":"isolation of the in-process sandbox (default the strongest available)"},` +
			`"max_instances":{"type":"integer","description":"instances of the in-process sandbox (default 256)"},` +
			`"slots":{"type":"integer","description":"commands running at once in the in-process sandbox (default 2 x CPUs)"},` +
			`"lease_s":{"type":"number","description":"lease of an instance, seconds (default 1800)"},` +
			`"command_timeout_s":{"type":"number","description":"wall-clock limit of one bash call, seconds (default 30)"},` +
			`"test_timeout_s":{"type":"number","description":"wall-clock limit of the hidden tests, seconds (default 300)"},` +
			`"max_output_chars":{"type":"integer","description":"tool output shown to the model (default 8000)"},` +
			`"ro_binds":{"type":"array","items":{"type":"string"},"description":"extra host paths (absolute) the in-process sandbox's instances see read-only at the same place"}}}`),
		Samples: []task.Sample{{Split: "train", Record: sampleRecord, ReferenceSolution: "```diff\n" + sampleRecord["patch"].(string) + "```"}},
	}, nil
}

// Configure applies the task config (the keys of Config's tags). The in-process sandbox
// starts again with the new settings (instances of the old one are deleted).
func (t *Task) Configure(_ context.Context, raw map[string]any) error {
	cfg := DefaultConfig()
	if err := task.DecodeConfig("swedev", raw, &cfg); err != nil {
		return err
	}
	if cfg.SandboxURL != "" && !strings.HasPrefix(cfg.SandboxURL, "http://") && !strings.HasPrefix(cfg.SandboxURL, "https://") {
		return task.InvalidArgument("swedev config key %q: want an http:// or https:// URL, got %q", "sandbox_url", cfg.SandboxURL)
	}
	if !map[string]bool{"": true, "bwrap": true, "ns": true, "rlimit": true}[cfg.Isolation] {
		return task.InvalidArgument("swedev config key %q: want bwrap, ns or rlimit, got %q", "isolation", cfg.Isolation)
	}
	for _, n := range []struct {
		key    string
		v      int
		zeroOK bool
	}{{"max_instances", cfg.MaxInstances, false}, {"slots", cfg.Slots, true}, {"max_output_chars", cfg.MaxOutput, false}} {
		if n.v < 0 || (n.v == 0 && !n.zeroOK) {
			return task.InvalidArgument("swedev config key %q: want a positive integer, got %d", n.key, n.v)
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"lease_s", cfg.Lease}, {"command_timeout_s", cfg.CommandWall}, {"test_timeout_s", cfg.TestWall}} {
		if d.v <= 0 {
			return task.InvalidArgument("swedev config key %q: want a positive number of seconds, got %v", d.key, d.v.Seconds())
		}
	}
	for i, p := range cfg.ROBinds {
		if !strings.HasPrefix(p, "/") {
			return task.InvalidArgument("swedev config key %q[%d]: want an absolute path, got %q", "ro_binds", i, p)
		}
	}
	if len(cfg.ROBinds) == 0 {
		cfg.ROBinds = nil // as the default: an empty list is no change of sandbox
	}
	if cfg.CommandWall > 10*time.Minute || cfg.TestWall > 10*time.Minute {
		return task.InvalidArgument("swedev config: command_timeout_s and test_timeout_s are at most 600")
	}
	t.mu.Lock()
	old := t.local
	changed := !reflect.DeepEqual(cfg, t.cfg)
	t.cfg = cfg
	if changed {
		t.local, t.backend = nil, nil
	}
	t.ToolEnv.Lease = cfg.Lease
	t.mu.Unlock()
	if changed && old != nil {
		old.Close()
	}
	return nil
}

// Preprocess turns a task record (SWE-bench's fields, a snapshot and a language) into a row.
func (t *Task) Preprocess(_ context.Context, r task.Record) (task.Row, error) {
	where := fmt.Sprintf("swedev record %d of split %q", r.Index, r.Split)
	spec, err := SpecOf(r.Data, r.Data)
	if err != nil {
		return task.Row{}, task.InvalidArgument("%s: %v", where, err)
	}
	problem, ok := r.Data["problem_statement"].(string)
	if !ok || strings.TrimSpace(problem) == "" {
		return task.Row{}, task.InvalidArgument("%s (%s): \"problem_statement\" must be a non-empty string", where, spec.InstanceID)
	}
	repo := spec.Repo
	if repo == "" {
		repo = spec.InstanceID
	}
	files := make([]string, 0, len(spec.Snapshot))
	for p := range spec.Snapshot {
		files = append(files, p)
	}
	sort.Strings(files)
	gt := map[string]any{"instance_id": spec.InstanceID, "language": spec.Language,
		"FAIL_TO_PASS": toAny(spec.FailToPass), "PASS_TO_PASS": toAny(spec.PassToPass), "test_patch": spec.TestPatch}
	extra := map[string]any{"split": r.Split, "index": r.Index, "instance_id": spec.InstanceID, "repo": repo,
		"base_commit": spec.BaseCommit, "problem_statement": problem, "snapshot": snapshotList(spec.Snapshot)}
	if p, ok := r.Data["patch"].(string); ok {
		extra["patch"] = p
		// The reference patch made with the editor is the row's cold-start trajectory; a
		// patch the editor cannot make (a deleted or renamed file) gives none.
		if msgs, err := ColdStart(spec.Snapshot, p); err == nil {
			extra[SFTMessagesKey] = msgs
		}
	}
	return task.Row{
		DataSource:  DefaultDataSource,
		Prompt:      []task.Message{{Role: "system", Content: SystemPrompt}, {Role: "user", Content: UserPrompt(repo, problem, files)}},
		Ability:     Ability,
		RewardModel: task.RewardModel{Style: "rule", GroundTruth: gt},
		ExtraInfo:   extra,
		AgentName:   task.ToolAgent,
	}, nil
}
