package genchat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlhost/rlhost/sdk/task"
)

func configured(t *testing.T, url string, extra map[string]any) *Task {
	t.Helper()
	tk := New()
	cfg := map[string]any{"url": url, "timeout_s": 1.0, "poll_s": 0.2}
	for k, v := range extra {
		cfg[k] = v
	}
	if err := tk.Configure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return tk
}

var startReq = task.StartRequest{Row: sampleRow, TrajectoryID: "u-0", EndpointBaseURL: "http://127.0.0.1:1/t/k/v1", EndpointAPIKey: "k"}

func TestConfigure(t *testing.T) {
	for _, tc := range []struct {
		cfg map[string]any
		msg string
	}{
		{map[string]any{"ulr": "http://x"}, `unknown key "ulr" (known: url, timeout_s, poll_s, score_method, judge); did you mean "url"?`},
		{map[string]any{"url": "ftp://x"}, `"url": want an http(s) URL`},
		{map[string]any{"url": 3.0}, `"url": want an http(s) URL`},
		{map[string]any{"timeout_s": "soon"}, `"timeout_s": want a number of seconds`},
		{map[string]any{"poll_s": -1.0}, `"poll_s": want a positive number`},
		{map[string]any{"score_method": "fuzzy"}, `"score_method": want "strict" or "flexible"`},
	} {
		err := New().Configure(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Configure(%v) = %v, want %q", tc.cfg, err, tc.msg)
		}
	}
	if _, err := New().Start(context.Background(), startReq); err == nil || !strings.Contains(err.Error(), "no url") {
		t.Errorf("Start before Configure: %v", err)
	}
}

// env is a scripted environment: POST /episodes answers startBody, GET answers statusBody
// (after delay), and it counts DELETEs.
type env struct {
	startCode int
	startBody string
	status    string
	delay     time.Duration
	deletes   atomic.Int32
	got       startBody
}

func (e *env) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == "POST" && r.URL.Path == "/episodes":
		_ = json.NewDecoder(r.Body).Decode(&e.got)
		w.WriteHeader(e.startCode)
		w.Write([]byte(e.startBody))
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/episodes/ep1"):
		select {
		case <-time.After(e.delay):
		case <-r.Context().Done():
			return
		}
		w.Write([]byte(e.status))
	case r.Method == "DELETE":
		e.deletes.Add(1)
	default:
		http.NotFound(w, r)
	}
}

func TestEpisodes(t *testing.T) {
	ok := `{"episode_id": "ep1"}`
	for _, tc := range []struct {
		name    string
		env     *env
		err     string // "" : success
		reward  *float64
		deletes int32
	}{
		{"reward from the environment", &env{startCode: 200, startBody: ok, status: `{"done": true, "reward": 1, "messages": [{"role": "user", "content": "q"}], "metrics": {"env/model_calls": 2}}`}, "", ptr(1), 0},
		{"reward from Score", &env{startCode: 200, startBody: ok, status: `{"done": true, "reward": null}`}, "", nil, 0},
		{"malformed start answer", &env{startCode: 200, startBody: `{"episode_id": `}, "POST http://ENV/episodes: the answer is not the expected JSON", nil, 0},
		{"no episode id", &env{startCode: 200, startBody: `{}`}, "answered without episode_id", nil, 0},
		{"start refused", &env{startCode: 503, startBody: `busy`}, "503 Service Unavailable: busy", nil, 0},
		{"malformed status", &env{startCode: 200, startBody: ok, status: `done`}, "is not the expected JSON", nil, 1},
		{"status without done", &env{startCode: 200, startBody: ok, status: `{"reward": 1}`}, `the status has no "done"`, nil, 1},
		{"episode error", &env{startCode: 200, startBody: ok, status: `{"done": true, "error": "openai.APIConnectionError"}`}, "episode ep1 (trajectory u-0) failed: openai.APIConnectionError", nil, 0},
		{"never answers", &env{startCode: 200, startBody: ok, status: `{"done": true}`, delay: time.Hour}, "did not finish within 1s", nil, 1},
		{"never done", &env{startCode: 200, startBody: ok, status: `{"done": false}`}, "did not finish within 1s", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.env)
			defer srv.Close()
			tk := configured(t, srv.URL, nil)
			ctx := context.Background()
			start := time.Now()
			st, err := tk.Start(ctx, startReq)
			var res task.EndResult
			if err == nil {
				if tc.env.got.Endpoint.APIKey != "k" || tc.env.got.Endpoint.BaseURL != startReq.EndpointBaseURL || tc.env.got.Row.RewardModel.GroundTruth != "72" {
					t.Fatalf("the environment got %+v", tc.env.got)
				}
				res, err = tk.End(ctx, task.EndRequest{InstanceID: st.InstanceID})
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %v", time.Since(start))
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), srv.URL, "http://ENV"), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if got := tc.env.deletes.Load(); got != tc.deletes {
					t.Fatalf("%d DELETEs, want %d", got, tc.deletes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.HasReward != (tc.reward != nil) || tc.reward != nil && res.Reward != *tc.reward {
				t.Fatalf("reward %v/%v, want %v", res.HasReward, res.Reward, tc.reward)
			}
			if _, err := tk.End(ctx, task.EndRequest{InstanceID: st.InstanceID}); err == nil || !strings.Contains(err.Error(), "unknown or ended instance") {
				t.Fatalf("second End: %v", err)
			}
		})
	}
}

func TestAbortAndObs(t *testing.T) {
	e := &env{startCode: 200, startBody: `{"episode_id": "ep1"}`}
	srv := httptest.NewServer(e)
	defer srv.Close()
	tk := configured(t, srv.URL, nil)
	st, err := tk.Start(context.Background(), startReq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Obs(context.Background(), task.ObsRequest{InstanceID: st.InstanceID}); err == nil || !strings.Contains(err.Error(), "Obs is not used") {
		t.Fatalf("Obs: %v", err)
	}
	if _, err := tk.Obs(context.Background(), task.ObsRequest{InstanceID: "nope"}); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("Obs of an unknown instance: %v", err)
	}
	if _, err := tk.End(context.Background(), task.EndRequest{InstanceID: st.InstanceID, Aborted: true}); err != nil || e.deletes.Load() != 1 {
		t.Fatalf("abort: %v, %d DELETEs", err, e.deletes.Load())
	}
	noEndpoint := startReq
	noEndpoint.EndpointAPIKey = ""
	if _, err := tk.Start(context.Background(), noEndpoint); err == nil || !strings.Contains(err.Error(), "without an endpoint") {
		t.Fatalf("Start without endpoint: %v", err)
	}
}

func TestScoreAndPreprocess(t *testing.T) {
	tk := New()
	res, _ := tk.Score(context.Background(), []task.ScoreItem{
		{Solution: "so #### 72", GroundTruth: "72"}, {Solution: "it is 71", GroundTruth: "72"},
		{Solution: "72", GroundTruth: int64(72)}, {Solution: "72", GroundTruth: []any{1}}})
	if res[0].Score != 1 || res[1].Score != 0 || res[2].Score != 1 || res[3].Err == "" {
		t.Fatalf("scores %+v", res)
	}
	row, err := tk.Preprocess(context.Background(), task.Record{Index: 3, Split: "train", Data: map[string]any{"question": "2+3?", "answer": "#### 5"}})
	if err != nil || row.RewardModel.GroundTruth != "5" || row.AgentName != "" || row.Prompt[0].Content != "2+3?" {
		t.Fatalf("row %+v, %v", row, err)
	}
	if _, err := tk.Preprocess(context.Background(), task.Record{Index: 4, Split: "train", Data: map[string]any{"q": 1}}); err == nil ||
		!strings.Contains(err.Error(), "record 4") {
		t.Fatalf("bad record: %v", err)
	}
}

func ptr(f float64) *float64 { return &f }
