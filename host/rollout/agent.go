package rollout

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/tracing"
	sdkplugin "github.com/rlhost/rlhost/sdk/plugin"
	"github.com/rlhost/rlhost/sdk/suggest"
	"github.com/rlhost/rlhost/sdk/task"
)

// Agent loop names, as in veRL's dataset column agent_name.
const (
	SingleTurnAgent = task.SingleTurnAgent
	ToolAgent       = task.ToolAgent
)

// Config holds the limits and sampling of the agent loops (veRL's
// actor_rollout_ref.rollout.multi_turn.* and sampling keys).
type Config struct {
	ResponseLength        int    // response tokens at most (model + observation tokens)
	MaxAssistantTurns     int    // 0: no limit
	MaxUserTurns          int    // 0: no limit
	MaxParallelCalls      int    // tool calls run per turn (the rest are ignored); default 1
	MaxToolResponseLength int    // characters of tool text kept; default 256
	TruncateSide          string // left | middle | right; default middle
	Interaction           bool   // answer turns without tool calls with the task's user simulator
	DefaultAgentLoop      string // for rows without agent_name
	Sampling              SamplingParams
	// TemplateKwargs are extra chat-template variables (data.apply_chat_template_kwargs).
	TemplateKwargs map[string]any
	// ToolFormat is the tool-call format (multi_turn.format); "" or auto: detected.
	ToolFormat tokenizer.ToolFormat
}

func (c Config) withDefaults() Config {
	if c.MaxParallelCalls <= 0 {
		c.MaxParallelCalls = 1
	}
	if c.MaxToolResponseLength <= 0 {
		c.MaxToolResponseLength = 256
	}
	if c.TruncateSide == "" {
		c.TruncateSide = "middle"
	}
	if c.DefaultAgentLoop == "" {
		c.DefaultAgentLoop = SingleTurnAgent
	}
	return c
}

// Sample is one trajectory to run: a row, its prompt (from the task's Prompt), and where it sits
// in the step.
type Sample struct {
	Row         task.Row
	Prompt      task.Prompt
	UID         string // the group: all n rollouts of a prompt share it
	SampleIndex int64  // extra_info.index, else the batch position
	RolloutN    int
	Step        int
	Validate    bool
	// PromptIDs, when set, are the prompt's tokens already rendered (and truncated) by the
	// caller; otherwise the loop renders Prompt with the chat template.
	PromptIDs []int
}

// Output is a finished trajectory.
type Output struct {
	Sample           *Sample
	AgentName        string
	PromptIDs        []int
	ResponseIDs      []int
	ResponseMask     []float32 // 1: model token, 0: observation token
	ResponseLogprobs []float32 // sampling log-probs; 0 for observation tokens
	AssistantTurns   int
	UserTurns        int
	NumTurns         int // user + assistant turns + 1, as veRL counts
	ToolCalls        int
	ToolErrors       int
	ParseErrors      int
	TurnScores       []float64 // user-simulator scores
	ToolRewards      []float64 // step rewards of tool calls
	Messages         []task.Message
	FinishReason     string // "stop", "length" (response budget), "max_turns", "interaction"
	EndResult        task.EndResult
	// Trace is the trajectory's trace (nil when not traced); the caller ends it with the
	// reward once the trajectory is scored.
	Trace *tracing.Trajectory
}

// AgentLoop runs one trajectory.
type AgentLoop interface {
	Run(ctx context.Context, s *Sample) (*Output, error)
}

// Deps are what the loops work with.
type Deps struct {
	Policy    Policy
	Tokenizer *tokenizer.Tokenizer
	Env       task.Environment // nil for tasks without an environment
	Config    Config
	Tracer    *tracing.Tracer // nil: no tracing
	TaskName  string          // for traces
	// External runs the rows of external_episode tasks (the external_agent loop); nil when
	// the task has no such feature.
	External AgentLoop
}

// Chat is the loops' chat: the tokenizer, the template kwargs and the tool-call format.
func (d Deps) Chat() Chat {
	return Chat{Tok: d.Tokenizer, Kwargs: d.Config.TemplateKwargs, Format: d.Config.ToolFormat}
}

// trace starts the trajectory's trace (nil when not sampled or tracing is off).
func (d Deps) trace(s *Sample, agent string) *tracing.Trajectory {
	return d.Tracer.Trajectory(tracing.TrajectoryAttrs{Step: s.Step, SampleIndex: s.SampleIndex, RolloutN: s.RolloutN,
		Validate: s.Validate, AgentName: agent, Task: d.TaskName, DataSource: s.Row.DataSource})
}

// generate is one traced generate call.
func (d Deps) generate(ctx context.Context, tr *tracing.Trajectory, prompt []int, sp SamplingParams) (Generation, error) {
	span := tr.Start("generate", nil, nil)
	g, err := d.Policy.Generate(ctx, prompt, sp)
	span.SetTokens(prompt, g.Tokens, g.Logprobs)
	span.SetAttr("finish_reason", g.FinishReason)
	span.SetAttr("temperature", sp.Temperature)
	if _, fleet := d.Policy.(*Fleet); fleet {
		span.SetAttr("weight_version", g.WeightVersion) // the weights that sampled it (Fleet)
	}
	span.End(nil, err)
	return g, err
}

// LoopFor returns the agent loop a row asks for. A row without agent_name gets the default loop;
// an unknown name is an error, never a silent fallback.
func LoopFor(name string, d Deps) (AgentLoop, string, error) {
	cfg := d.Config.withDefaults()
	if name == "" {
		name = cfg.DefaultAgentLoop
	}
	switch name {
	case ExternalAgent:
		if d.External == nil {
			return nil, name, fmt.Errorf("%w: agent_name %q needs a task with the external_episode feature", ErrConfig, name)
		}
		return d.External, name, nil
	case SingleTurnAgent:
		return &SingleTurnAgentLoop{d: d, cfg: cfg}, name, nil
	case ToolAgent:
		if d.Env == nil {
			return nil, name, fmt.Errorf("rollout: agent_name %q needs a task with an environment (Start/Obs/End); this task has none", name)
		}
		return &ToolAgentLoop{d: d, cfg: cfg}, name, nil
	}
	msg := fmt.Sprintf("rollout: unknown agent_name %q (known: %s, %s)", name, SingleTurnAgent, ToolAgent)
	if s := suggest.Closest(name, []string{SingleTurnAgent, ToolAgent}); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return nil, name, fmt.Errorf("%s", msg)
}

// turnSeed derives the random stream of one generate call from the trajectory's identity, so
// a run is reproducible whatever the batching.
func turnSeed(base uint64, s *Sample, turn int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d/%d/%d/%v", base, s.UID, s.SampleIndex, s.RolloutN, s.Step, s.Validate)
	return h.Sum64() ^ uint64(turn)*0x9e3779b97f4a7c15
}

// SingleTurnAgentLoop generates one response to the prompt.
type SingleTurnAgentLoop struct {
	d   Deps
	cfg Config
}

// Run implements AgentLoop.
func (l *SingleTurnAgentLoop) Run(ctx context.Context, s *Sample) (*Output, error) {
	ids := s.PromptIDs
	if ids == nil {
		var err error
		if ids, err = l.d.Chat().EncodePrompt(SingleTurnAgent, s.Prompt); err != nil {
			return nil, err
		}
	}
	sp := l.cfg.Sampling
	sp.MaxTokens = l.cfg.ResponseLength
	if s.Prompt.MaxTokens > 0 && s.Prompt.MaxTokens < sp.MaxTokens {
		sp.MaxTokens = s.Prompt.MaxTokens
	}
	sp.Seed = turnSeed(sp.Seed, s, 1)
	tr := l.d.trace(s, SingleTurnAgent)
	g, err := l.d.generate(ctx, tr, ids, sp)
	if err != nil {
		tr.End(0, map[string]any{"error": err.Error()})
		return nil, err
	}
	out := &Output{Trace: tr, Sample: s, AgentName: SingleTurnAgent, PromptIDs: ids, ResponseIDs: g.Tokens,
		ResponseMask: ones(len(g.Tokens)), ResponseLogprobs: g.Logprobs, AssistantTurns: 1, NumTurns: 2,
		FinishReason: g.FinishReason}
	out.Messages = append(append(out.Messages, s.Prompt.Messages...),
		task.Message{Role: "assistant", Content: l.d.Tokenizer.Decode(g.Tokens, true)})
	return out, nil
}

func ones(n int) []float32 {
	m := make([]float32, n)
	for i := range m {
		m[i] = 1
	}
	return m
}

// ToolAgentLoop is veRL's tool agent: PENDING -> GENERATING -> (PROCESSING_TOOLS | INTERACTING)
// -> GENERATING ... -> TERMINATED. See docs/rollout.md for the exact rules and where they
// differ from veRL.
type ToolAgentLoop struct {
	d   Deps
	cfg Config
}

// Run implements AgentLoop.
func (l *ToolAgentLoop) Run(ctx context.Context, s *Sample) (*Output, error) {
	tk := l.d.Tokenizer
	chat := l.d.Chat()
	format := chat.ToolFormat()
	promptIDs := s.PromptIDs
	if promptIDs == nil {
		var err error
		if promptIDs, err = chat.EncodePrompt(ToolAgent, s.Prompt); err != nil {
			return nil, err
		}
	}
	tr := l.d.trace(s, ToolAgent)
	out := &Output{Trace: tr, Sample: s, AgentName: ToolAgent, PromptIDs: promptIDs}
	out.Messages = append(out.Messages, s.Prompt.Messages...)
	ok := false
	defer func() {
		if !ok { // a failed attempt: close its trace as such
			tr.End(0, map[string]any{"error": "trajectory failed", "finish_reason": out.FinishReason})
		}
	}()
	st, err := l.d.Env.Start(ctx, task.StartRequest{Row: s.Row, TrajectoryID: fmt.Sprintf("%s-%d", s.UID, s.RolloutN),
		Step: int64(s.Step), RolloutN: s.RolloutN, Validate: s.Validate})
	if err != nil {
		return nil, callError("Start", err)
	}
	ended := false
	defer func() {
		if !ended { // an error path: release the instance, best effort
			_, _ = l.d.Env.End(context.WithoutCancel(ctx), task.EndRequest{InstanceID: st.InstanceID, Aborted: true})
		}
	}()
	// Extra messages from Start (environments that speak first) are observations.
	if len(st.Messages) > 0 {
		if done, err := l.appendObservation(out, st.Messages); err != nil || done {
			if err != nil {
				return nil, err
			}
		}
	}
	seq := append([]int(nil), promptIDs...)
	for turn := 1; ; turn++ {
		// GENERATING
		budget := l.cfg.ResponseLength - len(out.ResponseMask)
		if budget <= 0 {
			out.FinishReason = "length"
			break
		}
		sp := l.cfg.Sampling
		sp.MaxTokens = budget
		sp.Seed = turnSeed(sp.Seed, s, turn)
		g, err := l.d.generate(ctx, tr, append(seq, out.ResponseIDs...), sp)
		if err != nil {
			return nil, err
		}
		out.AssistantTurns++
		out.ResponseIDs = append(out.ResponseIDs, g.Tokens...)
		out.ResponseMask = append(out.ResponseMask, ones(len(g.Tokens))...)
		out.ResponseLogprobs = append(out.ResponseLogprobs, g.Logprobs...)
		if len(out.ResponseMask) >= l.cfg.ResponseLength {
			out.FinishReason = "length"
			break
		}
		if l.cfg.MaxAssistantTurns > 0 && out.AssistantTurns >= l.cfg.MaxAssistantTurns ||
			l.cfg.MaxUserTurns > 0 && out.UserTurns >= l.cfg.MaxUserTurns {
			out.FinishReason = "max_turns"
			break
		}
		raw := tk.Decode(g.Tokens, false)
		parse := tr.Start("tool_parse", nil, map[string]any{"text": raw})
		calls, _, perrs := tokenizer.ParseToolCalls(format, raw)
		out.ParseErrors += len(perrs)
		var perr error
		if len(perrs) > 0 {
			perr = perrs[0]
		}
		parse.SetAttr("tool_calls", len(calls))
		parse.SetAttr("parse_errors", len(perrs))
		parse.End(map[string]any{"tool_calls": calls}, perr)
		assistant := task.Message{Role: "assistant", Content: tk.Decode(g.Tokens, true)}
		for i, c := range calls {
			if i >= l.cfg.MaxParallelCalls {
				break
			}
			id := c.ID
			if !ValidToolCallID(format, id) {
				id = ToolCallID(format, turn, i)
			}
			assistant.ToolCalls = append(assistant.ToolCalls, task.ToolCall{ID: id, Name: c.Name, Arguments: c.Arguments})
		}
		out.Messages = append(out.Messages, assistant)
		switch {
		case len(assistant.ToolCalls) > 0:
			// PROCESSING_TOOLS
			obsStart := time.Now()
			obs, err := l.d.Env.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Assistant: assistant, Kind: task.ObsTools, Turn: turn})
			if err != nil {
				return nil, callError("Obs", err)
			}
			out.ToolCalls += len(assistant.ToolCalls)
			msgs := make([]task.Message, 0, len(obs.ToolResults))
			for i, r := range obs.ToolResults {
				if r.Error {
					out.ToolErrors++
				}
				var args any
				callID := ""
				if i < len(assistant.ToolCalls) {
					args, callID = assistant.ToolCalls[i].Arguments, assistant.ToolCalls[i].ID
				}
				cs := tr.Start("tool_call:"+r.Name, nil, map[string]any{"arguments": args})
				// The plugin ran the call inside Obs and timed it: the span covers that run,
				// from the Obs request on (a plugin that did not time it: the whole Obs call).
				if r.Duration > 0 {
					cs.SetTiming(obsStart, r.Duration)
				} else {
					cs.SetTiming(obsStart, time.Since(obsStart))
				}
				cs.SetAttr("step_reward", r.StepReward)
				cs.SetAttr("duration_ms", float64(r.Duration.Microseconds())/1000)
				var cerr error
				if r.Error {
					cerr = fmt.Errorf("%s", r.Text)
				}
				cs.End(map[string]any{"text": r.Text, "metrics": r.Metrics}, cerr)
				out.ToolRewards = append(out.ToolRewards, r.StepReward)
				msgs = append(msgs, task.Message{Role: "tool", Content: TruncateToolText(r.Text, l.cfg.MaxToolResponseLength, l.cfg.TruncateSide), ToolCallID: callID})
			}
			done, err := l.appendObservation(out, msgs)
			if err != nil {
				return nil, err
			}
			if done {
				out.FinishReason = "length"
				return l.finish(ctx, out, st.InstanceID, &ended, &ok)
			}
		case l.cfg.Interaction:
			// INTERACTING
			obs, err := l.d.Env.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Assistant: assistant, Kind: task.ObsInteraction,
				Turn: turn, History: out.Messages})
			if err != nil {
				return nil, callError("Obs (interaction)", err)
			}
			out.TurnScores = append(out.TurnScores, obs.TurnReward)
			done, err := l.appendObservation(out, obs.Messages)
			if err != nil {
				return nil, err
			}
			if done {
				out.FinishReason = "length"
				return l.finish(ctx, out, st.InstanceID, &ended, &ok)
			}
			if obs.Done {
				out.FinishReason = "interaction"
				return l.finish(ctx, out, st.InstanceID, &ended, &ok)
			}
		default:
			out.FinishReason = g.FinishReason
			return l.finish(ctx, out, st.InstanceID, &ended, &ok)
		}
	}
	return l.finish(ctx, out, st.InstanceID, &ended, &ok)
}

// appendObservation templates observation messages alone and appends their tokens with mask 0.
// It reports done when they do not fit in the response budget (then nothing is appended, as in
// veRL).
func (l *ToolAgentLoop) appendObservation(out *Output, msgs []task.Message) (bool, error) {
	if len(msgs) == 0 {
		return false, nil
	}
	ids, err := l.d.Chat().EncodeObservation(msgs)
	if err != nil {
		return false, err
	}
	out.Messages = append(out.Messages, msgs...)
	if len(out.ResponseMask)+len(ids) >= l.cfg.ResponseLength {
		return true, nil
	}
	out.ResponseIDs = append(out.ResponseIDs, ids...)
	out.ResponseMask = append(out.ResponseMask, make([]float32, len(ids))...)
	out.ResponseLogprobs = append(out.ResponseLogprobs, make([]float32, len(ids))...)
	out.UserTurns++
	return false, nil
}

func (l *ToolAgentLoop) finish(ctx context.Context, out *Output, id string, ended, ok *bool) (*Output, error) {
	o, err := l.end(ctx, out, id, ended)
	*ok = err == nil
	return o, err
}

func (l *ToolAgentLoop) end(ctx context.Context, out *Output, id string, ended *bool) (*Output, error) {
	*ended = true
	out.NumTurns = out.UserTurns + out.AssistantTurns + 1
	res, err := l.d.Env.End(ctx, task.EndRequest{InstanceID: id})
	if err != nil {
		return nil, callError("End", err)
	}
	out.EndResult = res
	out.NumTurns = out.UserTurns + out.AssistantTurns + 1
	return out, nil
}

// callError names the call of an environment's error, unless the error names it already (a
// plugin's does: "plugin rlhost-task-x: Obs of trajectory s1-0-1 ...").
func callError(call string, err error) error {
	var ce *sdkplugin.CallError
	if errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("%s: %w", call, err)
}

// TruncateToolText keeps at most n characters of a tool's text, as veRL does: left keeps the
// start, right keeps the end, middle keeps both ends.
func TruncateToolText(text string, n int, side string) string {
	r := []rune(text)
	if n <= 0 || len(r) <= n {
		return text
	}
	switch side {
	case "left":
		return string(r[:n]) + "...(truncated)"
	case "right":
		return "(truncated)..." + string(r[len(r)-n:])
	default:
		h := n / 2
		return string(r[:h]) + "...(truncated)..." + string(r[len(r)-h:])
	}
}

// Metrics sums per-trajectory counters into step metrics (veRL-style names).
func Metrics(outs []*Output) map[string]float64 {
	m := map[string]float64{}
	if len(outs) == 0 {
		return m
	}
	var turns, calls, errs, perrs, rl, ml []float64
	for _, o := range outs {
		turns = append(turns, float64(o.NumTurns))
		calls = append(calls, float64(o.ToolCalls))
		errs = append(errs, float64(o.ToolErrors))
		perrs = append(perrs, float64(o.ParseErrors))
		rl = append(rl, float64(len(o.ResponseIDs)))
		n := 0.0
		for _, x := range o.ResponseMask {
			n += float64(x)
		}
		ml = append(ml, n)
	}
	stat := func(name string, xs []float64) {
		sort.Float64s(xs)
		sum := 0.0
		for _, x := range xs {
			sum += x
		}
		m[name+"/mean"] = sum / float64(len(xs))
		m[name+"/max"] = xs[len(xs)-1]
		m[name+"/min"] = xs[0]
	}
	stat("num_turns", turns)
	stat("tool_calls", calls)
	stat("tool_errors", errs)
	stat("tool_parse_errors", perrs)
	stat("response_length", rl)
	stat("response_model_tokens", ml)
	return m
}
