package local

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/rlhost/rlhost/sdk/trace"
)

// Message is one entry of a trajectory rendered as a chat.
type Message struct {
	Role       string         `json:"role"` // user, context (added to the prompt between turns), assistant, parse, tool
	Name       string         `json:"name,omitempty"`
	Content    string         `json:"content"`
	Arguments  string         `json:"arguments,omitempty"` // tool inputs (JSON)
	Error      string         `json:"error,omitempty"`
	DurationMS float64        `json:"duration_ms"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// Decoder turns token ids into text with the run's tokenizer (see `rlhost traces`, which loads
// it from the run's model). A nil Decoder leaves ids as they are.
type Decoder func(ids []int) string

// Chat renders a trajectory's spans (in start order) as a conversation: the prompt, each
// generate turn's response, the tool-call parses, and each tool call with its arguments and
// result. Turns recorded without text (token2text off) are decoded with dec; with a nil dec
// they show their token ids.
func Chat(spans []trace.Span, dec Decoder) []Message {
	var out []Message
	var root *trace.Span
	for i := range spans {
		if spans[i].ParentID == "" {
			root = &spans[i]
		}
	}
	if root != nil {
		if p := field(root.Inputs, "prompt"); p != "" {
			out = append(out, Message{Role: "user", Content: p})
		}
	}
	for _, s := range spans {
		if s.ParentID == "" {
			continue
		}
		ms := float64(s.End.Sub(s.Start).Microseconds()) / 1000
		switch {
		case s.Name == "generate":
			if _, delta := s.Attributes["prompt_offset"]; delta {
				if c := textField(s.Inputs, dec, "prompt_delta", "prompt_delta_ids"); c != "" {
					out = append(out, Message{Role: "context", Content: c})
				}
			} else if len(out) == 0 || root == nil || field(root.Inputs, "prompt") == "" {
				out = append(out, Message{Role: "user", Content: textField(s.Inputs, dec, "prompt", "prompt_ids")})
			}
			out = append(out, Message{Role: "assistant", Content: textField(s.Outputs, dec, "response", "response_ids"), Error: s.Error,
				DurationMS: ms, Attributes: pick(s.Attributes, "prompt_tokens", "response_tokens", "logprob_mean")})
		case s.Name == "tool_parse":
			out = append(out, Message{Role: "parse", Content: compact(s.Outputs), Error: s.Error, DurationMS: ms})
		case strings.HasPrefix(s.Name, "tool_call:"):
			content := field(s.Outputs, "text")
			if content == "" {
				content = compact(s.Outputs)
			}
			out = append(out, Message{Role: "tool", Name: strings.TrimPrefix(s.Name, "tool_call:"), Arguments: compact(s.Inputs),
				Content: content, Error: s.Error, DurationMS: ms, Attributes: pick(s.Attributes, "tool_reward")})
		default:
			out = append(out, Message{Role: s.Name, Content: compact(s.Outputs), Arguments: compact(s.Inputs), Error: s.Error, DurationMS: ms})
		}
	}
	return out
}

func pick(a map[string]any, keys ...string) map[string]any {
	m := map[string]any{}
	for _, k := range keys {
		if v, ok := a[k]; ok {
			m[k] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// field returns the first of keys present in the JSON object js, as text (strings as they are,
// other values as JSON).
func field(js string, keys ...string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(js), &m) != nil {
		return ""
	}
	for _, k := range keys {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw)
	}
	return ""
}

// textField is field for a generate span's text: the stored text, or (keys ending in _ids)
// the token ids decoded with dec, or shown as ids when dec is nil or they are not ids.
func textField(js string, dec Decoder, keys ...string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(js), &m) != nil {
		return ""
	}
	for _, k := range keys {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var ids []int
		if dec != nil && strings.HasSuffix(k, "_ids") && json.Unmarshal(raw, &ids) == nil {
			return dec(ids)
		}
		return field(js, k)
	}
	return ""
}

func compact(js string) string {
	var v any
	if json.Unmarshal([]byte(js), &v) != nil {
		return js
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ResponseText is everything the model produced in a trajectory: the stored decoded
// response (token2text runs), or the generate turns' responses (decoded with dec when they
// were stored as ids) joined.
func ResponseText(t Trajectory, spans []trace.Span, dec Decoder) string {
	if t.Response != "" {
		return t.Response
	}
	var parts []string
	for _, s := range spans {
		if s.Name == "generate" {
			parts = append(parts, textField(s.Outputs, dec, "response", "response_ids"))
		}
	}
	return strings.Join(parts, "\n")
}

// CompareEntry is one rollout in a comparison.
type CompareEntry struct {
	Trajectory
	Text  string `json:"text"`  // ResponseText
	Words int    `json:"words"` // length of Text in words
}

// CompareStep is one step's rollouts of the compared sample.
type CompareStep struct {
	Step     int64          `json:"step"`
	Rollouts []CompareEntry `json:"rollouts"`
}

// Compare returns the rollouts of one sample at the given steps (all steps it was traced at
// when steps is empty), in step and rollout order.
func (s *Store) Compare(ctx context.Context, sample int64, validate bool, steps []int64) ([]CompareStep, error) {
	list, err := s.List(ctx, Filter{Sample: &sample, Validate: &validate, Limit: 100000})
	if err != nil {
		return nil, err
	}
	want := map[int64]bool{}
	for _, st := range steps {
		want[st] = true
	}
	var out []CompareStep
	for _, t := range list {
		if len(want) > 0 && !want[t.Step] {
			continue
		}
		es, err := s.entries(ctx, []Trajectory{t})
		if err != nil {
			return nil, err
		}
		e := es[0]
		if len(out) == 0 || out[len(out)-1].Step != t.Step {
			out = append(out, CompareStep{Step: t.Step})
		}
		out[len(out)-1].Rollouts = append(out[len(out)-1].Rollouts, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: sample %d (validate=%v) was not traced at steps %v", ErrNotFound, sample, validate, steps)
	}
	return out, nil
}

// Group returns the rollouts of one sample at one step (the GRPO group: the n responses to the
// same prompt), in rollout order, each with its text, reward and advantage.
func (s *Store) Group(ctx context.Context, step, sample int64, validate bool) ([]CompareEntry, error) {
	list, err := s.List(ctx, Filter{StepMin: &step, StepMax: &step, Sample: &sample, Validate: &validate, Limit: 100000})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: sample %d (validate=%v) was not traced at step %d", ErrNotFound, sample, validate, step)
	}
	return s.entries(ctx, list)
}

func (s *Store) entries(ctx context.Context, list []Trajectory) ([]CompareEntry, error) {
	out := make([]CompareEntry, len(list))
	for i, t := range list {
		spans, err := s.Spans(ctx, t.TraceID)
		if err != nil {
			return nil, err
		}
		text := ResponseText(t, spans, s.dec)
		out[i] = CompareEntry{Trajectory: t, Text: text, Words: len(strings.Fields(text))}
	}
	return out, nil
}

// RunPair is one validation rollout (sample, rollout number) of two runs at the same step.
// A or B is nil where that run did not trace it.
type RunPair struct {
	SampleIndex int64         `json:"sample_index"`
	RolloutN    int64         `json:"rollout_n"`
	A           *CompareEntry `json:"a"`
	B           *CompareEntry `json:"b"`
	Diff        []DiffOp      `json:"diff,omitempty"` // A's text to B's, when both exist
}

// ValidationSteps returns the steps at which the store has validation trajectories, in order.
func (s *Store) ValidationSteps(ctx context.Context) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT step FROM trajectories WHERE validate ORDER BY step`)
	if err != nil {
		return nil, fmt.Errorf("local: %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var st int64
		if err := rows.Scan(&st); err != nil {
			return nil, fmt.Errorf("local: %s: %w", s.path, err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// CommonValidationSteps returns the steps at which both stores have validation trajectories.
func CommonValidationSteps(ctx context.Context, a, b *Store) ([]int64, error) {
	sa, err := a.ValidationSteps(ctx)
	if err != nil {
		return nil, err
	}
	sb, err := b.ValidationSteps(ctx)
	if err != nil {
		return nil, err
	}
	in := map[int64]bool{}
	for _, x := range sb {
		in[x] = true
	}
	var out []int64
	for _, x := range sa {
		if in[x] {
			out = append(out, x)
		}
	}
	return out, nil
}

// CompareRuns pairs the validation rollouts of two runs at one step by sample index and
// rollout number, with a word diff of the responses. Validation prompts are the same rows in
// both runs when they used the same val_files, so a pair is the same prompt answered by two
// runs' policies.
func CompareRuns(ctx context.Context, a, b *Store, step int64) ([]RunPair, error) {
	validate := true
	side := func(st *Store) (map[[2]int64]*CompareEntry, error) {
		list, err := st.List(ctx, Filter{StepMin: &step, StepMax: &step, Validate: &validate, Limit: 100000})
		if err != nil {
			return nil, err
		}
		es, err := st.entries(ctx, list)
		if err != nil {
			return nil, err
		}
		m := map[[2]int64]*CompareEntry{}
		for i := range es {
			m[[2]int64{es[i].SampleIndex, es[i].RolloutN}] = &es[i]
		}
		return m, nil
	}
	ma, err := side(a)
	if err != nil {
		return nil, err
	}
	mb, err := side(b)
	if err != nil {
		return nil, err
	}
	if len(ma) == 0 || len(mb) == 0 {
		return nil, fmt.Errorf("%w: validation at step %d: %d trajectories in %s, %d in %s", ErrNotFound, step, len(ma), a.path, len(mb), b.path)
	}
	keys := map[[2]int64]bool{}
	for k := range ma {
		keys[k] = true
	}
	for k := range mb {
		keys[k] = true
	}
	var out []RunPair
	for k := range keys {
		p := RunPair{SampleIndex: k[0], RolloutN: k[1], A: ma[k], B: mb[k]}
		if p.A != nil && p.B != nil {
			p.Diff = Diff(p.A.Text, p.B.Text)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SampleIndex != out[j].SampleIndex {
			return out[i].SampleIndex < out[j].SampleIndex
		}
		return out[i].RolloutN < out[j].RolloutN
	})
	return out, nil
}

// DiffOp is one run of a word diff: Op "=" (in both), "-" (only in a), "+" (only in b).
type DiffOp struct {
	Op   string `json:"op"`
	Text string `json:"text"`
}

// maxDiffCells bounds the LCS table; longer texts are diffed as prefix, replaced middle, suffix.
const maxDiffCells = 4 << 20

// Diff returns a word-level diff of a and b (a longest common subsequence of their words,
// whitespace-separated).
func Diff(a, b string) []DiffOp {
	wa, wb := strings.Fields(a), strings.Fields(b)
	var ops []DiffOp
	emit := func(op string, w string) {
		if n := len(ops); n > 0 && ops[n-1].Op == op {
			ops[n-1].Text += " " + w
			return
		}
		ops = append(ops, DiffOp{Op: op, Text: w})
	}
	// Common prefix and suffix first: cheap, and it keeps the table small.
	p := 0
	for p < len(wa) && p < len(wb) && wa[p] == wb[p] {
		emit("=", wa[p])
		p++
	}
	q := 0
	for q < len(wa)-p && q < len(wb)-p && wa[len(wa)-1-q] == wb[len(wb)-1-q] {
		q++
	}
	ma, mb := wa[p:len(wa)-q], wb[p:len(wb)-q]
	if len(ma)*len(mb) > maxDiffCells {
		for _, w := range ma {
			emit("-", w)
		}
		for _, w := range mb {
			emit("+", w)
		}
	} else {
		// L[i][j] = LCS length of ma[i:], mb[j:]
		n, m := len(ma), len(mb)
		L := make([]int32, (n+1)*(m+1))
		at := func(i, j int) int32 { return L[i*(m+1)+j] }
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					L[i*(m+1)+j] = at(i+1, j+1) + 1
				} else {
					L[i*(m+1)+j] = max(at(i+1, j), at(i, j+1))
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				emit("=", ma[i])
				i, j = i+1, j+1
			case i < n && (j == m || at(i+1, j) >= at(i, j+1)):
				emit("-", ma[i])
				i++
			default:
				emit("+", mb[j])
				j++
			}
		}
	}
	for _, w := range wa[len(wa)-q:] {
		emit("=", w)
	}
	return ops
}
