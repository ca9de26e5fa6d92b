package tracing

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlhost/rlhost/sdk/trace"
)

// TrajectoryAttrs identifies a trajectory.
type TrajectoryAttrs struct {
	Step        int
	SampleIndex int64
	RolloutN    int
	Validate    bool
	AgentName   string
	Task        string
	DataSource  string
}

// Trajectory is one traced rollout: a trace whose root span is the agent-loop run. A nil
// *Trajectory (not sampled, or tracing off) ignores every call.
type Trajectory struct {
	t       *Tracer
	traceID string
	root    *Span
	common  map[string]any // on every span: step, sample_index, rollout_n, validate

	mu          sync.Mutex
	firstPrompt []int // the first generate turn's prompt
	context     []int // the last generate turn's prompt + response
	promptToks  int64
	respToks    int64
	turns       int64
	ended       bool
}

// Span is one open operation of a trajectory. A nil *Span ignores every call. A span is used
// by one goroutine at a time.
type Span struct {
	tr       *Trajectory
	id       string
	parentID string
	name     string
	start    time.Time
	attrs    map[string]any
	inputs   string
	outputs  string    // preset outputs (Generate), kept when End gets nil
	end      time.Time // set by SetTiming; zero: End's time
	ended    bool
}

// Trajectory starts tracing a trajectory if its sample was chosen by BeginStep; nil otherwise.
func (t *Tracer) Trajectory(a TrajectoryAttrs) *Trajectory {
	if !t.Enabled() {
		return nil
	}
	t.mu.Lock()
	closed, chosen := t.closed, t.chosen
	if t.step != a.Step || t.validate != a.Validate {
		chosen = nil
		if t.cfg.MaxSamplesPerStep > 0 { // a trajectory of a step BeginStep was not told about
			closed = true
		}
	}
	t.mu.Unlock()
	if closed || (chosen != nil && !chosen[a.SampleIndex]) {
		return nil
	}
	tr := &Trajectory{t: t, traceID: newID(16)}
	tr.common = map[string]any{"step": int64(a.Step), "sample_index": a.SampleIndex, "rollout_n": int64(a.RolloutN), "validate": a.Validate}
	tr.root = &Span{tr: tr, id: newID(8), name: "agent_loop", start: time.Now(), attrs: map[string]any{
		"experiment_name": t.cfg.Experiment, "agent_name": a.AgentName, "task": a.Task, "data_source": a.DataSource}}
	return tr
}

// TraceID returns the trajectory's trace id (32 hex digits), "" for nil.
func (tr *Trajectory) TraceID() string {
	if tr == nil {
		return ""
	}
	return tr.traceID
}

// Root returns the root span (the agent-loop run), to set attributes on it or parent spans.
func (tr *Trajectory) Root() *Span {
	if tr == nil {
		return nil
	}
	return tr.root
}

// Start opens a span called name ("generate", "tool_parse", "tool_call:<tool>") under parent
// (nil: the root). inputs is encoded as JSON.
func (tr *Trajectory) Start(name string, parent *Span, inputs any) *Span {
	if tr == nil {
		return nil
	}
	if parent == nil {
		parent = tr.root
	}
	return &Span{tr: tr, id: newID(8), parentID: parent.id, name: name, start: time.Now(), inputs: encode(inputs)}
}

// Generate opens a generate span for one turn: prompt and response token counts as
// attributes (prompt_tokens, response_tokens, and logprob_mean when logprobs are given), the
// exact token ids as inputs and outputs (prompt_ids, response_ids), and with Token2Text the
// decoded text beside them (prompt, response). The ids are always kept, so that a trace can
// give back the exact tokens the model was trained on (rlhost sft --from-traces); text alone
// cannot (decoding and encoding again does not give the same ids). When the prompt extends
// the previous turn's prompt and response (multi-turn), only the new part is stored (inputs
// prompt_delta_ids / prompt_delta, attribute prompt_offset), so a long conversation does not
// cost the square of its length. Close it with End(nil, err); the response stays the outputs.
func (tr *Trajectory) Generate(parent *Span, promptIDs, responseIDs []int, logprobs []float32) *Span {
	if tr == nil {
		return nil
	}
	s := tr.Start("generate", parent, nil)
	s.SetTokens(promptIDs, responseIDs, logprobs)
	return s
}

// SetTokens records a generate turn on s (see Generate); call it on a span opened with
// Start("generate", ...) before the generation, to time it.
func (s *Span) SetTokens(promptIDs, responseIDs []int, logprobs []float32) {
	if s == nil {
		return
	}
	tr := s.tr
	tr.mu.Lock()
	offset := 0
	if len(tr.context) > 0 && len(promptIDs) >= len(tr.context) && slices.Equal(promptIDs[:len(tr.context)], tr.context) {
		offset = len(tr.context)
	}
	if tr.firstPrompt == nil {
		tr.firstPrompt = slices.Clone(promptIDs)
	}
	tr.context = append(append(tr.context[:0], promptIDs...), responseIDs...)
	tr.promptToks += int64(len(promptIDs))
	tr.respToks += int64(len(responseIDs))
	tr.turns++
	tr.mu.Unlock()

	s.SetAttr("prompt_tokens", int64(len(promptIDs)))
	s.SetAttr("response_tokens", int64(len(responseIDs)))
	if offset > 0 {
		s.SetAttr("prompt_offset", int64(offset))
	}
	if len(logprobs) > 0 {
		var sum float64
		for _, l := range logprobs {
			sum += float64(l)
		}
		s.SetAttr("logprob_mean", sum/float64(len(logprobs)))
	}
	key := "prompt"
	if offset > 0 {
		key = "prompt_delta"
	}
	in := map[string]any{key + "_ids": intsOrEmpty(promptIDs[offset:])}
	out := map[string]any{"response_ids": intsOrEmpty(responseIDs)}
	if tr.t.cfg.Token2Text {
		in[key] = tr.t.cfg.Decode(promptIDs[offset:])
		out["response"] = tr.t.cfg.Decode(responseIDs)
	}
	s.inputs, s.outputs = encode(in), encode(out)
}

func intsOrEmpty(x []int) []int {
	if x == nil {
		return []int{}
	}
	return x
}

// SetAttr sets an attribute: a string, bool, integer or float (other values are formatted
// with fmt.Sprint).
func (s *Span) SetAttr(key string, v any) {
	if s == nil {
		return
	}
	if s.attrs == nil {
		s.attrs = map[string]any{}
	}
	s.attrs[key] = normAttr(v)
}

// SetTiming sets the span's start and duration when the operation ran before the span could
// be opened (a tool call timed by the task plugin inside one Obs call): End then keeps them.
func (s *Span) SetTiming(start time.Time, d time.Duration) {
	if s == nil {
		return
	}
	s.start, s.end = start, start.Add(d)
}

// End closes the span with its outputs (encoded as JSON; nil keeps outputs set by Generate)
// and error, and queues it for export. Ending a span twice does nothing.
func (s *Span) End(outputs any, err error) {
	if s == nil || s.ended {
		return
	}
	s.ended = true
	out := s.outputs
	if outputs != nil {
		out = encode(outputs)
	}
	end := s.end
	if end.IsZero() {
		end = time.Now()
	}
	sp := s.finish(out, end)
	if err != nil {
		sp.Error = err.Error()
	}
	s.tr.t.emit(sp)
}

func (s *Span) finish(outputs string, end time.Time) trace.Span {
	attrs := make(map[string]any, len(s.attrs)+len(s.tr.common))
	for k, v := range s.tr.common {
		attrs[k] = v
	}
	for k, v := range s.attrs {
		attrs[k] = v
	}
	return trace.Span{TraceID: s.tr.traceID, SpanID: s.id, ParentID: s.parentID, Name: s.name, Start: s.start, End: end,
		Attributes: attrs, Inputs: s.inputs, Outputs: outputs}
}

// End closes the root span with the trajectory's reward and outputs (JSON-encoded; with
// Token2Text, the decoded first prompt and everything after it are added as "prompt" and
// "response"). Token totals (prompt_tokens, response_tokens, turns) go on the root as
// attributes. Ending twice does nothing.
func (tr *Trajectory) End(reward float64, outputs any) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	if tr.ended {
		tr.mu.Unlock()
		return
	}
	tr.ended = true
	first, ctx := tr.firstPrompt, tr.context
	pt, rt, turns := tr.promptToks, tr.respToks, tr.turns
	tr.mu.Unlock()
	r := tr.root
	r.SetAttr("reward", reward)
	r.SetAttr("prompt_tokens", pt)
	r.SetAttr("response_tokens", rt)
	r.SetAttr("turns", turns)
	if tr.t.cfg.Token2Text && first != nil {
		r.inputs = encode(map[string]any{"prompt": tr.t.cfg.Decode(first)})
		resp := ""
		if len(ctx) >= len(first) {
			resp = tr.t.cfg.Decode(ctx[len(first):])
		}
		m := map[string]any{"response": resp}
		if outputs != nil {
			m["outputs"] = outputs
		}
		outputs = m
	}
	r.End(outputs, nil)
}

// Stop fixes the end time of the trajectory's root span now, for an End called later (after
// the training step computed the trajectory's advantage): End keeps this time.
func (tr *Trajectory) Stop() {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !tr.ended && tr.root.end.IsZero() {
		tr.root.end = time.Now()
	}
}

// Fail closes the root span with an error (the rollout failed); reward is set as given.
func (tr *Trajectory) Fail(reward float64, err error) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	if tr.ended {
		tr.mu.Unlock()
		return
	}
	tr.ended = true
	tr.mu.Unlock()
	r := tr.root
	r.SetAttr("reward", reward)
	r.End(nil, err)
}

func normAttr(v any) any {
	switch x := v.(type) {
	case string, bool, int64:
		return x
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint32:
		return int64(x)
	case float32:
		return normAttr(float64(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) { // not JSON: backends would refuse the span
			return fmt.Sprint(x)
		}
		return x
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

func encode(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(json.RawMessage); ok {
		return string(s)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep <tool_call> readable
	if err := enc.Encode(v); err != nil {
		b.Reset()
		enc.Encode(map[string]string{"unencodable": fmt.Sprint(v), "error": err.Error()})
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func newID(n int) string {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		x := rand.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
	return hex.EncodeToString(b)
}
