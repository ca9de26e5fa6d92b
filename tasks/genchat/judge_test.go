package genchat_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/chatserver"
	"github.com/rlhost/rlhost/host/chatserver/chatservertest"
	"github.com/rlhost/rlhost/host/judge"
	hostplugin "github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/rollout"
	sdkplugin "github.com/rlhost/rlhost/sdk/plugin"
	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/genchat"
)

func TestParseJudgeVerdict(t *testing.T) {
	for _, c := range []struct {
		reply string
		want  float64
		err   string
	}{{"YES", 1, ""}, {"No.", 0, ""}, {" yes, it is", 1, ""}, {"Nothing; no", 0, ""}, {"great!", 0, "has no YES or NO"}, {"yesterday", 0, "has no YES or NO"}} {
		v, err := genchat.ParseJudgeVerdict(c.reply)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, %v; want an error with %q", c.reply, v, err, c.err)
			}
		} else if err != nil || v != c.want {
			t.Errorf("%q: %v, %v; want %v", c.reply, v, err, c.want)
		}
	}
}

// judge=true in a run without a judge model is refused at Configure, naming the run key.
func TestJudgeNeedsHostJudge(t *testing.T) {
	tk := genchat.New()
	h, _ := task.DialHost(task.HostService{})
	tk.UseHost(h)
	err := tk.Configure(context.Background(), map[string]any{"judge": true})
	if err == nil || !strings.Contains(err.Error(), "reward_model.judge.backend") {
		t.Fatalf("Configure judge=true without a judge: %v", err)
	}
}

// The judge through every real part: the gen_chat plugin process (go-plugin, mutual TLS),
// configured with judge=true and the host's Host service; its Score calls Host.Judge over the
// Unix socket; the host asks the default model (SmolLM2-135M) behind rlhost's chat server on
// 127.0.0.1 as an OpenAI-compatible endpoint. The scores are the verdicts (YES 1, NO 0) the
// same judge request gives when made directly.
func TestJudgeScoreThroughPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the default model")
	}
	cs := chatservertest.Serve(t, chatserver.Options{Model: "smollm2", MaxContext: 512}).Server
	sess, err := cs.Open("judge", rollout.SamplingParams{MaxTokens: genchat.JudgeMaxTokens})
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
	svc.SetJudge(judge.Timeout{J: endpoint, D: 2 * time.Minute})

	bin := filepath.Join(t.TempDir(), "rlhost-task-genchat")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/rlhost-task-genchat").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b, err := hostplugin.Find(sdkplugin.KindTask, bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := hostplugin.OpenTaskBinaryWithHost(ctx, b, map[string]any{"judge": true}, svc.HostService(), hostplugin.Options{Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !p.CachedInfo().Has(task.FeatureHostService) {
		t.Fatalf("genchat does not declare %s: %v", task.FeatureHostService, p.CachedInfo().Features)
	}
	items := []task.ScoreItem{
		{DataSource: genchat.DataSource, Solution: "2 + 2 = 4. The answer is 4.", GroundTruth: "4", ExtraInfo: map[string]any{"question": "What is 2+2?"}},
		{DataSource: genchat.DataSource, Solution: "Paris is the capital of France.", GroundTruth: "Paris", ExtraInfo: map[string]any{"question": "What is the capital of France?"}},
		{DataSource: genchat.DataSource, Solution: "I like turtles.", GroundTruth: "Paris", ExtraInfo: map[string]any{"question": "What is the capital of France?"}},
	}
	res, err := p.Score(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	graded := 0
	for i, it := range items {
		want, err := endpoint.Judge(ctx, task.JudgeRequest{Messages: genchat.JudgeMessages(it.ExtraInfo["question"].(string), it.GroundTruth.(string), it.Solution),
			MaxTokens: genchat.JudgeMaxTokens})
		if err != nil {
			t.Fatal(err)
		}
		g, perr := genchat.ParseJudgeVerdict(want.Text)
		t.Logf("item %d: judge reply %q -> score %v (err %q)", i, want.Text, res[i].Score, res[i].Err)
		if perr != nil {
			if res[i].Err == "" {
				t.Errorf("item %d: the judge's reply %q has no verdict, yet Score gave %v", i, want.Text, res[i].Score)
			}
			continue
		}
		graded++
		if res[i].Err != "" || res[i].Score != g || res[i].Components["judge"] != g {
			t.Errorf("item %d: %+v; the judge's reply %q says %v", i, res[i], want.Text, g)
		}
	}
	if graded == 0 {
		t.Error("no judge reply had a verdict: the round trip scored nothing")
	}
}
