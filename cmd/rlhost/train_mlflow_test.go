package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/internal/mlflowrest/mlflowtest"
	"github.com/rlhost/rlhost/plugins/local"
	"github.com/rlhost/rlhost/plugins/mlflow"
)

// TestTracesMLflowAfterTraining runs `rlhost train` on GSM8K with the default model (2 steps,
// 2 prompts x 2 rollouts, validation at each step) with the mlflow metrics logger and the
// mlflow and local trace backends against a real MLflow server, then reads back through
// MLflow's REST API: traces/search by tags.step (and tags.validate) finds exactly the step's
// trajectories, each with all the spans the rollout recorded (compared span by span with the
// local store of the same run), and every trace is linked to the run that holds the metrics.
func TestTracesMLflowAfterTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	t0 := time.Now()
	srv := mlflowtest.Start(t)
	t.Logf("mlflow server up in %s", time.Since(t0).Round(time.Second))
	buildTraceMLflow.Do(func() {
		out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "rlhost-trace-mlflow"), "../../plugins/mlflow/cmd/rlhost-trace-mlflow").CombinedOutput()
		if err != nil {
			t.Fatalf("building the mlflow trace plugin: %v\n%s", err, out)
		}
	})
	const (
		project = "rlhost-train-mlflow"
		steps   = 2
		batch   = 2
		n       = 2
		valRows = 2
	)
	dir := filepath.Join(t.TempDir(), "run")
	args := tinyRun(t, dir, fmt.Sprint("trainer.total_training_steps=", steps), "trainer.test_freq=1",
		"trainer.val_before_train=false", "trainer.project_name="+project, "trainer.experiment_name=mlflow-proof",
		"trainer.logger=[console,jsonl,mlflow]", "trainer.mlflow_tracking_uri="+srv.URI,
		"actor_rollout_ref.rollout.trace.backend=[mlflow,local]", "actor_rollout_ref.rollout.trace.token2text=true")
	t0 = time.Now()
	_, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	t.Logf("rlhost train (2 steps, validation at each) in %s", time.Since(t0).Round(time.Second))

	// The experiment and its one run, which holds the metrics.
	var exp struct {
		Experiment struct {
			ID string `json:"experiment_id"`
		} `json:"experiment"`
	}
	srv.Do(t, "/api/2.0/mlflow/experiments/get-by-name?experiment_name="+project, nil, &exp)
	var runs struct {
		Runs []struct {
			Info struct {
				RunID   string `json:"run_id"`
				RunName string `json:"run_name"`
				Status  string `json:"status"`
			} `json:"info"`
		} `json:"runs"`
	}
	srv.Do(t, "/api/2.0/mlflow/runs/search", map[string]any{"experiment_ids": []string{exp.Experiment.ID}}, &runs)
	if len(runs.Runs) != 1 {
		t.Fatalf("experiment %s has %d runs; want the one training run (metrics and traces together)", project, len(runs.Runs))
	}
	runID := runs.Runs[0].Info.RunID
	var hist struct {
		Metrics []struct {
			Step  int64   `json:"step"`
			Value float64 `json:"value"`
		} `json:"metrics"`
	}
	srv.Do(t, "/api/2.0/mlflow/metrics/get-history?run_id="+runID+"&metric_key="+url.QueryEscape("critic/score/mean"), nil, &hist)
	if len(hist.Metrics) != steps {
		t.Errorf("run %s: critic/score/mean logged at %d steps; want %d", runID, len(hist.Metrics), steps)
	}

	// The local store of the same run is the record of what the rollout traced.
	st, err := local.OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	want := localTraces(t, st)

	total := 0
	for step := 1; step <= steps; step++ {
		for _, validate := range []bool{false, true} {
			filter := fmt.Sprintf("tags.step = '%d' AND tags.validate = '%t'", step, validate)
			infos := srv.Search(t, exp.Experiment.ID, filter)
			wantN := batch * n
			if validate {
				wantN = valRows
			}
			if len(infos) != wantN {
				t.Errorf("%s: %d traces; want %d", filter, len(infos), wantN)
			}
			groups := map[string][]int{} // sample_index -> rollout_n
			for _, ti := range infos {
				total++
				if ti.Metadata["mlflow.sourceRun"] != runID {
					t.Errorf("%s: trace %s linked to run %q; want %s", filter, ti.TraceID, ti.Metadata["mlflow.sourceRun"], runID)
				}
				if ti.State != "OK" {
					t.Errorf("%s: trace %s state %s", filter, ti.TraceID, ti.State)
				}
				if ti.Tags["step"] != strconv.Itoa(step) || ti.Tags["validate"] != strconv.FormatBool(validate) ||
					ti.Tags["experiment_name"] != "mlflow-proof" || ti.Tags["agent_name"] != "tool_agent" ||
					ti.Tags["task"] != "gsm8k" || ti.Tags["data_source"] != "openai/gsm8k" {
					t.Errorf("%s: trace %s tags %v", filter, ti.TraceID, ti.Tags)
				}
				if _, err := strconv.ParseFloat(ti.Tags["reward"], 64); err != nil {
					t.Errorf("%s: trace %s reward tag %q", filter, ti.TraceID, ti.Tags["reward"])
				}
				rn, _ := strconv.Atoi(ti.Tags["rollout_n"])
				groups[ti.Tags["sample_index"]] = append(groups[ti.Tags["sample_index"]], rn)
				lt, ok := want[ti.TraceID]
				if !ok {
					t.Errorf("%s: trace %s is not in the run's local store", filter, ti.TraceID)
					continue
				}
				delete(want, ti.TraceID)
				checkTraceSpans(t, ti.TraceID, srv.Spans(t, ti.TraceID), lt)
			}
			// Whole groups: every sample with all its rollouts.
			for idx, rs := range groups {
				sort.Ints(rs)
				wantRs := []int{0}
				if !validate {
					wantRs = []int{0, 1}
				}
				if !reflect.DeepEqual(rs, wantRs) {
					t.Errorf("%s: sample %s has rollouts %v; want %v", filter, idx, rs, wantRs)
				}
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("%d traces of the local store are missing from MLflow", len(want))
	}
	// The run's trace list, as MLflow's UI and mlflow.search_traces(run_id=...) ask for it.
	byRun := srv.Search(t, exp.Experiment.ID, "metadata.mlflow.sourceRun = '"+runID+"'")
	if len(byRun) != total || total != steps*(batch*n+valRows) {
		t.Errorf("traces of run %s: %d; searched by step: %d; want %d", runID, len(byRun), total, steps*(batch*n+valRows))
	}
}

// localSpan is a span as the local store keeps it.
type localSpan struct {
	ParentID, Name, Inputs, Outputs, Error string
	Attrs                                  map[string]any
}

// localTraces reads every span of the local store, by MLflow trace id and span id (hex).
func localTraces(t *testing.T, st *local.Store) map[string]map[string]localSpan {
	t.Helper()
	rows, err := st.DB().Query(`SELECT trace_id, span_id, parent_id, name, attributes, inputs, outputs, error FROM spans`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[string]localSpan{}
	for rows.Next() {
		var tid, sid, attrs string
		var s localSpan
		if err := rows.Scan(&tid, &sid, &s.ParentID, &s.Name, &attrs, &s.Inputs, &s.Outputs, &s.Error); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(attrs), &s.Attrs); err != nil {
			t.Fatalf("span %s attributes %q: %v", sid, attrs, err)
		}
		id := mlflow.TraceID(tid)
		if out[id] == nil {
			out[id] = map[string]localSpan{}
		}
		out[id][sid] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkTraceSpans compares a trace's spans in MLflow with the local store's and checks the
// trajectory's shape: one agent_loop root, a generate span per turn, a tool_parse after every
// turn but possibly the last (a response that used up its token budget is not parsed), and a
// tool_call span per parsed call.
func checkTraceSpans(t *testing.T, traceID string, got []mlflowtest.Span, want map[string]localSpan) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("trace %s: %d spans in MLflow, %d recorded", traceID, len(got), len(want))
	}
	count := map[string]int{}
	var turns, parsedCalls int64
	rootID := ""
	for _, s := range got {
		sid := b64hex(s.SpanID)
		w, ok := want[sid]
		if !ok {
			t.Errorf("trace %s: span %s (%s) was not recorded", traceID, sid, s.Name)
			continue
		}
		if s.Name != w.Name || b64hex(s.ParentSpanID) != w.ParentID {
			t.Errorf("trace %s: span %s is %s under %q in MLflow; recorded %s under %q", traceID, sid, s.Name, b64hex(s.ParentSpanID), w.Name, w.ParentID)
		}
		if (w.Error != "") != (s.Status.Code == "STATUS_CODE_ERROR") {
			t.Errorf("trace %s: span %s status %s; recorded error %q", traceID, s.Name, s.Status.Code, w.Error)
		}
		for k, v := range w.Attrs {
			if got := attrJSON(s, k); !reflect.DeepEqual(got, normJSON(v)) {
				t.Errorf("trace %s: span %s attribute %s = %#v in MLflow; recorded %#v", traceID, s.Name, k, got, v)
			}
		}
		for k, v := range map[string]string{"mlflow.spanInputs": w.Inputs, "mlflow.spanOutputs": w.Outputs} {
			if v == "" {
				continue
			}
			var rec any
			json.Unmarshal([]byte(v), &rec)
			if got := attrJSON(s, k); !reflect.DeepEqual(got, rec) {
				t.Errorf("trace %s: span %s %s differs:\nMLflow   %v\nrecorded %v", traceID, s.Name, k, got, rec)
			}
		}
		name := s.Name
		if strings.HasPrefix(name, "tool_call:") {
			name = "tool_call"
		}
		count[name]++
		switch s.Name {
		case "agent_loop":
			rootID = sid
			turns = toInt64(attrJSON(s, "turns"))
			out, _ := attrJSON(s, "mlflow.spanOutputs").(map[string]any)
			in, _ := attrJSON(s, "mlflow.spanInputs").(map[string]any)
			if _, ok := out["response"].(string); !ok || in["prompt"] == nil || !strings.Contains(in["prompt"].(string), "Let's think step by step") {
				t.Errorf("trace %s: root span without the decoded prompt and response (token2text): in %v out %v", traceID, in, out)
			}
		case "generate":
			if attrJSON(s, "mlflow.chat.tokenUsage") == nil || attrJSON(s, "response_tokens") == nil {
				t.Errorf("trace %s: generate span without token usage", traceID)
			}
		case "tool_parse":
			parsedCalls += toInt64(attrJSON(s, "tool_calls"))
		}
	}
	if count["agent_loop"] != 1 || rootID == "" {
		t.Errorf("trace %s: %d agent_loop spans", traceID, count["agent_loop"])
	}
	for _, s := range got {
		if s.Name != "agent_loop" && b64hex(s.ParentSpanID) != rootID {
			t.Errorf("trace %s: span %s is not under the agent_loop span", traceID, s.Name)
		}
	}
	g, p := int64(count["generate"]), int64(count["tool_parse"])
	if g < 1 || g != turns || p != g && p != g-1 || int64(count["tool_call"]) > parsedCalls {
		t.Errorf("trace %s: spans %v, turns %d, parsed calls %d", traceID, count, turns, parsedCalls)
	}
}

// attrJSON is a span attribute as JSON values (objects map[string]any, numbers float64); nil
// if absent. MLflow keeps span attributes as JSON text: a string value is decoded once more.
func attrJSON(s mlflowtest.Span, key string) any {
	v := s.Value(key)
	if str, ok := v.(string); ok {
		var x any
		if json.Unmarshal([]byte(str), &x) == nil {
			return x
		}
	}
	return normJSON(v)
}

func normJSON(v any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}

func toInt64(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// b64hex turns an id of the trace API (base64) into the hex of host/tracing.
func b64hex(s string) string {
	if s == "" {
		return ""
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "bad:" + s
	}
	return hex.EncodeToString(b)
}
