package weave

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlhost/rlhost/sdk/conformance"
	"github.com/rlhost/rlhost/sdk/trace"
)

func TestConfig(t *testing.T) {
	t.Setenv("WANDB_ENTITY", "")
	t.Setenv("WF_TRACE_SERVER_URL", "")
	t.Setenv("WANDB_BASE_URL", "")
	tests := []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"entity": "e", "projet": "p"}, `weave config: unknown key "projet" (known: base_url, entity, project, max_request_bytes, retries, retry_base_seconds, timeout_seconds); did you mean "project"?`},
		{map[string]any{"project": "p"}, "need an entity"},
		{map[string]any{"entity": "e/x", "project": "p"}, "without '/'"},
		{map[string]any{"entity": "e", "project": "p", "base_url": "trace.wandb.ai"}, "want http(s)"},
		{map[string]any{"entity": "e", "project": "p", "max_request_bytes": 10.0}, "at least 1024"},
		{map[string]any{"entity": 1.0, "project": "p"}, "want a string"},
	}
	for _, tt := range tests {
		_, err := parseConfig(trace.Run{Config: tt.cfg})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, trace.ErrInvalidArgument) {
			t.Errorf("config %v: %v; want an invalid-argument error containing %q", tt.cfg, err, tt.want)
		}
	}
	c, err := parseConfig(trace.Run{Project: "proj", Config: map[string]any{"entity": "me"}})
	if err != nil || c.BaseURL != "https://trace.wandb.ai" || c.Project != "proj" || c.MaxRequestBytes != 31<<20 {
		t.Errorf("defaults %+v %v", c, err)
	}
	t.Setenv("WANDB_BASE_URL", "http://wandb.local:8080/")
	if c, _ := parseConfig(trace.Run{Project: "p", Config: map[string]any{"entity": "me"}}); c.BaseURL != "http://wandb.local:8080/traces" {
		t.Errorf("base url from WANDB_BASE_URL: %s", c.BaseURL)
	}
	t.Setenv("WF_TRACE_SERVER_URL", "http://127.0.0.1:9/")
	if c, _ := parseConfig(trace.Run{Project: "p", Config: map[string]any{"entity": "me"}}); c.BaseURL != "http://127.0.0.1:9" {
		t.Errorf("base url from WF_TRACE_SERVER_URL: %s", c.BaseURL)
	}
	t.Setenv("WANDB_API_KEY", "")
	if _, err := (&Backend{}).Init(context.Background(), trace.Run{Project: "p", Config: map[string]any{"entity": "me"}}); err == nil ||
		!strings.Contains(err.Error(), "WANDB_API_KEY") {
		t.Errorf("Init without a key: %v", err)
	}
}

// weaveServer is testdata/weave_server.py running on a free port.
type weaveServer struct {
	url, db, log string
}

func pythonWithWeave(t *testing.T) string {
	py := os.Getenv("RLHOST_WEAVE_PYTHON")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "rlhost", "weave-venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		msg := "weave 0.52.38 is not installed (make tracing-weave, or set RLHOST_WEAVE_PYTHON)"
		if os.Getenv("RLHOST_WEAVE_E2E") == "1" || os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

func startWeave(t *testing.T, key string, env ...string) *weaveServer {
	t.Helper()
	py := pythonWithWeave(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	s := &weaveServer{url: fmt.Sprintf("http://127.0.0.1:%d", port), db: filepath.Join(dir, "weave.db"), log: filepath.Join(dir, "requests.log")}
	cmd := exec.Command(py, "testdata/weave_server.py")
	cmd.Env = append(os.Environ(), append([]string{fmt.Sprint("WEAVE_TEST_PORT=", port), "WEAVE_TEST_DB=" + s.db,
		"WEAVE_TEST_KEY=" + key, "WEAVE_TEST_LOG=" + s.log}, env...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		select {
		case <-done:
			t.Fatalf("weave test server exited: %s", out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := http.Get(s.url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
	}
	t.Fatalf("weave test server not up after 2 minutes: %s", out.String())
	return nil
}

func (s *weaveServer) stats(t *testing.T) map[string]float64 {
	resp, err := http.Get(s.url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]float64
	json.NewDecoder(resp.Body).Decode(&m)
	return m
}

// call is a stored call, as calls/stream_query returns it.
type call struct {
	ID         string         `json:"id"`
	TraceID    string         `json:"trace_id"`
	ParentID   *string        `json:"parent_id"`
	OpName     string         `json:"op_name"`
	Attributes map[string]any `json:"attributes"`
	Inputs     map[string]any `json:"inputs"`
	Output     any            `json:"output"`
	Exception  *string        `json:"exception"`
	Summary    map[string]any `json:"summary"`
	EndedAt    *string        `json:"ended_at"`
}

// query streams the calls whose attributes.step is step.
func (s *weaveServer) query(t *testing.T, key, project string, step string) []call {
	t.Helper()
	q := map[string]any{"project_id": project, "query": map[string]any{"$expr": map[string]any{"$eq": []any{
		map[string]any{"$getField": "attributes.step"}, map[string]any{"$literal": step}}}}}
	body, _ := json.Marshal(q)
	req, _ := http.NewRequest(http.MethodPost, s.url+"/calls/stream_query", bytes.NewReader(body))
	req.SetBasicAuth("api", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("stream_query: %d %s", resp.StatusCode, data)
	}
	var out []call
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var c call
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		out = append(out, c)
	}
	return out
}

// spans makes n trajectories of 3 spans at step (ids in hex as host/tracing makes them).
func spans(n int, step int64) []trace.Span {
	var out []trace.Span
	t0 := time.Now().Add(-time.Second)
	for i := 0; i < n; i++ {
		tid := fmt.Sprintf("%08x%024x", step, i+1)
		root := fmt.Sprintf("%016x", 0x1000+i)
		common := func(extra map[string]any) map[string]any {
			m := map[string]any{"step": step, "sample_index": int64(i), "rollout_n": int64(0), "validate": false}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		out = append(out,
			trace.Span{TraceID: tid, SpanID: fmt.Sprintf("%016x", 0x2000+i), ParentID: root, Name: "generate", Start: t0, End: t0.Add(time.Millisecond),
				Attributes: common(map[string]any{"prompt_tokens": int64(10), "response_tokens": int64(4)}),
				Inputs:     `{"prompt":"What is 6*7? ` + strings.Repeat("x", 2000) + `"}`, Outputs: `{"response":"42"}`},
			trace.Span{TraceID: tid, SpanID: fmt.Sprintf("%016x", 0x3000+i), ParentID: root, Name: "tool_call:calc_gsm8k_reward", Start: t0,
				End: t0.Add(time.Millisecond), Attributes: common(nil), Inputs: `{"answer":"42"}`, Outputs: `"ok"`, Error: "boom"},
			trace.Span{TraceID: tid, SpanID: root, Name: "agent_loop", Start: t0, End: t0.Add(2 * time.Millisecond),
				Attributes: common(map[string]any{"reward": 1.0, "experiment_name": "exp-w"}), Inputs: `{"prompt":"What is 6*7?"}`, Outputs: `{"response":"42"}`})
	}
	return out
}

func newBackend(t *testing.T, url string, extra map[string]any) *Backend {
	t.Helper()
	cfg := map[string]any{"base_url": url, "entity": "rl", "retry_base_seconds": 0.05}
	for k, v := range extra {
		cfg[k] = v
	}
	b := &Backend{}
	if _, err := b.Init(context.Background(), trace.Run{Project: "gsm8k", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	return b
}

// checkStored: every trajectory's calls are stored with the right parents and attributes.
func checkStored(t *testing.T, srv *weaveServer, key string, n int, step int64) {
	t.Helper()
	calls := srv.query(t, key, "rl/gsm8k", fmt.Sprint(step))
	if len(calls) != 3*n {
		t.Fatalf("attributes.step = %d: %d calls; want %d", step, len(calls), 3*n)
	}
	roots := map[string]call{}
	for _, c := range calls {
		if c.ParentID == nil {
			roots[c.TraceID] = c
		}
	}
	if len(roots) != n {
		t.Fatalf("%d root calls; want %d", len(roots), n)
	}
	for _, c := range calls {
		if c.EndedAt == nil {
			t.Errorf("call %s (%s) has no end", c.ID, c.OpName)
		}
		if c.ParentID == nil {
			if c.OpName != "agent_loop" || c.Attributes["experiment_name"] != "exp-w" || c.Attributes["reward"] != 1.0 {
				t.Errorf("root %+v", c)
			}
			continue
		}
		if root, ok := roots[c.TraceID]; !ok || *c.ParentID != root.ID {
			t.Errorf("call %s (%s): parent %v; want the root of trace %s", c.ID, c.OpName, *c.ParentID, c.TraceID)
		}
		switch c.OpName {
		case "generate":
			if c.Summary["usage"] == nil || c.Inputs["prompt"] == nil {
				t.Errorf("generate call %+v", c)
			}
		case "tool_call.calc_gsm8k_reward":
			if c.Exception == nil || *c.Exception != "boom" || c.Output != "ok" {
				t.Errorf("tool call %+v", c)
			}
		default:
			t.Errorf("unexpected op %q", c.OpName)
		}
	}
}

// TestWeaveServer: calls written through /call/upsert_batch validate against Weave's request
// models and are stored by its SQLite trace server; a stream query by attributes.step returns
// them with the right parents; a repeated batch is not sent twice; the API key appears only in
// the Authorization header.
func TestWeaveServer(t *testing.T) {
	key := fmt.Sprintf("wandb-weave-test-%d", time.Now().UnixNano())
	t.Setenv("WANDB_API_KEY", key)
	srv := startWeave(t, key)
	b := newBackend(t, srv.url, nil)
	ctx := context.Background()
	s3, s4 := spans(4, 3), spans(2, 4)
	if err := b.Export(ctx, s3[:5]); err != nil { // a batch that ends inside a trajectory
		t.Fatal(err)
	}
	if err := b.Export(ctx, append(s3[5:], s4...)); err != nil {
		t.Fatal(err)
	}
	if err := b.Export(ctx, s4); err != nil { // the host retrying a batch
		t.Fatal(err)
	}
	st := srv.stats(t)
	if st["invalid"] != 0 || st["unauthorized"] != 0 || st["upsert_batch"] != 2 || st["calls"] != 18 {
		t.Errorf("server stats %v; want 2 valid batches of 18 calls in all", st)
	}
	checkStored(t, srv, key, 4, 3)
	checkStored(t, srv, key, 2, 4)
	if n := len(srv.query(t, key, "rl/gsm8k", "5")); n != 0 {
		t.Errorf("step 5: %d calls", n)
	}
	for _, f := range []string{srv.log, srv.db} {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(key)) {
			t.Errorf("%s contains the API key", f)
		}
	}
	// The plugin binary passes the conformance kit against this server.
	bin := filepath.Join(t.TempDir(), "rlhost-trace-weave")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/rlhost-trace-weave").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Setenv("WF_TRACE_SERVER_URL", srv.url)
	t.Setenv("WANDB_ENTITY", "rl")
	conformance.RunBinary(t, bin, conformance.Options{})
	if st := srv.stats(t); st["invalid"] != 0 || st["upsert_batch"] != 3 {
		t.Errorf("after conformance: %v", st)
	}

	// A wrong key is refused, not retried forever.
	t.Setenv("WANDB_API_KEY", "wrong-key-123456")
	bad := newBackend(t, srv.url, nil)
	if err := bad.Export(ctx, spans(1, 9)); err == nil || errors.Is(err, trace.ErrUnavailable) {
		t.Errorf("wrong key: %v; want a non-temporary error", err)
	}
}

// TestWeaveSplitAndRetry: requests over the server's limit are split (before sending, and in
// half on 413), and 503s are retried.
func TestWeaveSplitAndRetry(t *testing.T) {
	key := "wandb-weave-split-0123"
	t.Setenv("WANDB_API_KEY", key)
	srv := startWeave(t, key, "WEAVE_TEST_MAX_BYTES=30000", "WEAVE_TEST_FAIL_FIRST=2")
	ctx := context.Background()
	// The plugin believes the limit is 1 MiB: the server's 413s make it split.
	b := newBackend(t, srv.url, map[string]any{"max_request_bytes": float64(1 << 20)})
	if err := b.Export(ctx, spans(20, 3)); err != nil {
		t.Fatal(err)
	}
	st := srv.stats(t)
	if st["too_large"] == 0 || st["failed"] != 2 || st["invalid"] != 0 || st["calls"] != 60 {
		t.Errorf("server stats %v; want 413s, 2 retried 503s, 60 calls", st)
	}
	checkStored(t, srv, key, 20, 3)
	// With the limit known, nothing is refused.
	b2 := newBackend(t, srv.url, map[string]any{"max_request_bytes": 30000.0})
	before := srv.stats(t)["too_large"]
	if err := b2.Export(ctx, spans(20, 4)); err != nil {
		t.Fatal(err)
	}
	if got := srv.stats(t)["too_large"]; got != before {
		t.Errorf("%v more 413s with the limit configured", got-before)
	}
	checkStored(t, srv, key, 20, 4)
}

// TestWeaveOutage: a server that keeps failing makes Export report ErrUnavailable (the host
// spools) after the retries.
func TestWeaveOutage(t *testing.T) {
	t.Setenv("WANDB_API_KEY", "k-0123456789")
	b := newBackend(t, "http://127.0.0.1:1", map[string]any{"retries": 2.0})
	start := time.Now()
	err := b.Export(context.Background(), spans(1, 1))
	if !errors.Is(err, trace.ErrUnavailable) {
		t.Errorf("Export to a closed port: %v; want ErrUnavailable", err)
	}
	if b.Requests["/call/upsert_batch"] != 3 || time.Since(start) > 5*time.Second {
		t.Errorf("%d requests in %s; want 3 (2 retries with backoff)", b.Requests["/call/upsert_batch"], time.Since(start))
	}
}

// TestWeaveCompleteMode: a project that answers CALLS_COMPLETE_MODE_REQUIRED is written
// through /v2/{entity}/{project}/calls/complete from then on.
func TestWeaveCompleteMode(t *testing.T) {
	key := "wandb-weave-complete-0123"
	t.Setenv("WANDB_API_KEY", key)
	srv := startWeave(t, key, "WEAVE_TEST_COMPLETE_MODE=1")
	b := newBackend(t, srv.url, nil)
	ctx := context.Background()
	if err := b.Export(ctx, spans(3, 7)); err != nil {
		t.Fatal(err)
	}
	if err := b.Export(ctx, spans(2, 8)); err != nil {
		t.Fatal(err)
	}
	if b.Requests["/call/upsert_batch"] != 1 || b.Requests["/v2/rl/gsm8k/calls/complete"] != 2 {
		t.Errorf("requests %v; want one refused upsert_batch, then calls/complete", b.Requests)
	}
	if st := srv.stats(t); st["invalid"] != 0 || st["calls_complete"] != 2 || st["calls"] != 15 {
		t.Errorf("server stats %v", st)
	}
	checkStored(t, srv, key, 3, 7)
	checkStored(t, srv, key, 2, 8)
}
