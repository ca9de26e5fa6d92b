package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Flags after positional arguments are moved before them, per command; the table is the
// command lines a user types and what urfave/cli is given.
func TestFlagsFirst(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"train --task gsm8k data.train_batch_size=4 --print-config", "train --task gsm8k --print-config data.train_batch_size=4"},
		{"train data.train_batch_size=4 --task gsm8k -c a.yaml x=1 --config=b.yaml", "train --task gsm8k -c a.yaml --config=b.yaml data.train_batch_size=4 x=1"},
		{"--log-level debug train a=1 --task gsm8k", "--log-level debug train --task gsm8k a=1"},
		{"train a=1 --nosuchflag b=2", "train --nosuchflag a=1 b=2"},         // moved, so that the error names it
		{"train a=1 -- --task=x", "train -- a=1 --task=x"},                   // after --, arguments
		{"train a=-1 b=2", "train a=-1 b=2"},                                 // unchanged
		{"traces list --run r --step 3", "traces list --run r --step 3"},     // subcommand, flags first already
		{"traces show abc --run r --json", "traces show --run r --json abc"}, // subcommand
		{"score --task gsm8k", "score --task gsm8k"},                         // nothing to move
		{"nosuchcommand a=1 --task x", "nosuchcommand a=1 --task x"},         // not a command: unchanged
		{"preprocess out --task gsm8k --output-dir d", "preprocess --task gsm8k --output-dir d out"},
		// global flags anywhere: moved before the command
		{"train --log-level debug --task gsm8k a=1", "--log-level debug train --task gsm8k a=1"},
		{"train a=1 --task gsm8k --log-level=info", "--log-level=info train --task gsm8k a=1"},
		{"traces --log-level debug list --run r", "--log-level debug traces list --run r"},
		{"traces list --run r --log-level error", "--log-level error traces list --run r"},
		{"--log-level info sft a=1 --log-level debug", "--log-level info --log-level debug sft a=1"},
		{"train a=1 -- --log-level debug", "train -- a=1 --log-level debug"}, // after --, an argument
	} {
		got := flagsFirst(app(), append([]string{"rlhost"}, strings.Fields(tc.in)...))[1:]
		if want := strings.Fields(tc.want); !reflect.DeepEqual(got, want) {
			t.Errorf("%s\n got %q\nwant %q", tc.in, got, want)
		}
	}
}

// The command line: a flag after an override is a flag, and --print-config prints the
// resolved config, the experiment named after the task.
func TestTrainFlagsAfterOverrides(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	writeFile(t, cfg, "data:\n  max_response_length: 77\n")
	stdout, stderr, err := run(t, "train", "--task", "gsm8k", "data.train_batch_size=4", "--print-config", "-c", cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"train_batch_size: 4\n", "max_response_length: 77\n", "experiment_name: gsm8k\n", "name: gsm8k\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, stdout)
		}
	}
}

// A global flag after the command is the global flag (README: flags may come anywhere), and
// it takes effect: the plugin's debug lines reach the host log.
func TestGlobalFlagAfterCommand(t *testing.T) {
	in := t.TempDir()
	writeFile(t, filepath.Join(in, "train.jsonl"), rec1+"\n")
	writeFile(t, filepath.Join(in, "test.jsonl"), rec2+"\n")
	_, stderr, err := run(t, "preprocess", "--task", "gsm8k", "--input", in, "--output-dir", t.TempDir(), "--log-level", "debug")
	if err != nil {
		t.Fatalf("preprocess ... --log-level debug: %v\n%s", err, stderr)
	}
	_, quiet, err := run(t, "preprocess", "--task", "gsm8k", "--input", in, "--output-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "[DEBUG]") || strings.Contains(quiet, "[DEBUG]") {
		t.Errorf("--log-level debug after the command: debug lines %v; without it %v",
			strings.Contains(stderr, "[DEBUG]"), strings.Contains(quiet, "[DEBUG]"))
	}
}

// --print-config checks that the task is installed: an unknown task is an error naming it
// (rlhost exits 1), and no config is printed.
func TestPrintConfigUnknownTask(t *testing.T) {
	stdout, _, err := run(t, "train", "--task", "nosuchtask", "--print-config")
	if err == nil || !strings.Contains(err.Error(), `no task plugin named "nosuchtask"`) {
		t.Fatalf("unknown task: err %v", err)
	}
	if stdout != "" {
		t.Errorf("printed a config for an unknown task:\n%s", stdout)
	}
	_, _, err = run(t, "train", "--print-config")
	if err == nil || !strings.Contains(err.Error(), "--task") {
		t.Errorf("no task: err %v", err)
	}
}

// With trainer.logger=[console] the run writes no metrics.jsonl, so it neither tries to draw
// curves from it nor names it at the end.
func TestTrainConsoleLoggerOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	dir := filepath.Join(t.TempDir(), "run")
	_, stderr, err := run(t, tinyRun(t, dir, "trainer.total_training_steps=1", "trainer.val_before_train=false",
		"trainer.logger=[console]")...)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "metrics.jsonl")); err == nil {
		t.Fatal("trainer.logger=[console] wrote metrics.jsonl")
	}
	for _, bad := range []string{"metrics.jsonl", "curves"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("the console names %q:\n%s", bad, stderr)
		}
	}
	if !strings.Contains(stderr, "step 1 |") || !strings.Contains(stderr, "traces serve --run "+dir) {
		t.Errorf("no step summary or trace-viewer command on the console:\n%s", stderr)
	}
}

// A plugin whose scores are NaN or +Inf: the run goes on (those rewards are 0, counted in
// reward/errors) and the console says so with the first error.
func TestTrainWarnsWhenRewardsFail(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	bad := filepath.Join(t.TempDir(), "rlhost-task-gsm8k")
	if out, err := exec.Command("go", "build", "-o", bad, "../../host/trainer/testdata/badscore").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "run")
	args := tinyRun(t, dir, "trainer.total_training_steps=1", "trainer.val_before_train=false")
	args[2] = bad // --task takes a path
	_, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "4 of 4 rewards failed") || !strings.Contains(stderr, "the task scored NaN") {
		t.Errorf("no warning naming the failed rewards and the first error:\n%s", stderr)
	}
}

// No dead ends, from a folder that holds nothing: train and generate name the model's search
// path and `make model`; with the model in $RLHOST_HOME, train names the command that makes
// the missing dataset.
func TestMissingModelAndDataNameTheFix(t *testing.T) {
	home, cache := t.TempDir(), t.TempDir()
	t.Setenv("RLHOST_HOME", home)
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"train", "--task", "gsm8k"}, {"generate", "--prompt", "hi"}} {
		_, _, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "make model") ||
			!strings.Contains(err.Error(), filepath.Join(home, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")) ||
			!strings.Contains(err.Error(), filepath.Join(cache, "rlhost", "models")) {
			t.Errorf("%q: %v; want the folders searched and make model", args, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(home, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"), "")
	_, _, err := run(t, "train", "--task", "gsm8k")
	if err == nil || !strings.Contains(err.Error(), "data.train_files: data/gsm8k/train.parquet not found") ||
		!strings.Contains(err.Error(), "rlhost preprocess --task gsm8k --input RAW_DIR --output-dir data/gsm8k") {
		t.Errorf("missing dataset: %v", err)
	}
}
