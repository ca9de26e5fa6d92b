package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/sdk/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// trajectory makes the spans of one trajectory as host/tracing would with token2text: a
// generate turn, a tool call, a second turn whose prompt extends the first, and the root. The
// generate spans hold the token ids and the text beside them: prompt 1-5, response 6-8, the
// observation 9-10 (after the 8 tokens before it), response 11, 12, 13 and the step.
func trajectory(id string, step, sample, rollout int64, reward float64, response string) []trace.Span {
	t0 := time.Unix(1700000000, 0).Add(time.Duration(step) * time.Minute)
	common := func() map[string]any {
		return map[string]any{"step": step, "sample_index": sample, "rollout_n": rollout, "validate": false}
	}
	g1 := common()
	g1["prompt_tokens"], g1["response_tokens"] = int64(5), int64(3)
	g2 := common()
	g2["prompt_tokens"], g2["response_tokens"], g2["prompt_offset"] = int64(10), int64(4), int64(8)
	root := common()
	for k, v := range map[string]any{"experiment_name": "exp", "agent_name": "tool_agent", "task": "gsm8k",
		"data_source": "openai/gsm8k", "reward": reward, "turns": int64(2), "prompt_tokens": int64(15), "response_tokens": int64(7),
		"advantage": reward - 0.5} {
		root[k] = v
	}
	return []trace.Span{
		{TraceID: id, SpanID: id + "-g1", ParentID: id + "-r", Name: "generate", Start: t0.Add(1), End: t0.Add(2), Attributes: g1,
			Inputs:  `{"prompt":"What is 6*7?","prompt_ids":[1,2,3,4,5]}`,
			Outputs: `{"response":"<tool_call>calc</tool_call>","response_ids":[6,7,8]}`},
		{TraceID: id, SpanID: id + "-t", ParentID: id + "-r", Name: "tool_call:calc_gsm8k_reward", Start: t0.Add(3), End: t0.Add(4),
			Attributes: common(), Inputs: `{"answer":"42"}`, Outputs: `{"text":"Current parsed answer=42 reward=1.0"}`},
		{TraceID: id, SpanID: id + "-g2", ParentID: id + "-r", Name: "generate", Start: t0.Add(5), End: t0.Add(6), Attributes: g2,
			Inputs:  `{"prompt_delta":"tool: reward=1.0","prompt_delta_ids":[9,10]}`,
			Outputs: `{"response":` + mustJSON(response) + fmt.Sprintf(`,"response_ids":[11,12,13,%d]}`, step)},
		{TraceID: id, SpanID: id + "-r", Name: "agent_loop", Start: t0, End: t0.Add(7), Attributes: root,
			Inputs: `{"prompt":"What is 6*7?"}`, Outputs: `{"response":` + mustJSON("<tool_call>calc</tool_call> "+response) + `}`},
	}
}

func mustJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

func testStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	b := &Backend{}
	ctx := context.Background()
	if _, err := b.Init(ctx, trace.Run{Project: "p", Experiment: "exp", RunID: "r1", RunDir: dir, Config: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	for step := int64(1); step <= 3; step++ {
		for sample := int64(0); sample < 2; sample++ {
			for k := int64(0); k < 2; k++ {
				id := fmt.Sprintf("%02d%02d%02d", step, sample, k) + strings.Repeat("a", 26)
				reward := float64((step + k) % 2)
				resp := fmt.Sprintf("the answer is %d so #### %d", 40+step, 40+step)
				if err := b.Export(ctx, trajectory(id, step, sample, k, reward, resp)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dir
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func boolp(v bool) *bool     { return &v }

func TestList(t *testing.T) {
	st, _ := testStore(t)
	ctx := context.Background()
	tests := []struct {
		name string
		f    Filter
		want int
	}{
		{"all", Filter{}, 12},
		{"step 2", Filter{StepMin: i64(2), StepMax: i64(2)}, 4},
		{"steps 2-", Filter{StepMin: i64(2)}, 8},
		{"sample 1", Filter{Sample: i64(1)}, 6},
		{"rollout 1 of sample 0", Filter{Sample: i64(0), Rollout: i64(1)}, 3},
		{"validation", Filter{Validate: boolp(true)}, 0},
		{"training", Filter{Validate: boolp(false)}, 12},
		{"reward 1", Filter{RewardMin: f64(1), RewardMax: f64(1)}, 6},
		{"reward at most 0.5", Filter{RewardMax: f64(0.5)}, 6},
		{"id prefix", Filter{TraceID: "0201"}, 2},
		{"id prefix with a LIKE wildcard", Filter{TraceID: "02%"}, 0},
		{"limit", Filter{Limit: 5}, 5},
		{"offset", Filter{Offset: 10}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.List(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want {
				t.Errorf("%d trajectories; want %d", len(got), tt.want)
			}
		})
	}
	got, _ := st.List(ctx, Filter{Limit: 1})
	want := Trajectory{TraceID: "010000" + strings.Repeat("a", 26), Step: 1, Reward: 1, ExperimentName: "exp", AgentName: "tool_agent",
		Task: "gsm8k", DataSource: "openai/gsm8k", Start: got[0].Start, End: got[0].End, PromptTokens: 15, ResponseTokens: 7,
		Turns: 2, Prompt: "What is 6*7?", Response: "<tool_call>calc</tool_call> the answer is 41 so #### 41",
		Advantage: f64(0.5), SampleSteps: 3, GroupSize: 2}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("first trajectory\n%+v\nwant\n%+v", got[0], want)
	}
	if n, _ := st.Count(ctx, Filter{Sample: i64(1)}); n != 6 {
		t.Errorf("Count = %d; want 6", n)
	}
	steps, err := st.Steps(ctx)
	if err != nil || len(steps) != 3 || steps[1].Trajectories != 4 || steps[1].Samples != 2 || steps[1].MeanReward != 0.5 {
		t.Errorf("Steps = %+v, %v", steps, err)
	}
	runs, err := st.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].RunID != "r1" || runs[0].Experiment != "exp" {
		t.Errorf("Runs = %+v, %v", runs, err)
	}
}

func TestGetAndChat(t *testing.T) {
	st, _ := testStore(t)
	tr, spans, err := st.Get(context.Background(), "020101")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Step != 2 || tr.SampleIndex != 1 || tr.RolloutN != 1 || len(spans) != 4 || spans[0].Name != "agent_loop" {
		t.Fatalf("Get: %+v, %d spans", tr, len(spans))
	}
	if spans[1].Attributes["prompt_tokens"] != int64(5) {
		t.Errorf("attributes round trip: %#v", spans[1].Attributes)
	}
	var roles []string
	for _, m := range Chat(spans, nil) {
		roles = append(roles, m.Role+":"+m.Content)
	}
	want := []string{"user:What is 6*7?", "assistant:<tool_call>calc</tool_call>", "tool:Current parsed answer=42 reward=1.0",
		"context:tool: reward=1.0", "assistant:the answer is 42 so #### 42"}
	if strings.Join(roles, "|") != strings.Join(want, "|") {
		t.Errorf("chat\n%q\nwant\n%q", roles, want)
	}
	if _, _, err := st.Get(context.Background(), "02"); err == nil || !strings.Contains(err.Error(), "several") {
		t.Errorf("ambiguous prefix: %v", err)
	}
	if _, _, err := st.Get(context.Background(), "ff"); err == nil {
		t.Error("unknown id: no error")
	}
}

// TestChatWithoutText: runs without token2text show the token ids.
func TestChatWithoutText(t *testing.T) {
	spans := []trace.Span{
		{SpanID: "r", Name: "agent_loop", Attributes: map[string]any{}},
		{SpanID: "g", ParentID: "r", Name: "generate", Inputs: `{"prompt_ids":[1,2]}`, Outputs: `{"response_ids":[3]}`, Attributes: map[string]any{}},
		{SpanID: "p", ParentID: "r", Name: "tool_parse", Outputs: `{"tool_calls":[]}`},
		{SpanID: "g2", ParentID: "r", Name: "generate", Inputs: `{"prompt_delta_ids":[4]}`, Outputs: `{"response_ids":[5]}`,
			Attributes: map[string]any{"prompt_offset": int64(3)}},
	}
	var got []string
	for _, m := range Chat(spans, nil) {
		got = append(got, m.Role+":"+m.Content)
	}
	if s := strings.Join(got, "|"); s != "user:[1,2]|assistant:[3]|parse:{\"tool_calls\":[]}|context:[4]|assistant:[5]" {
		t.Errorf("chat %s", s)
	}
	// With the run's tokenizer the ids are decoded (here a table of words).
	words := map[int]string{1: "What", 2: " is 6*7?", 3: "<tool_call>", 4: "result 42", 5: "#### 42"}
	dec := func(ids []int) string {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(words[id])
		}
		return b.String()
	}
	got = got[:0]
	for _, m := range Chat(spans, dec) {
		got = append(got, m.Role+":"+m.Content)
	}
	if s := strings.Join(got, "|"); s != "user:What is 6*7?|assistant:<tool_call>|parse:{\"tool_calls\":[]}|context:result 42|assistant:#### 42" {
		t.Errorf("decoded chat %s", s)
	}
	if s := ResponseText(Trajectory{}, spans, dec); s != "<tool_call>\n#### 42" {
		t.Errorf("decoded response text %q", s)
	}
}

func TestInsertIsIdempotent(t *testing.T) {
	st, _ := testStore(t)
	ctx := context.Background()
	spans, _ := st.Spans(ctx, "010000"+strings.Repeat("a", 26))
	if err := st.Insert(ctx, spans); err != nil { // a batch retried after a timeout
		t.Fatal(err)
	}
	if n, _ := st.Count(ctx, Filter{}); n != 12 {
		t.Errorf("%d trajectories after a repeated batch; want 12", n)
	}
	var n int
	st.DB().QueryRow(`SELECT count(*) FROM spans`).Scan(&n)
	if n != 48 {
		t.Errorf("%d spans; want 48", n)
	}
}

func TestBackendErrors(t *testing.T) {
	ctx := context.Background()
	b := &Backend{}
	err := b.Export(ctx, []trace.Span{{TraceID: "t", SpanID: "s"}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Export before Init: %v; want FailedPrecondition", err)
	}
	if _, err := b.Init(ctx, trace.Run{RunDir: t.TempDir(), Config: map[string]any{"pth": "x"}}); err == nil ||
		!strings.Contains(err.Error(), `local config: unknown key "pth" (known: path); did you mean "path"?`) || !errors.Is(err, trace.ErrInvalidArgument) {
		t.Errorf("Init with a misspelt key: %v", err)
	}
	if _, err := b.Init(ctx, trace.Run{RunDir: t.TempDir(), Config: map[string]any{"path": int64(3)}}); err == nil ||
		!strings.Contains(err.Error(), `local config key "path": want a string, got 3`) || !errors.Is(err, trace.ErrInvalidArgument) {
		t.Errorf("Init with a path that is not a string: %v", err)
	}
	if _, err := b.Init(ctx, trace.Run{Config: map[string]any{}}); err == nil {
		t.Error("Init without a run directory succeeded")
	}
	path := filepath.Join(t.TempDir(), "x", "t.db")
	url, err := b.Init(ctx, trace.Run{Config: map[string]any{"path": path}})
	if err != nil || url != "file://"+path {
		t.Fatalf("Init with a path: %q %v", url, err)
	}
	if err := b.Export(ctx, []trace.Span{{TraceID: "t", SpanID: ""}}); err == nil {
		t.Error("span without an id stored")
	}
	if _, err := OpenRun(t.TempDir()); err == nil || !strings.Contains(err.Error(), "traces.db") {
		t.Errorf("OpenRun of a directory without traces: %v", err)
	}
}

func TestCompareAndDiff(t *testing.T) {
	st, _ := testStore(t)
	groups, err := st.Compare(context.Background(), 1, false, []int64{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Step != 1 || groups[1].Step != 3 || len(groups[1].Rollouts) != 2 {
		t.Fatalf("groups %+v", groups)
	}
	r := groups[1].Rollouts[1]
	if r.RolloutN != 1 || r.Reward != 0 || r.Words != 8 || !strings.HasSuffix(r.Text, "#### 43") {
		t.Errorf("rollout %+v", r)
	}
	if _, err := st.Compare(context.Background(), 9, false, nil); err == nil {
		t.Error("compare of an untraced sample: no error")
	}
}

// TestCounterparts: each trajectory knows how many steps its sample was traced at and how
// many rollouts its group has, so views offer comparisons only where they exist.
func TestCounterparts(t *testing.T) {
	st, _ := testStore(t)
	ctx := context.Background()
	// A validation rollout at step 3 only, alone in its group, and a training sample traced
	// at one step only.
	extra := trajectory("990000"+strings.Repeat("b", 26), 3, 0, 0, 1, "x")
	for i := range extra {
		extra[i].Attributes["validate"] = true
	}
	lone := trajectory("980000"+strings.Repeat("c", 26), 2, 5, 0, 0, "y")
	if err := st.Insert(ctx, append(extra, lone...)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id           string
		steps, group int64
	}{
		{"010000", 3, 2}, {"030101", 3, 2}, {"990000", 1, 1}, {"980000", 1, 1},
	} {
		tr, _, err := st.Get(ctx, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if tr.SampleSteps != tc.steps || tr.GroupSize != tc.group {
			t.Errorf("%s: sample traced at %d steps, group of %d; want %d and %d", tc.id, tr.SampleSteps, tr.GroupSize, tc.steps, tc.group)
		}
	}
}

func TestGroup(t *testing.T) {
	st, _ := testStore(t)
	g, err := st.Group(context.Background(), 2, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 2 || g[0].RolloutN != 0 || g[1].RolloutN != 1 {
		t.Fatalf("group %+v", g)
	}
	// rewards (step+k)%2: rollout 0 got 0, rollout 1 got 1; advantages reward-0.5
	if g[0].Reward != 0 || g[1].Reward != 1 || g[0].Advantage == nil || *g[0].Advantage != -0.5 || *g[1].Advantage != 0.5 {
		t.Errorf("rewards %v %v, advantages %v %v", g[0].Reward, g[1].Reward, g[0].Advantage, g[1].Advantage)
	}
	if !strings.HasSuffix(g[1].Text, "#### 42") || g[1].Words != 8 {
		t.Errorf("text %q (%d words)", g[1].Text, g[1].Words)
	}
	if _, err := st.Group(context.Background(), 7, 1, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("group of an untraced step: %v", err)
	}
}

// TestCompareRuns pairs two runs' validation rollouts at one step.
func TestCompareRuns(t *testing.T) {
	ctx := context.Background()
	mk := func(resp map[int64]string) *Store {
		st, err := Open(filepath.Join(t.TempDir(), "traces.db"), true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		for _, step := range []int64{0, 2} {
			for sample, r := range resp {
				sp := trajectory(fmt.Sprintf("%02d%02d", step, sample)+strings.Repeat("d", 28), step, sample, 0, float64(len(r)%2), r)
				for i := range sp {
					sp[i].Attributes["validate"] = true
				}
				if err := st.Insert(ctx, sp); err != nil {
					t.Fatal(err)
				}
			}
		}
		return st
	}
	a := mk(map[int64]string{0: "#### 41", 1: "so #### 7"})
	b := mk(map[int64]string{0: "#### 42", 3: "none"})
	steps, err := CommonValidationSteps(ctx, a, b)
	if err != nil || fmt.Sprint(steps) != "[0 2]" {
		t.Fatalf("common steps %v %v", steps, err)
	}
	pairs, err := CompareRuns(ctx, a, b, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 3 || pairs[0].SampleIndex != 0 || pairs[1].SampleIndex != 1 || pairs[2].SampleIndex != 3 {
		t.Fatalf("pairs %+v", pairs)
	}
	if pairs[1].B != nil || pairs[2].A != nil || pairs[0].A == nil || pairs[0].B == nil {
		t.Errorf("sides: %+v", pairs)
	}
	var d []string
	for _, op := range pairs[0].Diff {
		d = append(d, op.Op+op.Text)
	}
	if got := strings.Join(d, " "); got != "=<tool_call>calc</tool_call> #### -41 +42" {
		t.Errorf("diff %s", got)
	}
	if _, err := CompareRuns(ctx, a, b, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("a step neither run validated at: %v", err)
	}
}

func TestDiff(t *testing.T) {
	tests := []struct{ a, b, want string }{
		{"", "", ""},
		{"a b c", "a b c", "=a b c"},
		{"a b c", "a x c", "=a -b +x =c"},
		{"a b c", "", "-a b c"},
		{"", "x y", "+x y"},
		{"the answer is 41", "so the answer is 42 now", "+so =the answer is -41 +42 now"},
		{"a  b\nc", "a b c", "=a b c"},
	}
	for _, tt := range tests {
		var parts []string
		for _, op := range Diff(tt.a, tt.b) {
			parts = append(parts, op.Op+op.Text)
		}
		if got := strings.Join(parts, " "); got != tt.want {
			t.Errorf("Diff(%q, %q) = %q; want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

// FuzzDiff: the diff's "=" and "-" runs rebuild a, its "=" and "+" runs rebuild b.
func FuzzDiff(f *testing.F) {
	f.Add("the answer is 41", "so the answer is 42")
	f.Add("a a a b", "b a a")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		var ra, rb []string
		for _, op := range Diff(a, b) {
			if op.Op != "+" {
				ra = append(ra, op.Text)
			}
			if op.Op != "-" {
				rb = append(rb, op.Text)
			}
		}
		if got, want := strings.Join(strings.Fields(strings.Join(ra, " ")), " "), strings.Join(strings.Fields(a), " "); got != want {
			t.Errorf("a rebuilt %q; want %q", got, want)
		}
		if got, want := strings.Join(strings.Fields(strings.Join(rb, " ")), " "), strings.Join(strings.Fields(b), " "); got != want {
			t.Errorf("b rebuilt %q; want %q", got, want)
		}
	})
}

func TestExportJSONL(t *testing.T) {
	st, _ := testStore(t)
	var buf bytes.Buffer
	n, err := st.ExportJSONL(context.Background(), &buf, Filter{StepMin: i64(3)})
	if err != nil || n != 4 {
		t.Fatalf("ExportJSONL: %d, %v", n, err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines", len(lines))
	}
	var row struct {
		Trajectory
		Tokens
		Spans []ExportedSpan `json:"spans"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &row); err != nil {
		t.Fatal(err)
	}
	if row.Step != 3 || len(row.Spans) != 4 || string(row.Spans[2].Inputs) != `{"answer":"42"}` {
		t.Errorf("row %+v", row)
	}
	// ids and text: the token ids laid out as one sequence beside the decoded prompt
	want := Tokens{PromptIDs: []int{1, 2, 3, 4, 5}, ResponseIDs: []int{6, 7, 8, 9, 10, 11, 12, 13, 3},
		ResponseMask: []int{1, 1, 1, 0, 0, 1, 1, 1, 1}}
	if !reflect.DeepEqual(row.Tokens, want) || row.Prompt != "What is 6*7?" {
		t.Errorf("exported tokens %+v, prompt %q; want %+v", row.Tokens, row.Prompt, want)
	}
}

func TestTrajectoryTokens(t *testing.T) {
	gen := func(in, out string, offset int64) trace.Span {
		a := map[string]any{}
		if offset > 0 {
			a["prompt_offset"] = offset
		}
		return trace.Span{SpanID: "g", Name: "generate", Inputs: in, Outputs: out, Attributes: a}
	}
	root := trace.Span{SpanID: "r", Name: "agent_loop", Inputs: `{"prompt":"q"}`}
	for _, tc := range []struct {
		name  string
		spans []trace.Span
		want  *Tokens
		err   error // nil: want is returned
	}{
		{"one turn", []trace.Span{root, gen(`{"prompt_ids":[1,2,3]}`, `{"response_ids":[4,5]}`, 0)},
			&Tokens{[]int{1, 2, 3}, []int{4, 5}, []int{1, 1}}, nil},
		{"a delta after the context", []trace.Span{root, gen(`{"prompt_ids":[1,2,3]}`, `{"response_ids":[4,5]}`, 0),
			gen(`{"prompt_delta_ids":[6]}`, `{"response_ids":[7]}`, 5)},
			&Tokens{[]int{1, 2, 3}, []int{4, 5, 6, 7}, []int{1, 1, 0, 1}}, nil},
		{"text beside the ids", []trace.Span{root, gen(`{"prompt":"a b","prompt_ids":[1,2]}`, `{"response":"c","response_ids":[3]}`, 0)},
			&Tokens{[]int{1, 2}, []int{3}, []int{1}}, nil},
		{"a whole prompt that extends the context", []trace.Span{gen(`{"prompt_ids":[1]}`, `{"response_ids":[2]}`, 0),
			gen(`{"prompt_ids":[1,2,3]}`, `{"response_ids":[4]}`, 0)},
			&Tokens{[]int{1}, []int{2, 3, 4}, []int{1, 0, 1}}, nil},
		{"a whole prompt that does not", []trace.Span{gen(`{"prompt_ids":[1]}`, `{"response_ids":[2]}`, 0),
			gen(`{"prompt_ids":[1,9,3]}`, `{"response_ids":[4]}`, 0)}, nil, ErrNotOneSequence},
		{"a wrong offset", []trace.Span{gen(`{"prompt_ids":[1]}`, `{"response_ids":[2]}`, 0),
			gen(`{"prompt_delta_ids":[3]}`, `{"response_ids":[4]}`, 7)}, nil, ErrNotOneSequence},
		{"no turns", []trace.Span{root}, nil, ErrNotOneSequence},
		{"no model tokens", []trace.Span{gen(`{"prompt_ids":[1]}`, `{"response_ids":[]}`, 0)}, nil, ErrNotOneSequence},
		{"text only", []trace.Span{gen(`{"prompt":"a b"}`, `{"response":"c"}`, 0)}, nil, ErrNoTokenIDs},
	} {
		got, err := TrajectoryTokens(tc.spans)
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s: %+v, %v; want %v", tc.name, got, err, tc.err)
		case tc.err == nil && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	if _, err := TrajectoryTokens([]trace.Span{gen(`{"prompt_delta_ids":[1]}`, `{"response_ids":[2]}`, 0)}); err == nil ||
		!strings.Contains(err.Error(), "prompt_offset") {
		t.Errorf("a delta without an offset: %v", err)
	}
}
