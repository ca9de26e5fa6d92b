// Package mlflowtest starts a real MLflow tracking server (the pip package) for tests, each on
// its own free port with its own SQLite store, and reads traces back from it.
package mlflowtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Binary finds the mlflow executable: $RLHOST_MLFLOW, ~/.cache/rlhost/mlflow-venv/bin/mlflow
// (where `make tracing-mlflow` installs it), then $PATH; "" if none.
func Binary() string {
	if p := os.Getenv("RLHOST_MLFLOW"); p != "" {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "rlhost", "mlflow-venv", "bin", "mlflow")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, _ := exec.LookPath("mlflow")
	return p
}

// Server is a running MLflow server.
type Server struct {
	URI  string
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	auth bool // the basic-auth app (StartAuth)
}

// Start starts a server for t (stopped at the end of the test). Without mlflow the test is
// skipped, or fails when RLHOST_MLFLOW_E2E=1 or CI is set.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		msg := "mlflow is not installed (make tracing-mlflow installs it, or set RLHOST_MLFLOW)"
		if os.Getenv("RLHOST_MLFLOW_E2E") == "1" || os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s, err := Launch(bin, t.TempDir())
	if s != nil {
		t.Cleanup(s.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// StartAuth is Start with MLflow's basic-auth app (--app-name basic-auth): every call needs
// the admin user's credentials, admin and password.
func StartAuth(t testing.TB, password string) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		Start(t) // skips or fails as Start does
	}
	dir := t.TempDir()
	ini := fmt.Sprintf("[mlflow]\ndefault_permission = READ\ndatabase_uri = sqlite:///%s\nadmin_username = admin\nadmin_password = %s\nauthorization_function = mlflow.server.auth:authenticate_request_basic_auth\n",
		filepath.Join(dir, "basic_auth.db"), password)
	if err := os.WriteFile(filepath.Join(dir, "basic_auth.ini"), []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{bin: bin, dir: dir, port: port, URI: fmt.Sprintf("http://127.0.0.1:%d", port), auth: true}
	err = s.Restart()
	t.Cleanup(s.Stop)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Launch starts the mlflow executable bin as a server on a free port with its store in dir,
// for a server that outlives one test (a package's tests share it; TestMain stops it).
func Launch(bin, dir string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{bin: bin, dir: dir, port: port, URI: fmt.Sprintf("http://127.0.0.1:%d", port)}
	return s, s.Restart()
}

// Restart starts the server (again, on the same port and store) and waits until /health
// answers (at most 2 minutes: the first start migrates the database).
func (s *Server) Restart() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	s.cmd = exec.Command(s.bin, "server",
		"--backend-store-uri", "sqlite:///"+filepath.Join(s.dir, "mlflow.db"),
		"--artifacts-destination", filepath.Join(s.dir, "art"),
		"--host", "127.0.0.1", "--port", fmt.Sprint(s.port), "--workers", "1")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// No job runner: it starts a dozen huey consumer processes the tests do not need.
	s.cmd.Env = append(os.Environ(), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false")
	if s.auth {
		s.cmd.Args = append(s.cmd.Args, "--app-name", "basic-auth")
		s.cmd.Env = append(s.cmd.Env, "MLFLOW_AUTH_CONFIG_PATH="+filepath.Join(s.dir, "basic_auth.ini"),
			"MLFLOW_FLASK_SERVER_SECRET_KEY=rlhost-test")
	}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	s.done = done
	go func(c *exec.Cmd) { c.Wait(); close(done) }(s.cmd)
	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		select {
		case <-done:
			return fmt.Errorf("mlflow server exited; log:\n%s", s.Log())
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := client.Get(s.URI + "/health"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.TrimSpace(string(body)) == "OK" {
				return nil
			}
		}
	}
	s.Stop()
	return fmt.Errorf("mlflow server not healthy after 2 minutes; log:\n%s", s.Log())
}

// Stop ends the server's process group (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	pgid := s.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Log returns the last lines of the server's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

// Do calls the REST API with a JSON body (nil: GET) and decodes the answer into out.
func (s *Server) Do(t testing.TB, path string, in, out any) {
	t.Helper()
	method, body := http.MethodGet, []byte(nil)
	if in != nil {
		method = http.MethodPost
		body, _ = json.Marshal(in)
	}
	req, _ := http.NewRequest(method, s.URI+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: HTTP %d: %s", path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, data)
		}
	}
}

// TraceInfo is what traces/search returns per trace.
type TraceInfo struct {
	TraceID  string            `json:"trace_id"`
	State    string            `json:"state"`
	Tags     map[string]string `json:"tags"`
	Metadata map[string]string `json:"trace_metadata"`
}

// Search returns every trace of the experiment matching filter (e.g. "tags.step = '3'").
func (s *Server) Search(t testing.TB, expID, filter string) []TraceInfo {
	t.Helper()
	var all []TraceInfo
	token := ""
	for {
		req := map[string]any{"locations": []any{map[string]any{"type": "MLFLOW_EXPERIMENT",
			"mlflow_experiment": map[string]any{"experiment_id": expID}}}, "filter": filter, "max_results": 500}
		if token != "" {
			req["page_token"] = token
		}
		var out struct {
			Traces        []TraceInfo `json:"traces"`
			NextPageToken string      `json:"next_page_token"`
		}
		s.Do(t, "/api/3.0/mlflow/traces/search", req, &out)
		all = append(all, out.Traces...)
		if out.NextPageToken == "" {
			return all
		}
		token = out.NextPageToken
	}
}

// Span is a stored span, as the trace API returns it (OTLP JSON: ids in base64, attributes
// as a key/value list).
type Span struct {
	TraceID      string `json:"trace_id"`
	SpanID       string `json:"span_id"`
	ParentSpanID string `json:"parent_span_id"`
	Name         string `json:"name"`
	Attributes   []struct {
		Key   string         `json:"key"`
		Value map[string]any `json:"value"`
	} `json:"attributes"`
	Status struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"status"`
}

// Attr returns an attribute's OTLP value (e.g. {"string_value": "3"}), nil if absent.
func (s Span) Attr(key string) map[string]any {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}

// Value returns an attribute decoded to what it holds (nil if absent): the trace API answers
// with the OTLP AnyValue of the decoded JSON text, so a JSON object comes back as a kvlist_value,
// a number as int_value (a decimal string in protobuf's JSON) or double_value. Objects become
// map[string]any, arrays []any, numbers float64.
func (s Span) Value(key string) any {
	v := s.Attr(key)
	if v == nil {
		return nil
	}
	return anyValue(v)
}

func anyValue(v map[string]any) any {
	if x, ok := v["string_value"]; ok {
		return x
	}
	if x, ok := v["bool_value"]; ok {
		return x
	}
	if x, ok := v["int_value"]; ok {
		switch n := x.(type) {
		case string:
			f, _ := strconv.ParseFloat(n, 64)
			return f
		default:
			return n
		}
	}
	if x, ok := v["double_value"]; ok {
		return x
	}
	if x, ok := v["array_value"].(map[string]any); ok {
		vals, _ := x["values"].([]any)
		out := make([]any, 0, len(vals))
		for _, e := range vals {
			m, _ := e.(map[string]any)
			out = append(out, anyValue(m))
		}
		return out
	}
	if x, ok := v["kvlist_value"].(map[string]any); ok {
		vals, _ := x["values"].([]any)
		out := make(map[string]any, len(vals))
		for _, e := range vals {
			kv, _ := e.(map[string]any)
			k, _ := kv["key"].(string)
			m, _ := kv["value"].(map[string]any)
			out[k] = anyValue(m)
		}
		return out
	}
	return nil
}

// Spans returns a trace's spans (GET /api/3.0/mlflow/traces/get).
func (s *Server) Spans(t testing.TB, traceID string) []Span {
	t.Helper()
	var out struct {
		Trace struct {
			Spans []Span `json:"spans"`
		} `json:"trace"`
	}
	s.Do(t, "/api/3.0/mlflow/traces/get?trace_id="+traceID, nil, &out)
	return out.Trace.Spans
}

// Dir is the server's directory (its SQLite store, artifacts and log).
func (s *Server) Dir() string { return s.dir }
