package judge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/host/chatserver"
	"github.com/rlhost/rlhost/host/chatserver/chatservertest"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) {
	if err := cpu.EnsureCoreType(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

var judgeQuestion = []task.Message{
	{Role: "system", Content: "You grade answers. Reply with a score from 1 to 10."},
	{Role: "user", Content: "Question: What is 2+2?\nAnswer: 4\nScore:"},
}

// The judge round trip a task plugin makes: the SDK's Host client (what a Go plugin gets in
// UseHost) calls Host.Judge over the run's Unix socket; the host's service asks the judge
// model behind a real OpenAI-compatible endpoint on 127.0.0.1 (rlhost's chat server serving
// SmolLM2-135M, reached with an API key) and the reply comes back. Greedy, so the reply is
// the one the same request to the endpoint gives directly; the local backend (the model in
// the host, one chat-server session per call) gives it too.
func TestJudgeRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the default model")
	}
	cs := chatservertest.Serve(t, chatserver.Options{Model: "smollm2", MaxContext: 512}).Server
	sess, err := cs.Open("judge-endpoint", rollout.SamplingParams{MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	endpoint := &OpenAI{BaseURL: cs.URL() + "/v1", APIKey: sess.APIKey(), Model: "smollm2", MaxTokens: 16}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	direct, err := endpoint.Judge(ctx, task.JudgeRequest{Messages: judgeQuestion})
	if err != nil {
		t.Fatal(err)
	}
	if direct.Text == "" || direct.CompletionTokens == 0 || direct.CompletionTokens > 16 {
		t.Fatalf("direct reply %+v: want 1..16 tokens of text", direct)
	}

	svc, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	hs := svc.HostService()
	if !strings.HasPrefix(hs.Address, "unix://") || len(hs.Token) < 32 {
		t.Fatalf("host service %q with a %d-character token", hs.Address, len(hs.Token))
	}
	if st, err := os.Stat(filepath.Dir(strings.TrimPrefix(hs.Address, "unix://"))); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the socket's directory: %v, mode %v; want 0700", err, st.Mode().Perm())
	}
	h, err := task.DialHost(*hs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.Has(task.HostFeatureJudge) {
		t.Fatal("the host service does not offer judge")
	}
	// Before the judge is set (the models still loading): Unavailable, not a hang.
	if _, err := h.Judge(ctx, task.JudgeRequest{Messages: judgeQuestion}); status.Code(errors.Unwrap(err)) != codes.Unavailable {
		t.Fatalf("judge before SetJudge: %v, want Unavailable", err)
	}
	for _, c := range []struct {
		name  string
		judge task.Judger
	}{
		{"openai", endpoint},
		{"local", &Local{Endpoint: cs, Model: "smollm2", MaxTokens: 16}},
	} {
		svc.SetJudge(Timeout{J: c.judge, D: 2 * time.Minute})
		got, err := h.Judge(ctx, task.JudgeRequest{Messages: judgeQuestion})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s: %q (%d prompt, %d completion tokens, %s, model %s)", c.name, got.Text, got.PromptTokens, got.CompletionTokens, got.FinishReason, got.Model)
		if got.Text != direct.Text || got.CompletionTokens != direct.CompletionTokens || got.PromptTokens != direct.PromptTokens {
			t.Errorf("%s: judge reply %+v, the endpoint's own %+v", c.name, got, direct)
		}
	}
	// max_tokens of the call is honoured.
	short, err := h.Judge(ctx, task.JudgeRequest{Messages: judgeQuestion, MaxTokens: 2})
	if err != nil || short.CompletionTokens > 2 {
		t.Errorf("max_tokens 2: %+v, %v", short, err)
	}
	// A wrong token is refused.
	bad, _ := task.DialHost(task.HostService{Address: hs.Address, Token: "x", Features: hs.Features})
	defer bad.Close()
	if _, err := bad.Judge(ctx, task.JudgeRequest{Messages: judgeQuestion}); status.Code(errors.Unwrap(err)) != codes.Unauthenticated {
		t.Errorf("a wrong token: %v, want Unauthenticated", err)
	}
	// A dead endpoint is an error naming it, within the timeout.
	svc.SetJudge(Timeout{J: &OpenAI{BaseURL: "http://127.0.0.1:1/v1"}, D: 10 * time.Second})
	if _, err := h.Judge(ctx, task.JudgeRequest{Messages: judgeQuestion}); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("a dead endpoint: %v", err)
	}
}
