package swplugin

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/swedev/sandbox"
)

// datasetRecords reads the starter dataset's JSONL files.
func datasetRecords(t testing.TB) []task.Record {
	t.Helper()
	var recs []task.Record
	for _, split := range []string{"train", "test"} {
		f, err := os.Open(filepath.Join("..", "dataset", split+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for i := 0; sc.Scan(); i++ {
			v, err := task.DecodeJSON(sc.Text())
			if err != nil {
				t.Fatalf("%s.jsonl line %d: %v", split, i+1, err)
			}
			recs = append(recs, task.Record{Index: int64(i), Split: split, Data: v.(map[string]any)})
		}
		f.Close()
	}
	return recs
}

// Every task of the starter dataset is genuine: at the base state its FAIL_TO_PASS tests fail
// and its PASS_TO_PASS tests pass; with the reference patch, through Score (the path of the
// reward managers) and through an episode rewarded by End (the trainer's
// path for swedev), it scores 1; with no patch it scores 0.
func TestDatasetVerified(t *testing.T) {
	p := New()
	defer p.Close()
	ctx := context.Background()
	recs := datasetRecords(t)
	langs := map[string]int{}
	for _, r := range recs {
		langs[r.Data["language"].(string)]++
	}
	if len(recs) < 30 || langs["python"] == 0 || langs["go"] == 0 {
		t.Fatalf("%d tasks (%v); want at least 30 in Python and Go", len(recs), langs)
	}
	sb, err := p.sandbox()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, rec := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			row, err := p.Preprocess(ctx, rec)
			if err != nil {
				t.Error(err)
				return
			}
			id := rec.Data["instance_id"].(string)
			spec, err := SpecOf(row.RewardModel.GroundTruth, row.ExtraInfo)
			if err != nil {
				t.Errorf("%s: %v", id, err)
				return
			}
			info, err := sb.Create(ctx, sandbox.CreateRequest{Files: spec.Snapshot, BaseCommit: spec.BaseCommit})
			if err != nil {
				t.Errorf("%s: %v", id, err)
				return
			}
			rep, err := sb.RunTests(ctx, info.ID, sandbox.TestRequest{Language: spec.Language, TestPatch: spec.TestPatch,
				Tests: append(append([]string(nil), spec.FailToPass...), spec.PassToPass...)})
			_ = sb.Delete(ctx, info.ID)
			if err != nil {
				t.Errorf("%s: %v", id, err)
				return
			}
			for _, n := range spec.FailToPass {
				if rep.Results[n] != sandbox.Failed {
					t.Errorf("%s: FAIL_TO_PASS test %s passes at the base state", id, n)
				}
			}
			for _, n := range spec.PassToPass {
				if rep.Results[n] != sandbox.Passed {
					t.Errorf("%s: PASS_TO_PASS test %s fails at the base state: %s\n%s", id, n, rep.Error, rep.Output)
				}
			}
			patch := rec.Data["patch"].(string)
			res, err := p.Score(ctx, []task.ScoreItem{
				{Solution: "```diff\n" + patch + "```", GroundTruth: row.RewardModel.GroundTruth, ExtraInfo: row.ExtraInfo},
				{Solution: "", GroundTruth: row.RewardModel.GroundTruth, ExtraInfo: row.ExtraInfo}})
			if err != nil {
				t.Errorf("%s: %v", id, err)
				return
			}
			if res[0].Score != 1 || res[1].Score != 0 {
				t.Errorf("%s: the reference patch scores %v (%v), no patch %v", id, res[0].Score, res[0].Extra, res[1].Score)
			}
			// The trainer's path: an episode whose bash call applies the reference patch, rewarded by End.
			st, err := p.Start(ctx, task.StartRequest{Row: row})
			if err != nil {
				t.Errorf("%s: Start: %v", id, err)
				return
			}
			o, err := p.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools, Assistant: task.Message{Role: "assistant",
				ToolCalls: []task.ToolCall{call(BashTool, map[string]any{"command": "git apply <<'RLHOST_PATCH_END'\n" + patch + "RLHOST_PATCH_END\n"}), call(SubmitTool, map[string]any{})}}})
			if err != nil || o.ToolResults[0].Error || !o.Done {
				t.Errorf("%s: Obs: %+v %v", id, o, err)
			}
			end, err := p.End(ctx, task.EndRequest{InstanceID: st.InstanceID})
			if err != nil || !end.HasReward || end.Reward != 1 || end.Metrics["tests_broken"] != 0 {
				t.Errorf("%s: End after the reference patch: %+v %v", id, end, err)
			}
			if !strings.Contains(row.Prompt[1].Content, strings.TrimSpace(rec.Data["problem_statement"].(string))) {
				t.Errorf("%s: the prompt lacks the problem statement", id)
			}
		}()
	}
	wg.Wait()
}
