package mlflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/internal/mlflowrest/mlflowtest"
	"github.com/rlhost/rlhost/sdk/conformance"
	"github.com/rlhost/rlhost/sdk/trace"
)

// trajectory is one trajectory's spans as host/tracing makes them (ids in hex).
func trajectory(n int, step int64, reward float64) []trace.Span {
	tid := fmt.Sprintf("%032x", 0xabc000+n)
	root := fmt.Sprintf("%016x", 0x100+n*16)
	t0 := time.Now().Add(-time.Second)
	common := map[string]any{"step": step, "sample_index": int64(n), "rollout_n": int64(0), "validate": false}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range common {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	return []trace.Span{
		{TraceID: tid, SpanID: fmt.Sprintf("%016x", 0x101+n*16), ParentID: root, Name: "generate", Start: t0, End: t0.Add(100 * time.Millisecond),
			Attributes: with(map[string]any{"prompt_tokens": int64(12), "response_tokens": int64(5)}),
			Inputs:     `{"prompt":"What is 6*7?"}`, Outputs: `{"response":"<tool_call>calc</tool_call>"}`},
		{TraceID: tid, SpanID: fmt.Sprintf("%016x", 0x102+n*16), ParentID: root, Name: "tool_call:calc_gsm8k_reward", Start: t0.Add(100 * time.Millisecond),
			End: t0.Add(110 * time.Millisecond), Attributes: with(nil), Inputs: `{"answer":"42"}`, Outputs: `{"text":"bad"}`, Error: "tool failed"},
		{TraceID: tid, SpanID: root, Name: "agent_loop", Start: t0, End: t0.Add(200 * time.Millisecond),
			Attributes: with(map[string]any{"reward": reward, "experiment_name": "exp-a", "agent_name": "tool_agent", "task": "gsm8k", "data_source": "openai/gsm8k"}),
			Inputs:     `{"prompt":"What is 6*7?"}`, Outputs: `{"response":"42"}`},
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"tracking_url": "x"}, `mlflow config: unknown key "tracking_url" (known: tracking_uri, experiment_name, run_id, timeout_seconds); did you mean "tracking_uri"?`},
		{map[string]any{"tracking_uri": 3.0}, "want a string"},
		{map[string]any{"tracking_uri": "ftp://x"}, "want http(s)://host:port"},
		{map[string]any{"timeout_seconds": -1.0}, "positive number"},
	}
	for _, tt := range tests {
		_, err := parseConfig(trace.Run{Config: tt.cfg})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, trace.ErrInvalidArgument) {
			t.Errorf("config %v: %v; want an invalid-argument error containing %q", tt.cfg, err, tt.want)
		}
	}
	c, err := parseConfig(trace.Run{Project: "proj", Config: map[string]any{"timeout_seconds": int64(5), "tracking_uri": "http://h:1/"}})
	if err != nil || c.Timeout != 5*time.Second || c.TrackingURI != "http://h:1" || c.ExperimentName != "proj" {
		t.Errorf("config %+v %v", c, err)
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	b := &Backend{}
	_, err := b.Init(context.Background(), trace.Run{Project: "p", Config: map[string]any{"tracking_uri": "http://127.0.0.1:1", "timeout_seconds": 2.0}})
	if !errors.Is(err, trace.ErrUnavailable) {
		t.Errorf("Init against a closed port: %v; want ErrUnavailable (the host spools and retries)", err)
	}
}

// Against MLflow's basic-auth app the plugin sends the credentials of the environment MLflow's
// clients read (the host's, which plugins inherit): without them the server refuses the run.
func TestRealServerAuth(t *testing.T) {
	srv := mlflowtest.StartAuth(t, "s3cret-passw0rd-long")
	ctx := context.Background()
	run := trace.Run{Project: "rlhost-auth-test", RunName: "a", RunID: "r1", Config: map[string]any{"tracking_uri": srv.URI, "timeout_seconds": 30.0}}
	t.Setenv("MLFLOW_TRACKING_TOKEN", "")
	t.Setenv("MLFLOW_TRACKING_USERNAME", "")
	if _, err := (&Backend{}).Init(ctx, run); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("no credentials: %v; want the server's 401", err)
	}
	t.Setenv("MLFLOW_TRACKING_USERNAME", "admin")
	t.Setenv("MLFLOW_TRACKING_PASSWORD", "s3cret-passw0rd-long")
	b := &Backend{}
	if _, err := b.Init(ctx, run); err != nil {
		t.Fatalf("with MLFLOW_TRACKING_USERNAME/PASSWORD: %v", err)
	}
	if err := b.Export(ctx, trajectory(0, 1, 1)); err != nil {
		t.Fatalf("export with credentials: %v", err)
	}
	if strings.Contains(fmt.Sprint(b.cfg), "s3cret-passw0rd-long") {
		t.Errorf("the password is in the backend's config: %v", b.cfg)
	}
}

func TestRealServer(t *testing.T) {
	srv := mlflowtest.Start(t)
	ctx := context.Background()
	b := &Backend{}
	url, err := b.Init(ctx, trace.Run{Project: "rlhost-trace-test", RunName: "grpo-1", RunID: "r1", Config: map[string]any{"tracking_uri": srv.URI}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(url, "/runs/"+b.RunID()) {
		t.Errorf("run url %s", url)
	}
	var spans []trace.Span
	for n := 0; n < 4; n++ {
		spans = append(spans, trajectory(n, int64(3+n%2), float64(n%2))...)
	}
	if err := b.Export(ctx, spans[:4]); err != nil { // a batch that ends inside a trajectory
		t.Fatal(err)
	}
	if err := b.Export(ctx, spans[4:]); err != nil {
		t.Fatal(err)
	}
	if err := b.Export(ctx, spans[4:]); err != nil { // a retried batch is stored once
		t.Fatal(err)
	}
	got := srv.Search(t, b.ExperimentID(), "tags.step = '3'")
	if len(got) != 2 {
		t.Fatalf("tags.step = '3': %d traces; want 2: %+v", len(got), got)
	}
	for _, ti := range got {
		if ti.Metadata["mlflow.sourceRun"] != b.RunID() || ti.Tags["step"] != "3" || ti.Tags["validate"] != "false" ||
			ti.Tags["experiment_name"] != "exp-a" || ti.State != "OK" {
			t.Errorf("trace info %+v", ti)
		}
		sp := srv.Spans(t, ti.TraceID)
		if len(sp) != 3 {
			t.Errorf("trace %s: %d spans; want 3", ti.TraceID, len(sp))
			continue
		}
		byName := map[string]mlflowtest.Span{}
		for _, s := range sp {
			byName[s.Name] = s
		}
		root, gen, tool := byName["agent_loop"], byName["generate"], byName["tool_call:calc_gsm8k_reward"]
		if root.ParentSpanID != "" || gen.ParentSpanID != root.SpanID || tool.ParentSpanID != root.SpanID {
			t.Errorf("parents: root %q, generate %q, tool %q; want the root's id %q", root.ParentSpanID, gen.ParentSpanID, tool.ParentSpanID, root.SpanID)
		}
		in, _ := json.Marshal(gen.Attr("mlflow.spanInputs"))
		if !strings.Contains(string(in), "What is 6*7?") || !strings.Contains(string(in), "kvlist_value") {
			t.Errorf("generate inputs %s; want the prompt as an object", in)
		}
		if fmt.Sprint(gen.Attr("mlflow.spanType")) != "map[string_value:LLM]" || fmt.Sprint(tool.Attr("mlflow.spanType")) != "map[string_value:TOOL]" {
			t.Errorf("span types %v %v", gen.Attr("mlflow.spanType"), tool.Attr("mlflow.spanType"))
		}
		if tool.Status.Code != "STATUS_CODE_ERROR" || tool.Status.Message != "tool failed" {
			t.Errorf("tool status %+v", tool.Status)
		}
		if usage, _ := json.Marshal(gen.Attr("mlflow.chat.tokenUsage")); !strings.Contains(string(usage), `"total_tokens"`) {
			t.Errorf("token usage %s", usage)
		}
	}
	if n := len(srv.Search(t, b.ExperimentID(), "tags.step = '4' AND tags.sample_index = '1'")); n != 1 {
		t.Errorf("step 4 sample 1: %d traces; want 1", n)
	}
	// Linked to the run: searching by the run finds all four.
	if n := len(srv.Search(t, b.ExperimentID(), "metadata.`mlflow.sourceRun` = '"+b.RunID()+"'")); n != 4 {
		t.Errorf("traces of the run: %d; want 4", n)
	}

	// A second backend attaching to the same run (the metrics logger's) adds to it.
	b2 := &Backend{}
	if _, err := b2.Init(ctx, trace.Run{Project: "rlhost-trace-test", Config: map[string]any{"tracking_uri": srv.URI, "run_id": b.RunID()}}); err != nil {
		t.Fatal(err)
	}
	if b2.RunID() != b.RunID() || b2.ExperimentID() != b.ExperimentID() {
		t.Errorf("attached to %s/%s; want %s/%s", b2.ExperimentID(), b2.RunID(), b.ExperimentID(), b.RunID())
	}
	if _, err := b2.Init(ctx, trace.Run{Project: "p", Config: map[string]any{"tracking_uri": srv.URI, "run_id": "nope"}}); err == nil ||
		errors.Is(err, trace.ErrUnavailable) {
		t.Errorf("Init with an unknown run: %v; want a non-temporary error", err)
	}

	// The plugin binary passes the conformance kit against this server.
	bin := filepath.Join(t.TempDir(), "rlhost-trace-mlflow")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/rlhost-trace-mlflow").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Setenv("MLFLOW_TRACKING_URI", srv.URI)
	conformance.RunBinary(t, bin, conformance.Options{})
	_ = os.Getenv
}
