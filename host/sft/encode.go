package sft

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// Why a row is skipped. Each skipped row is counted under its reason and reported with its
// file and row.
const (
	ReasonBadRow           = "bad_row"           // a column is missing or malformed
	ReasonNoAssistant      = "no_assistant_turn" // nothing to learn: no assistant message
	ReasonUnknownTool      = "unknown_tool"      // a tool call names a tool the row does not declare
	ReasonTemplateNoTools  = "template_cannot_render_tool_calls"
	ReasonTemplateError    = "template_error"      // the chat template failed on the row
	ReasonTemplateNoPrefix = "template_not_prefix" // the template renders the history differently once a turn is added
	ReasonTooLong          = "too_long"            // longer than data.max_length tokens
)

// Conversation is one SFT row: chat messages in OpenAI's shape and the tools the row
// declares.
type Conversation struct {
	Messages []task.Message
	Tools    []task.ToolSpec
}

// Example is one tokenised training sequence: IDs are the prompt and response tokens as the
// tool agent lays them out, Mask[t] is true where token t is a model (assistant) token, the
// tokens the loss is on.
type Example struct {
	IDs  []int32
	Mask []bool
	File string
	Row  int
}

// LossTokens is the number of tokens the loss is on.
func (e *Example) LossTokens() int {
	n := 0
	for t := 1; t < len(e.Mask); t++ {
		if e.Mask[t] {
			n++
		}
	}
	return n
}

// SkipError is why one row cannot be trained on.
type SkipError struct {
	Reason string
	Detail string
}

func (e *SkipError) Error() string { return e.Reason + ": " + e.Detail }

func skip(reason, format string, args ...any) *SkipError {
	return &SkipError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Encoder tokenises conversations exactly as the tool agent loop lays out a trajectory
// (host/rollout): the messages before the first assistant turn are the prompt
// (rollout.EncodePrompt: the chat template with the tools and the generation prompt); each
// assistant turn is the tokens a model generates for it (the text the template renders for
// the turn, up to and including the eos token, where generation stops); the messages
// between two assistant turns are one observation (rollout.EncodeObservation: templated
// alone). So SFT and RL train on the same token sequences.
type Encoder struct {
	Tok *tokenizer.Tokenizer
	// Kwargs are extra chat-template variables (data.apply_chat_template_kwargs), passed
	// wherever the template renders, as the rollout passes them.
	Kwargs map[string]any
	// Format is the tool-call format (data.multiturn.format): what tool calls written in
	// the content are read as, and what ToolCallsAsText writes; "" or auto: detected
	// from the tokenizer, as the rollout does.
	Format tokenizer.ToolFormat
	// MaxLength is the longest sequence accepted (0: no limit).
	MaxLength int
	// ToolCallsAsText writes tool calls into the content as text in Format when the
	// template does not render tool_calls.
	ToolCallsAsText bool
}

// chat is the rollout's view of the encoder's template, kwargs and format.
func (e *Encoder) chat() rollout.Chat {
	c := rollout.Chat{Tok: e.Tok, Kwargs: e.Kwargs, Format: e.Format}
	c.Format = c.ToolFormat()
	return c
}

// Encode tokenises one conversation.
func (e *Encoder) Encode(c Conversation) (*Example, *SkipError) {
	msgs := c.Messages
	chat := e.chat()
	first := -1
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return nil, skip(ReasonBadRow, "message %d has role %q (want system, user, assistant or tool)", i, m.Role)
		}
		if m.Role == "assistant" && first < 0 {
			first = i
		}
	}
	if first < 0 {
		return nil, skip(ReasonNoAssistant, "no assistant message among %d", len(msgs))
	}
	known := map[string]bool{}
	for _, t := range c.Tools {
		known[t.Name] = true
	}
	for i, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		names := make([]string, 0, len(m.ToolCalls))
		for _, tc := range m.ToolCalls {
			names = append(names, tc.Name)
		}
		text, _, _ := chat.ParseToolCalls(m.Content)
		for _, tc := range text {
			names = append(names, tc.Name)
		}
		for _, n := range names {
			if !known[n] {
				return nil, skip(ReasonUnknownTool, "message %d calls %q; the row declares %s", i, n, toolList(c.Tools))
			}
		}
	}
	tools := c.Tools
	toolJSON := rollout.ToolSchemas(tools)
	prompt := task.Prompt{Messages: msgs[:first], Tools: tools}
	ids, err := chat.EncodePrompt(rollout.ToolAgent, prompt)
	if err != nil {
		return nil, skip(ReasonTemplateError, "prompt: %v", err)
	}
	ex := &Example{}
	add := func(toks []int, model bool) {
		for _, t := range toks {
			ex.IDs = append(ex.IDs, int32(t))
			ex.Mask = append(ex.Mask, model)
		}
	}
	add(ids, false)
	// hist holds the messages as rendered (assistant turns with their tool calls as text
	// when the template needs that).
	hist := append([]task.Message(nil), msgs[:first]...)
	eos := e.Tok.EOS()
	for i := first; i < len(msgs); {
		if msgs[i].Role != "assistant" {
			j := i
			for j < len(msgs) && msgs[j].Role != "assistant" {
				j++
			}
			if j == len(msgs) { // trailing observations: nothing after them to learn
				break
			}
			obs, err := chat.EncodeObservation(msgs[i:j])
			if err != nil {
				return nil, skip(ReasonTemplateError, "messages %d-%d: %v", i, j-1, err)
			}
			add(obs, false)
			hist = append(hist, msgs[i:j]...)
			i = j
			continue
		}
		m := msgs[i]
		if len(m.ToolCalls) > 0 {
			renders, err := e.rendersToolCalls(hist, m, toolJSON)
			if err != nil {
				return nil, skip(ReasonTemplateError, "message %d: %v", i, err)
			}
			if !renders {
				if !e.ToolCallsAsText {
					return nil, skip(ReasonTemplateNoTools, "message %d has tool_calls and the chat template of %s does not render them (set data.multiturn.tool_calls_as_text=true to write them as %s text)", i, e.Tok.Name(), chat.Format)
				}
				m = toolCallsAsText(chat.Format, m)
			}
		}
		before, err := e.Tok.ApplyChatTemplateKwargs(rollout.TokMessages(hist), toolJSON, true, e.Kwargs)
		if err != nil {
			return nil, skip(ReasonTemplateError, "message %d: %v", i, err)
		}
		after, err := e.Tok.ApplyChatTemplateKwargs(rollout.TokMessages(append(hist, m)), toolJSON, false, e.Kwargs)
		if err != nil {
			return nil, skip(ReasonTemplateError, "message %d: %v", i, err)
		}
		if !strings.HasPrefix(after, before) {
			return nil, skip(ReasonTemplateNoPrefix, "message %d: the template renders the conversation before this turn differently once the turn is added", i)
		}
		toks := e.Tok.Encode(after[len(before):], false)
		cut := -1
		for k, t := range toks {
			if t == eos {
				cut = k
				break
			}
		}
		if cut < 0 {
			toks = append(toks, eos) // a template that ends turns without the eos token
		} else {
			if rest := e.Tok.Decode(toks[cut+1:], false); strings.TrimSpace(rest) != "" {
				return nil, skip(ReasonTemplateError, "message %d: text after the end of the turn: %q", i, clip(rest, 60))
			}
			toks = toks[:cut+1]
		}
		add(toks, true)
		hist = append(hist, m)
		i++
	}
	if e.MaxLength > 0 && len(ex.IDs) > e.MaxLength {
		return nil, skip(ReasonTooLong, "%d tokens, data.max_length is %d", len(ex.IDs), e.MaxLength)
	}
	return ex, nil
}

// rendersToolCalls tells whether the template renders an assistant turn's tool calls: the
// turn rendered with and without them must differ.
func (e *Encoder) rendersToolCalls(hist []task.Message, m task.Message, tools []json.RawMessage) (bool, error) {
	with, err := e.Tok.ApplyChatTemplateKwargs(rollout.TokMessages(append(append([]task.Message(nil), hist...), m)), tools, false, e.Kwargs)
	if err != nil {
		return false, err
	}
	bare := m
	bare.ToolCalls = nil
	without, err := e.Tok.ApplyChatTemplateKwargs(rollout.TokMessages(append(append([]task.Message(nil), hist...), bare)), tools, false, e.Kwargs)
	if err != nil {
		return false, err
	}
	if with == without {
		return false, nil
	}
	for _, c := range m.ToolCalls {
		if !strings.Contains(with, c.Name) {
			return false, nil
		}
	}
	return true, nil
}

// HermesCall is the text of one tool call in the Hermes format the rollout's parser reads:
// <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, with the JSON spaced as
// Python's json.dumps writes it (what Qwen2.5's template renders).
func HermesCall(name string, args json.RawMessage) string {
	return tokenizer.FormatToolCalls(tokenizer.ToolFormatHermes, []tokenizer.ToolCall{{Name: name, Arguments: args}})
}

// toolCallsAsText moves an assistant message's tool calls into its content as text in format
// f (tokenizer.FormatToolCalls): after the content on a line of their own (hermes,
// llama3_json), or right after it (mistral, whose parser reads the content as what comes
// before [TOOL_CALLS]). Mistral calls keep ids the format allows.
func toolCallsAsText(f tokenizer.ToolFormat, m task.Message) task.Message {
	calls := make([]tokenizer.ToolCall, len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		calls[i] = tokenizer.ToolCall{Name: c.Name, Arguments: c.Arguments}
		if f == tokenizer.ToolFormatMistral && rollout.ValidToolCallID(f, c.ID) {
			calls[i].ID = c.ID
		}
	}
	text := tokenizer.FormatToolCalls(f, calls)
	switch {
	case m.Content == "":
		m.Content = text
	case f == tokenizer.ToolFormatMistral:
		m.Content += text
	default:
		m.Content += "\n" + text
	}
	m.ToolCalls = nil
	return m
}

func toolList(ts []task.ToolSpec) string {
	if len(ts) == 0 {
		return "no tools"
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	sort.Strings(names)
	return "tools " + strings.Join(names, ", ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
