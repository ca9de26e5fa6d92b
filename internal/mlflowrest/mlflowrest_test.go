package mlflowrest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/internal/mlflowrest/mlflowtest"
)

// The client against a real tracking server: experiments found and created (also by many
// clients at once), a run created and read back, and the server's error answers.
func TestClientRealServer(t *testing.T) {
	srv := mlflowtest.Start(t)
	ctx := context.Background()
	c := &Client{Base: srv.URI, HTTP: &http.Client{Timeout: 30 * time.Second}}
	call := func(method, path string, in, out any) error { return c.Call(ctx, method, path, in, out) }

	// Eight clients ask for the same new experiment at once: one id.
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exp, err := EnsureExperiment("rest-test", call)
			if err != nil {
				t.Error(err)
			}
			ids[i] = exp.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("experiment ids %v, want one", ids)
		}
	}
	exp, err := EnsureExperiment("rest-test", call)
	if err != nil || exp.ID != ids[0] || exp.LifecycleStage != "active" {
		t.Fatalf("found again: %+v, %v", exp, err)
	}

	var run struct {
		Run struct {
			Info struct {
				RunID        string `json:"run_id"`
				ExperimentID string `json:"experiment_id"`
			} `json:"info"`
		} `json:"run"`
	}
	if err := call(http.MethodPost, API+"runs/create", map[string]any{"experiment_id": exp.ID, "run_name": "r"}, &run); err != nil {
		t.Fatal(err)
	}
	id := run.Run.Info.RunID
	run.Run.Info.ExperimentID = ""
	if err := call(http.MethodGet, API+"runs/get?run_id="+id, nil, &run); err != nil || run.Run.Info.ExperimentID != exp.ID {
		t.Fatalf("runs/get: %+v, %v", run, err)
	}

	// Error answers: MLflow's code and message, not temporary.
	err = call(http.MethodGet, API+"runs/get?run_id=0123456789abcdef0123456789abcdef", nil, nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != "RESOURCE_DOES_NOT_EXIST" || e.Status != http.StatusNotFound || e.Temporary() || e.Message == "" {
		t.Errorf("missing run: %#v", err)
	}
	err = call(http.MethodPost, API+"runs/log-batch", map[string]any{"run_id": id, "metrics": []map[string]any{{"key": "", "value": 1}}}, nil)
	if !errors.As(err, &e) || e.Code != "INVALID_PARAMETER_VALUE" || e.Status != http.StatusBadRequest || e.Temporary() {
		t.Errorf("bad batch: %#v", err)
	}
	if err := call(http.MethodPost, API+"runs/create", map[string]any{"experiment_id": exp.ID, "x": make(chan int)}, nil); !errors.Is(err, ErrRequest) {
		t.Errorf("a body that is not JSON: %v", err)
	}

	// A stopped server: a connection error, neither an *Error nor ErrRequest.
	srv.Stop()
	err = call(http.MethodGet, API+"runs/get?run_id="+id, nil, nil)
	if err == nil || errors.As(err, &e) || errors.Is(err, ErrRequest) {
		t.Errorf("stopped server: %#v", err)
	}
}

// Answers a tracking server's proxy may give: an HTML 503 (temporary, its text kept short)
// and a 200 that is not JSON.
func TestClientOtherAnswers(t *testing.T) {
	var gotAuth, gotType, gotExtra string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotType, gotExtra = r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.Header.Get("X-Extra")
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("<html>" + strings.Repeat("busy ", 200) + "</html>"))
			return
		}
		w.Write([]byte("<html>ok</html>"))
	}))
	defer ts.Close()
	c := &Client{Base: ts.URL, HTTP: ts.Client(), Header: http.Header{"Authorization": {"Bearer t"}}}
	err := c.Do(context.Background(), http.MethodPost, "/busy", []byte("x"), "application/x-protobuf", map[string]string{"X-Extra": "1"}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Status != 503 || !e.Temporary() || e.Code != "" || len(e.Message) != 500 || !strings.HasPrefix(e.Error(), "HTTP 503: <html>busy") {
		t.Errorf("503: %v", err)
	}
	if gotAuth != "Bearer t" || gotType != "application/x-protobuf" || gotExtra != "1" {
		t.Errorf("headers %q %q %q", gotAuth, gotType, gotExtra)
	}
	var out map[string]any
	if err := c.Call(context.Background(), http.MethodGet, "/ok", nil, &out); !errors.Is(err, ErrAnswer) {
		t.Errorf("a 200 that is not JSON: %v", err)
	}
	if gotType != "" {
		t.Errorf("a request without a body has Content-Type %q", gotType)
	}
	if err := c.Call(context.Background(), http.MethodGet, "/ok", nil, nil); err != nil {
		t.Errorf("an answer nobody reads: %v", err)
	}
}

func TestAuthHeader(t *testing.T) {
	t.Setenv("MLFLOW_TRACKING_TOKEN", "")
	t.Setenv("MLFLOW_TRACKING_USERNAME", "")
	if h := AuthHeader(); len(h) != 0 {
		t.Errorf("no variables: %v", h)
	}
	t.Setenv("MLFLOW_TRACKING_USERNAME", "u")
	t.Setenv("MLFLOW_TRACKING_PASSWORD", "p")
	if got := AuthHeader().Get("Authorization"); got != "Basic dTpw" {
		t.Errorf("basic: %q", got)
	}
	t.Setenv("MLFLOW_TRACKING_TOKEN", "tok")
	if got := AuthHeader().Get("Authorization"); got != "Bearer tok" {
		t.Errorf("token first: %q", got)
	}
}
