package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/data"
	"github.com/urfave/cli/v2"
)

var pluginDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlhost-cli-")
	if err != nil {
		panic(err)
	}
	pluginDir = dir
	for name, pkg := range map[string]string{"rlhost-task-gsm8k": "../../tasks/gsm8k/cmd/rlhost-task-gsm8k",
		"rlhost-task-swedev": "../../tasks/swedev/cmd/rlhost-task-swedev",
		"rlhost-trace-local": "../../plugins/local/cmd/rlhost-trace-local"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		if err != nil {
			panic(string(out))
		}
	}
	os.Setenv("RLHOST_PLUGIN_PATH", dir)
	// The tests train the default model in this process and in the rlhost processes they
	// start (two at once for a 2-rank job), while make test runs host/trainer's beside them:
	// without a limit each process's heap grows to twice what is live (about 6 GB for 2.5 GB
	// live), and CI's machine ran out of memory. The limit, inherited by the processes
	// started, keeps each near what is live.
	if os.Getenv("GOMEMLIMIT") == "" {
		os.Setenv("GOMEMLIMIT", "4GiB")
		debug.SetMemoryLimit(4 << 30)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer that several goroutines may write: the host log (hclog, plugin
// lines included) and the progress output both go to the app's ErrWriter.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run runs the CLI in-process and returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr syncBuffer
	a := app()
	a.Writer, a.ErrWriter = &stdout, &stderr
	a.ExitErrHandler = func(*cli.Context, error) {}
	err := runCLI(a, append([]string{"rlhost"}, args...))
	return stdout.String(), stderr.String(), err
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const rec1 = `{"question": "Tom has 3 apples and buys 4 more. How many apples?", "answer": "3+4=<<3+4=7>>7\n#### 7"}`
const rec2 = `{"question": "A class of 1,200 splits in 2.", "answer": "1200/2=600\n#### 1,200"}`

func TestPreprocessWritesVerlParquet(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(in, "train.jsonl"), rec1+"\n\n"+rec2+"\n")
	writeFile(t, filepath.Join(in, "test.jsonl"), rec2+"\n")
	_, stderr, err := run(t, "preprocess", "--task", "gsm8k", "--input", in, "--output-dir", out)
	if err != nil {
		t.Fatalf("preprocess: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "train: 2 rows") || !strings.Contains(stderr, "100%") {
		t.Errorf("progress output: %s", stderr)
	}
	rows, err := data.ReadParquet(filepath.Join(out, "train.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[1]
	if r.DataSource != "openai/gsm8k" || r.AgentName != "tool_agent" || r.RewardModel.GroundTruth != "1200" ||
		r.ExtraInfo["index"] != int64(1) || r.ExtraInfo["split"] != "train" || len(r.Prompt) != 2 {
		t.Errorf("row: %+v", r)
	}
	tk, _ := r.ExtraInfo["tools_kwargs"].(map[string]any)
	if gt := tk["calc_gsm8k_reward"].(map[string]any)["create_kwargs"].(map[string]any)["ground_truth"]; gt != "1200" {
		t.Errorf("tools_kwargs ground truth %v", gt)
	}
}

func TestPreprocessBadInput(t *testing.T) {
	out := t.TempDir()
	cases := []struct {
		name  string
		files map[string]string
		task  string
		want  []string
	}{
		{"missing split file", map[string]string{"train.jsonl": rec1}, "gsm8k", []string{"test.jsonl", "missing"}},
		{"empty file", map[string]string{"train.jsonl": "\n", "test.jsonl": rec1}, "gsm8k", []string{"train.jsonl", "no records (the file is empty)"}},
		{"bad json line", map[string]string{"train.jsonl": rec1 + "\n{nope\n", "test.jsonl": rec1}, "gsm8k", []string{"train.jsonl:2:", "not a JSON object"}},
		{"renamed field", map[string]string{"train.jsonl": `{"q": "x", "answer": "#### 1"}`, "test.jsonl": rec1}, "gsm8k",
			[]string{"rlhost-task-gsm8k", "Preprocess", `want string fields "question" and "answer", have [answer q]`}},
		{"unknown task", map[string]string{}, "gsm8kk", []string{`no task plugin named "gsm8kk"`, `did you mean "gsm8k"?`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := t.TempDir()
			for name, text := range c.files {
				writeFile(t, filepath.Join(in, name), text)
			}
			_, _, err := run(t, "preprocess", "--task", c.task, "--input", in, "--output-dir", out)
			if err == nil {
				t.Fatal("succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestScoreJSONL(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "rollouts.jsonl")
	outPath := filepath.Join(dir, "scored.jsonl")
	writeFile(t, in, strings.Join([]string{
		`{"data_source": "openai/gsm8k", "solution_str": "so #### 72", "ground_truth": "72", "extra_info": {"index": 0}, "id": "a"}`,
		`{"data_source": "openai/gsm8k", "solution_str": "I think 72", "ground_truth": "72"}`,
		`{"data_source": "openai/gsm8k", "solution_str": "#### 72", "ground_truth": ["72"]}`,
	}, "\n")+"\n")
	_, stderr, err := run(t, "score", "--task", "gsm8k", "--input", in, "--output", outPath)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	b, _ := os.ReadFile(outPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	var got []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if got[0]["score"] != 1.0 || got[0]["id"] != "a" || got[1]["score"] != 0.0 || got[2]["score_error"] == nil {
		t.Errorf("scored: %v", got)
	}
	if !strings.Contains(stderr, "mean score 0.3333") {
		t.Errorf("summary: %s", stderr)
	}
	// Flexible extraction through task config.
	_, _, err = run(t, "score", "--task", "gsm8k", "--set", `score_method="flexible"`, "--input", in, "--output", outPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(outPath)
	if !strings.Contains(strings.Split(string(b), "\n")[1], `"score":1`) {
		t.Errorf("flexible: %s", b)
	}
	// Bad input names the line and the field; the earlier output file is untouched.
	writeFile(t, in, `{"solution_str": "x", "ground_truth": "1"}`+"\n"+`{"ground_truth": "1"}`+"\n")
	_, _, err = run(t, "score", "--task", "gsm8k", "--input", in, "--output", outPath)
	if err == nil || !strings.Contains(err.Error(), "rollouts.jsonl:2: field \"solution_str\" is missing") {
		t.Errorf("bad input: %v", err)
	}
	if b2, _ := os.ReadFile(outPath); !bytes.Equal(b, b2) {
		t.Errorf("output changed after a failed run")
	}
	writeFile(t, in, `{"solution_str": "x", "ground_truth": "1"}`+"\n")
	_, _, err = run(t, "score", "--task", "gsm8k", "--set", "no_such=1", "--input", in)
	if err == nil || !strings.Contains(err.Error(), "no_such") {
		t.Errorf("bad config: %v", err)
	}
}

func TestConformanceCommand(t *testing.T) {
	stdout, _, err := run(t, "conformance", "gsm8k")
	if err != nil || !strings.Contains(stdout, "0 failed") {
		t.Fatalf("conformance gsm8k: %v\n%s", err, stdout)
	}
	bad := filepath.Join(t.TempDir(), "rlhost-task-bad")
	writeFile(t, bad, "#!/bin/sh\necho not a plugin\n")
	os.Chmod(bad, 0o755)
	stdout, _, err = run(t, "conformance", bad)
	if err == nil || !strings.Contains(err.Error(), "1 of 1 plugins failed") || !strings.Contains(stdout, "FAIL") {
		t.Fatalf("conformance of a broken plugin: %v\n%s", err, stdout)
	}
}

func TestPluginsList(t *testing.T) {
	stdout, _, err := run(t, "plugins", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NAME", "gsm8k", "task", "0.1.0", "task/v1.1", pluginDir} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plugins list lacks %q:\n%s", want, stdout)
		}
	}
}

func waitBriefly() { time.Sleep(100 * time.Millisecond) }

// Started by torchrun (or srun) as one of several ranks, train stops before it writes
// anything and says why; one rank is fine.
func TestTrainRefusesSeveralRanks(t *testing.T) {
	for k, v := range map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"} {
		t.Setenv(k, v)
	}
	runs := t.TempDir()
	_, _, err := run(t, "train", "--task", "gsm8k", "trainer.default_local_dir="+runs)
	if err == nil || !strings.Contains(err.Error(), "rank 1 of 4 (torchrun, local rank 1)") || !strings.Contains(err.Error(), "until NCCL's collectives are bound") {
		t.Fatalf("rank 1 of 4: %v", err)
	}
	if ents, _ := os.ReadDir(runs); len(ents) != 0 {
		t.Errorf("the refused run wrote %d entries", len(ents))
	}
	t.Setenv("RANK", "x")
	if _, _, err := run(t, "train", "--task", "gsm8k"); err == nil || !strings.Contains(err.Error(), `RANK="x"`) {
		t.Errorf("RANK=x: %v", err)
	}
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "1")
	t.Setenv("LOCAL_RANK", "0")
	if out, _, err := run(t, "train", "--task", "gsm8k", "--print-config"); err != nil || !strings.Contains(out, "rlhost run configuration") {
		t.Errorf("one rank: %v", err)
	}
}
