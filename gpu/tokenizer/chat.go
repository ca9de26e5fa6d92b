package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Message is one chat message in the OpenAI shape that chat templates expect.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	Name       string     `json:"name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a function call made by the assistant. Arguments is the JSON
// of the arguments (normally an object). Its JSON form is OpenAI's:
// {"id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

type toolCallJSON struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// MarshalJSON writes the OpenAI form.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	var j toolCallJSON
	j.ID, j.Type = c.ID, "function"
	j.Function.Name, j.Function.Arguments = c.Name, c.Arguments
	if len(j.Function.Arguments) == 0 {
		j.Function.Arguments = json.RawMessage("{}")
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the OpenAI form.
func (c *ToolCall) UnmarshalJSON(b []byte) error {
	var j toolCallJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	c.ID, c.Name, c.Arguments = j.ID, j.Function.Name, j.Function.Arguments
	return nil
}

// SetChatTemplate makes src the chat template instead of the model's own (veRL's
// actor_rollout_ref.model.custom_chat_template: base models whose files carry none, or a
// template that renders tools); origin names where it came from, for messages
// (ChatTemplateOrigin). src is compiled here: a template that does not parse is an error
// naming origin. Call it before the tokenizer renders anything.
func (t *Tokenizer) SetChatTemplate(src, origin string) error {
	tmpl, err := compileTemplate(origin, src)
	if err != nil {
		return err
	}
	t.chatTemplate, t.templateOrigin = src, origin
	t.tmplOnce = sync.Once{}
	t.tmplOnce.Do(func() { t.tmpl, t.tmplErr = tmpl, nil })
	t.obsOnce = sync.Once{}
	t.obsPrefix, t.obsErr = "", nil
	return nil
}

// ChatTemplateOrigin is where the chat template set by SetChatTemplate came from; "" when
// the tokenizer uses the model's own.
func (t *Tokenizer) ChatTemplateOrigin() string { return t.templateOrigin }

func (t *Tokenizer) template() (*chatTemplate, error) {
	t.tmplOnce.Do(func() {
		if t.chatTemplate == "" {
			t.tmplErr = fmt.Errorf("tokenizer: %s: the model has no chat template (a base model: give one with actor_rollout_ref.model.custom_chat_template)", t.name)
			return
		}
		t.tmpl, t.tmplErr = compileTemplate(t.name, t.chatTemplate)
	})
	return t.tmpl, t.tmplErr
}

// ApplyChatTemplate renders messages with the model's chat template, as
// transformers' tokenizer.apply_chat_template(messages, tools=tools,
// add_generation_prompt=addGenerationPrompt, tokenize=False) does. tools are
// OpenAI function schemas ({"type": "function", "function": {...}}); nil
// means no tools (the template sees tools undefined).
func (t *Tokenizer) ApplyChatTemplate(messages []Message, tools []json.RawMessage, addGenerationPrompt bool) (string, error) {
	return t.ApplyChatTemplateKwargs(messages, tools, addGenerationPrompt, nil)
}

// ApplyChatTemplateKwargs is ApplyChatTemplate with extra template variables,
// as transformers' apply_chat_template(..., **kwargs) and veRL's
// apply_chat_template_kwargs pass them (e.g. {"enable_thinking": false} for
// Qwen3). They override the special-token variables, as in transformers;
// messages, tools and add_generation_prompt cannot be given this way.
func (t *Tokenizer) ApplyChatTemplateKwargs(messages []Message, tools []json.RawMessage, addGenerationPrompt bool, kwargs map[string]any) (string, error) {
	tmpl, err := t.template()
	if err != nil {
		return "", err
	}
	var order orderTable
	defer order.release()
	msgs := make([]any, len(messages))
	for i, m := range messages {
		v, err := messageValue(m, &order)
		if err != nil {
			return "", fmt.Errorf("tokenizer: messages[%d]: %w", i, err)
		}
		msgs[i] = v
	}
	vars, err := t.templateVars(msgs, tools, addGenerationPrompt, &order)
	if err != nil {
		return "", err
	}
	if err := addKwargs(vars, kwargs); err != nil {
		return "", err
	}
	return tmpl.render(t.name, vars)
}

func addKwargs(vars, kwargs map[string]any) error {
	for k, v := range kwargs {
		switch k {
		case "messages", "tools", "add_generation_prompt":
			return fmt.Errorf("tokenizer: template kwarg %q is an argument of its own", k)
		}
		vars[k] = v
	}
	return nil
}

func (t *Tokenizer) templateVars(msgs []any, tools []json.RawMessage, agp bool, order *orderTable) (map[string]any, error) {
	vars := map[string]any{
		"messages":              msgs,
		"add_generation_prompt": agp,
	}
	if tools != nil {
		tl := make([]any, len(tools))
		for i, raw := range tools {
			v, err := decodeJSON(raw, order)
			if err != nil {
				return nil, fmt.Errorf("tokenizer: tools[%d]: not valid JSON: %v", i, err)
			}
			tl[i] = v
		}
		vars["tools"] = tl
	}
	for name, tok := range map[string]string{"bos_token": t.bosText, "eos_token": t.eosText} {
		if tok != "" {
			vars[name] = tok
		}
	}
	if t.pad >= 0 {
		vars["pad_token"] = t.vocab[t.pad]
	}
	if t.unk >= 0 {
		vars["unk_token"] = t.vocab[t.unk]
	}
	return vars, nil
}

func messageValue(m Message, order *orderTable) (map[string]any, error) {
	v := map[string]any{"role": m.Role, "content": m.Content}
	keys := []string{"role", "content"}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			var args any = map[string]any{}
			if len(c.Arguments) > 0 {
				a, err := decodeJSON(c.Arguments, order)
				if err != nil {
					return nil, fmt.Errorf("tool_calls[%d] (%s): arguments are not valid JSON: %v", i, c.Name, err)
				}
				args = a
			} else {
				order.add(args.(map[string]any), nil)
			}
			fn := map[string]any{"name": c.Name, "arguments": args}
			order.add(fn, []string{"name", "arguments"})
			call := map[string]any{"type": "function", "function": fn}
			ck := []string{"type", "function"}
			if c.ID != "" {
				call["id"] = c.ID
				ck = []string{"id", "type", "function"}
			}
			order.add(call, ck)
			calls[i] = call
		}
		v["tool_calls"] = calls
		keys = append(keys, "tool_calls")
	}
	if m.Name != "" {
		v["name"] = m.Name
		keys = append(keys, "name")
	}
	if m.ToolCallID != "" {
		v["tool_call_id"] = m.ToolCallID
		keys = append(keys, "tool_call_id")
	}
	order.add(v, keys)
	return v, nil
}

// RenderObservation renders observation messages (tool results, user turns)
// on their own, to append to a running conversation without re-rendering
// it: the messages are templated alone with add_generation_prompt, and the
// prefix the template puts before any message (e.g. a default system turn)
// is cut off. This is veRL's tool-agent trick; templates that refuse it
// (a conversation must start with a user turn: Gemma, Mistral) or whose
// default prefix the trick cannot find (Llama 3) render the messages after a
// stand-in user and assistant turn instead, keeping what they add. See
// docs/tokenizer.md for the order the ways are tried in.
func (t *Tokenizer) RenderObservation(messages []Message) (string, error) {
	return t.RenderObservationKwargs(messages, nil)
}

// RenderObservationKwargs is RenderObservation with extra template variables
// (see ApplyChatTemplateKwargs); veRL passes the same kwargs here as to the prompt.
func (t *Tokenizer) RenderObservationKwargs(messages []Message, kwargs map[string]any) (string, error) {
	tmpl, err := t.template()
	if err != nil {
		return "", err
	}
	full, fullErr := t.ApplyChatTemplateKwargs(messages, nil, true, kwargs)
	var lcp string
	lcpErr := fullErr
	if fullErr == nil {
		// veRL's probe: render [{}] (one empty message). Where that is not a prefix of
		// the rendered observation (templates that print an empty message as a turn, or
		// fail on it in Python), or is longer than the common prefix of a lone user turn
		// and a lone assistant turn, it is not used.
		var order orderTable
		vars, _ := t.templateVars([]any{map[string]any{}}, nil, false, &order)
		if err := addKwargs(vars, kwargs); err != nil {
			order.release()
			return "", err
		}
		p, pErr := tmpl.render(t.name, vars)
		order.release()
		lcp, lcpErr = t.turnLCP(tmpl, kwargs)
		if pErr == nil && strings.HasPrefix(full, p) && (lcpErr != nil || len(p) <= len(lcp)) {
			return full[len(p):], nil
		}
	}
	obs, ctxErr := t.observationInContext(messages, kwargs)
	if ctxErr == nil {
		return obs, nil
	}
	if lcpErr == nil && strings.HasPrefix(full, lcp) {
		return full[len(lcp):], nil
	}
	if fullErr != nil && !errors.Is(ctxErr, errNotPrefix) {
		ctxErr = fullErr
	}
	return "", fmt.Errorf("tokenizer: %s: cannot render the observation (%s) on its own: %w", t.name, roles(messages),
		unwrapName(ctxErr, t.name))
}

var errNotPrefix = errors.New("the conversation renders differently once the observation is added")

// observationInContext renders the observation after a stand-in conversation, a user turn
// and an assistant turn, and keeps what it adds to the stand-in's rendering.
func (t *Tokenizer) observationInContext(messages []Message, kwargs map[string]any) (string, error) {
	base := []Message{{Role: "user", Content: "\x01"}, {Role: "assistant", Content: "\x02"}}
	before, err := t.ApplyChatTemplateKwargs(base, nil, false, kwargs)
	if err != nil {
		return "", err
	}
	after, err := t.ApplyChatTemplateKwargs(append(base, messages...), nil, true, kwargs)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(after, before) {
		return "", errNotPrefix
	}
	return after[len(before):], nil
}

func roles(ms []Message) string {
	r := make([]string, len(ms))
	for i, m := range ms {
		r[i] = m.Role
	}
	return strings.Join(r, ", ")
}

// unwrapName drops the "tokenizer: NAME: " prefix of an error of this tokenizer, to wrap it in
// another that names it.
type namedErr struct {
	msg string
	err error
}

func (e *namedErr) Error() string { return e.msg }
func (e *namedErr) Unwrap() error { return e.err }

func unwrapName(err error, name string) error {
	msg := strings.TrimPrefix(err.Error(), "tokenizer: "+name+": ")
	return &namedErr{msg: msg, err: err}
}

// turnLCP is the common prefix of a lone user turn and a lone assistant turn,
// cut back to just after its last newline.
// Without kwargs it is computed once per Tokenizer.
func (t *Tokenizer) turnLCP(tmpl *chatTemplate, kwargs map[string]any) (string, error) {
	if len(kwargs) > 0 {
		return t.computeTurnLCP(tmpl, kwargs)
	}
	t.obsOnce.Do(func() { t.obsPrefix, t.obsErr = t.computeTurnLCP(tmpl, nil) })
	return t.obsPrefix, t.obsErr
}

func (t *Tokenizer) computeTurnLCP(tmpl *chatTemplate, kwargs map[string]any) (string, error) {
	render := func(role, content string) (string, error) {
		var order orderTable
		defer order.release()
		m, _ := messageValue(Message{Role: role, Content: content}, &order)
		vars, _ := t.templateVars([]any{m}, nil, false, &order)
		if err := addKwargs(vars, kwargs); err != nil {
			return "", err
		}
		return tmpl.render(t.name, vars)
	}
	a, err := render("user", "\x01")
	if err != nil {
		return "", err
	}
	b, err := render("assistant", "\x02")
	if err != nil {
		return "", err
	}
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	lcp := a[:n]
	return lcp[:strings.LastIndexByte(lcp, '\n')+1], nil
}
