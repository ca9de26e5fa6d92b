package pythonmath_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/chatserver"
	"github.com/rlhost/rlhost/host/chatserver/chatservertest"
	"github.com/rlhost/rlhost/host/judge"
	hostplugin "github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// The judge round trip from a Python plugin: testdata/judge's Score calls rlhost.Host.judge
// (the Python SDK) over the host's Unix socket; the host asks the default model (SmolLM2-135M)
// behind rlhost's chat server on 127.0.0.1 as an OpenAI-compatible endpoint. The reply each
// item carries back is the one the same request to the endpoint gives directly (greedy).
// Without a judge the plugin's items are errors saying so.
func TestPythonJudgeRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the default model")
	}
	needPython(t)
	cs := chatservertest.Serve(t, chatserver.Options{Model: "smollm2", MaxContext: 512}).Server
	sess, err := cs.Open("judge", rollout.SamplingParams{MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	endpoint := &judge.OpenAI{BaseURL: cs.URL() + "/v1", APIKey: sess.APIKey(), Model: "smollm2"}
	svc, err := judge.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	items := []task.ScoreItem{
		{DataSource: "pyjudge", Solution: "2 + 2 = 4", GroundTruth: "4", ExtraInfo: map[string]any{"question": "What is 2+2?"}},
		{DataSource: "pyjudge", Solution: "Berlin", GroundTruth: "Paris", ExtraInfo: map[string]any{"question": "What is the capital of France?"}},
	}
	// No judge in the run: the host service is there, but offers no judge call.
	hs := *svc.HostService()
	noJudge := hs
	noJudge.Features = nil
	p, err := hostplugin.OpenTaskBinaryWithHost(ctx, binary(t, "testdata/judge/rlhost-task-pyjudge", "pyjudge"), nil, &noJudge, hostplugin.Options{Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Score(ctx, items[:1])
	p.Close()
	if err != nil || res[0].Err == "" {
		t.Fatalf("Score without a judge: %+v, %v; want an item error", res, err)
	}

	svc.SetJudge(judge.Timeout{J: endpoint, D: 2 * time.Minute})
	p, err = hostplugin.OpenTaskBinaryWithHost(ctx, binary(t, "testdata/judge/rlhost-task-pyjudge", "pyjudge"), nil, &hs, hostplugin.Options{Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !p.CachedInfo().Has(task.FeatureHostService) {
		t.Fatalf("the Python SDK did not declare %s for a task with use_host: %v", task.FeatureHostService, p.CachedInfo().Features)
	}
	res, err = p.Score(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		prompt := "Question: " + it.ExtraInfo["question"].(string) + "\nResponse: " + it.Solution +
			"\n\nIs the response correct? Answer with one word: YES or NO."
		want, err := endpoint.Judge(ctx, task.JudgeRequest{Messages: []task.Message{{Role: "user", Content: prompt}}, MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		extra := res[i].Extra
		t.Logf("item %d: score %v, reply %q (direct %q)", i, res[i].Score, extra["judge_reply"], want.Text)
		if res[i].Err != "" || extra["judge_reply"] != want.Text || extra["judge_model"] != "smollm2" {
			t.Errorf("item %d: %+v; the endpoint replies %q", i, res[i], want.Text)
		}
	}
}
