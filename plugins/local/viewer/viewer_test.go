package viewer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/plugins/local"
	"github.com/rlhost/rlhost/sdk/trace"
)

func TestParseFilter(t *testing.T) {
	tests := []struct {
		step, sample, rollout, validate, reward string
		want                                    string // fmt of the set fields, or "error"
	}{
		{"", "", "", "", "", ""},
		{"3", "", "", "", "", "step 3..3"},
		{"3-7", "", "", "", "", "step 3..7"},
		{"3-", "", "", "", "", "step 3.."},
		{"-7", "", "", "", "", "step ..7"},
		{"", "12", "1", "true", "", "sample 12 rollout 1 validate true"},
		{"", "", "", "any", "1", "reward 1..1"},
		{"", "", "", "", "0.5-", "reward 0.5.."},
		{"", "", "", "", "-0.5", "reward ..0.5"},
		{"", "", "", "", "-1--0.5", "reward -1..-0.5"},
		{"", "", "", "", "1e-3-1", "reward 0.001..1"},
		{"x", "", "", "", "", "error"},
		{"1-x", "", "", "", "", "error"},
		{"", "a", "", "", "", "error"},
		{"", "", "b", "", "", "error"},
		{"", "", "", "maybe", "", "error"},
		{"", "", "", "", "high", "error"},
		{"-", "", "", "", "", "error"},
	}
	for _, tt := range tests {
		f, err := ParseFilter(tt.step, tt.sample, tt.rollout, tt.validate, tt.reward)
		got := describe(f)
		if err != nil {
			got = "error"
		}
		if got != tt.want {
			t.Errorf("ParseFilter(%q,%q,%q,%q,%q) = %q (%v); want %q", tt.step, tt.sample, tt.rollout, tt.validate, tt.reward, got, err, tt.want)
		}
	}
}

func describe(f local.Filter) string {
	var parts []string
	rng := func(name string, lo, hi any) {
		s := func(v any) string {
			switch x := v.(type) {
			case *int64:
				if x != nil {
					return fmt.Sprint(*x)
				}
			case *float64:
				if x != nil {
					return fmt.Sprint(*x)
				}
			}
			return ""
		}
		if a, b := s(lo), s(hi); a != "" || b != "" {
			parts = append(parts, name+" "+a+".."+b)
		}
	}
	rng("step", f.StepMin, f.StepMax)
	if f.Sample != nil {
		parts = append(parts, fmt.Sprint("sample ", *f.Sample))
	}
	if f.Rollout != nil {
		parts = append(parts, fmt.Sprint("rollout ", *f.Rollout))
	}
	if f.Validate != nil {
		parts = append(parts, fmt.Sprint("validate ", *f.Validate))
	}
	rng("reward", f.RewardMin, f.RewardMax)
	return strings.Join(parts, " ")
}

// FuzzParseFilter: query parameters come from anyone who can reach the port; no input panics,
// and a range parsed from a number round-trips.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"3", "3-7", "-7", "3-", "0.5-", "-1--0.5", "1e-3-1", "x", "-", "", "--", "1-2-3"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, step, reward string) {
		flt, err := ParseFilter(step, step, step, step, reward)
		if err == nil && flt.StepMin != nil && flt.StepMax != nil && step == fmt.Sprint(*flt.StepMin) && *flt.StepMin != *flt.StepMax {
			t.Errorf("step %q parsed as a range %d..%d", step, *flt.StepMin, *flt.StepMax)
		}
	})
}

func TestAPI(t *testing.T) {
	dir := t.TempDir()
	b := &local.Backend{}
	ctx := context.Background()
	if _, err := b.Init(ctx, trace.Run{RunID: "r", Experiment: "e", RunDir: dir, Config: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	var spans []trace.Span
	for step := int64(1); step <= 2; step++ {
		id := fmt.Sprintf("%032d", step)
		attrs := map[string]any{"step": step, "sample_index": int64(7), "rollout_n": int64(0), "validate": false, "reward": float64(step - 1)}
		spans = append(spans,
			trace.Span{TraceID: id, SpanID: id[:15] + "g", ParentID: id[:16], Name: "generate", Start: t0, End: t0.Add(time.Millisecond),
				Attributes: map[string]any{"step": step}, Inputs: `{"prompt":"q"}`, Outputs: fmt.Sprintf(`{"response":"answer %d"}`, step)},
			trace.Span{TraceID: id, SpanID: id[:16], Name: "agent_loop", Start: t0, End: t0.Add(time.Second), Attributes: attrs,
				Inputs: `{"prompt":"q"}`, Outputs: fmt.Sprintf(`{"response":"answer %d"}`, step)})
	}
	if err := b.Export(ctx, spans); err != nil {
		t.Fatal(err)
	}
	b.Shutdown(ctx)
	st, err := local.OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := httptest.NewServer(Handler(st))
	defer srv.Close()
	get := func(path string, wantCode int) map[string]any {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != wantCode {
			t.Fatalf("GET %s: %d; want %d", path, resp.StatusCode, wantCode)
		}
		var m map[string]any
		if wantCode == 200 && strings.HasPrefix(path, "/api/") {
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
		return m
	}
	get("/", 200)
	get("/viewer.js", 200)
	if m := get("/api/summary", 200); len(m["steps"].([]any)) != 2 {
		t.Errorf("summary %v", m)
	}
	if m := get("/api/trajectories?step=2", 200); m["total"] != 1.0 {
		t.Errorf("step 2: %v", m)
	}
	if m := get("/api/trajectories?reward=0.5-", 200); m["total"] != 1.0 {
		t.Errorf("reward >= 0.5: %v", m)
	}
	get("/api/trajectories?step=x", 400)
	if m := get("/api/trajectory/"+fmt.Sprintf("%032d", 2), 200); len(m["chat"].([]any)) != 2 {
		t.Errorf("trajectory %v", m)
	}
	get("/api/trajectory/zzz", 404)
	m := get("/api/compare?sample=7", 200)
	diffs := m["diffs"].([]any)
	if len(m["steps"].([]any)) != 2 || len(diffs) != 1 {
		t.Fatalf("compare %v", m)
	}
	ops, _ := json.Marshal(diffs[0].(map[string]any)["ops"])
	if string(ops) != `[{"op":"=","text":"answer"},{"op":"-","text":"1"},{"op":"+","text":"2"}]` {
		t.Errorf("diff %s", ops)
	}
	get("/api/compare?sample=8", 404)
	get("/api/compare?sample=x", 400)

	// Counterparts: sample 7 was traced at 2 steps, one rollout each.
	item := get("/api/trajectories?step=1", 200)["items"].([]any)[0].(map[string]any)
	if item["sample_steps"] != 2.0 || item["group_size"] != 1.0 {
		t.Errorf("counterparts of %v", item)
	}
	g := get("/api/group?step=2&sample=7", 200)
	if rs := g["rollouts"].([]any); len(rs) != 1 || rs[0].(map[string]any)["text"] != "answer 2" || rs[0].(map[string]any)["reward"] != 1.0 {
		t.Errorf("group %v", g)
	}
	get("/api/group?step=3&sample=7", 404)
	get("/api/group?step=x&sample=7", 400)
}

// TestAPIRuns: /api/runs pairs two stores' validation; without a second store, or without a
// validation step in common, it answers 404.
func TestAPIRuns(t *testing.T) {
	ctx := context.Background()
	mk := func(answers ...string) *local.Store {
		st, err := local.Open(filepath.Join(t.TempDir(), "traces.db"), true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		t0 := time.Unix(1700000000, 0)
		for step := int64(0); step <= 1; step++ {
			for sample, a := range answers {
				id := fmt.Sprintf("%016d%016d", step, sample)
				attrs := map[string]any{"step": step, "sample_index": int64(sample), "rollout_n": int64(0), "validate": true,
					"reward": float64(len(a) % 2)}
				if err := st.Insert(ctx, []trace.Span{{TraceID: id, SpanID: id[:16], Name: "agent_loop", Start: t0, End: t0,
					Attributes: attrs, Inputs: `{"prompt":"q"}`, Outputs: fmt.Sprintf(`{"response":%q}`, a)}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return st
	}
	a, b := mk("#### 4", "x"), mk("#### 5", "x")
	get := func(h http.Handler, path string, want int) map[string]any {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Fatalf("GET %s: %d %s; want %d", path, rec.Code, rec.Body, want)
		}
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		return m
	}
	get(Handler(a), "/api/runs", 404)
	m := get(HandlerCompare(a, b), "/api/runs", 200)
	if m["step"] != 1.0 || len(m["pairs"].([]any)) != 2 {
		t.Fatalf("runs %v", m)
	}
	p := m["pairs"].([]any)[0].(map[string]any)
	ops, _ := json.Marshal(p["diff"])
	if string(ops) != `[{"op":"=","text":"####"},{"op":"-","text":"4"},{"op":"+","text":"5"}]` {
		t.Errorf("diff %s", ops)
	}
	if m := get(HandlerCompare(a, b), "/api/summary", 200); m["against"] != b.Path() {
		t.Errorf("summary against %v", m["against"])
	}
	get(HandlerCompare(a, b), "/api/runs?step=0", 200)
	get(HandlerCompare(a, b), "/api/runs?step=5", 404)
	get(HandlerCompare(a, b), "/api/runs?step=x", 400)
}
