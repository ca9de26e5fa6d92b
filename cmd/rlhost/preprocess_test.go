package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlhost/rlhost/host/data"
)

var buildRows sync.Once

// rowsPlugin builds testdata/rowsplugin as rlhost-task-rows into the tests' plugin folder: a
// task whose raw records are the rows it gives (see its doc).
func rowsPlugin(t *testing.T) {
	t.Helper()
	buildRows.Do(func() {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "rlhost-task-rows"), "./testdata/rowsplugin").CombinedOutput(); err != nil {
			t.Fatalf("building testdata/rowsplugin: %v\n%s", err, out)
		}
	})
}

// TestPreprocessChecksRows: `rlhost preprocess` checks every row a (real) plugin gives as
// rlhost train's loader will take it, skips and counts the bad ones, reports the first
// reasons, writes the good ones; it fails when every row is bad. The plugin received {} in
// Configure (no task configuration), not null.
func TestPreprocessChecksRows(t *testing.T) {
	rowsPlugin(t)
	in, out := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(in, "train.jsonl"), strings.Join([]string{
		`{"data_source": "rows", "prompt": [{"role": "user", "content": "1+1?"}], "ground_truth": "2", "extra_info": {"index": 0}}`,
		`{"data_source": "", "prompt": [{"role": "user", "content": "2+2?"}], "ground_truth": "4", "extra_info": {"index": 1}}`,
		`{"data_source": "rows", "prompt": [], "ground_truth": "6", "extra_info": {"index": 2}}`,
		`{"data_source": "rows", "prompt": [{"role": "system", "content": " "}, {"role": "user", "content": ""}], "ground_truth": "8"}`,
		`{"skip": "no answer in the record"}`,
		`{"data_source": "rows", "prompt": [{"role": "user", "content": "5+5?"}], "ground_truth": "10", "extra_info": {"index": "five"}}`,
		`{"data_source": "rows", "prompt": [{"role": "user", "content": "6+6?"}], "ground_truth": 12, "extra_info": {"index": 6}}`,
		`{"data_source": "rows", "prompt": [{"role": "user", "content": "7+7?"}], "ground_truth": "14", "extra_info": {"index": 7}}`,
	}, "\n")+"\n")
	_, stderr, err := run(t, "preprocess", "--task", "rows", "--input", in, "--output-dir", out)
	if err != nil {
		t.Fatalf("preprocess: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		"train: 2 rows -> " + filepath.Join(out, "train.parquet") + " (6 skipped: 1 by the task, 5 invalid rows)",
		"skipped line 2: invalid row: column data_source: is empty",
		"skipped line 3: invalid row: column prompt: has no messages",
		"skipped line 4: invalid row: column prompt: has no text (2 messages, all empty)",
		"skipped line 5: no answer in the record",
		"skipped line 6: invalid row: column extra_info: field .index: mixes int64 and string values (earlier rows)",
		"... and 1 more skipped",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("preprocess output lacks %q:\n%s", want, stderr)
		}
	}
	rows, err := data.ReadParquet(filepath.Join(out, "train.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ExtraInfo["index"] != int64(0) || rows[1].ExtraInfo["index"] != int64(7) {
		t.Fatalf("rows written: %+v", rows)
	}
	for _, r := range rows {
		if err := data.CheckRow(r); err != nil {
			t.Errorf("a written row fails the loader's check: %v", err)
		}
		if got := r.ExtraInfo["configure_json"]; got != "{}" {
			t.Errorf("the plugin's Configure received %v; want {} (no configuration)", got)
		}
	}

	// every record bad: an error with the first reason, and no file
	in2, out2 := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(in2, "train.jsonl"), `{"skip": "empty"}`+"\n"+
		`{"data_source": "", "prompt": [{"role": "user", "content": "q"}], "ground_truth": "1"}`+"\n")
	_, _, err = run(t, "preprocess", "--task", "rows", "--input", in2, "--output-dir", out2)
	want := "all 2 records were skipped (1 by the task, 1 invalid rows); the first: line 1: empty"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("preprocess of bad records only: %v; want an error with %q", err, want)
	}
	if _, err := data.ReadParquet(filepath.Join(out2, "train.parquet")); err == nil {
		t.Error("a train.parquet was written although every record was skipped")
	}
}
