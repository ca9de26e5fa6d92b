package rollout

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/sdk/task"
)

// Chat is how one model's conversations become tokens and its text becomes tool calls: the
// tokenizer with its chat template, the template's extra variables (veRL's
// data.apply_chat_template_kwargs, e.g. Qwen3's enable_thinking) and the tool-call format
// (actor_rollout_ref.rollout.multi_turn.format). The rollout, validation, the chat server and
// SFT all render through it, so they see identical tokens.
type Chat struct {
	Tok    *tokenizer.Tokenizer
	Kwargs map[string]any
	// Format is the tool-call format; "" or auto: detected from the tokenizer.
	Format tokenizer.ToolFormat
}

// ToolFormat is the format tool calls are read and written in: Format, or the tokenizer's
// own (tokenizer.DetectToolFormat) when Format is "" or auto.
func (c Chat) ToolFormat() tokenizer.ToolFormat {
	if c.Format == "" || c.Format == tokenizer.ToolFormatAuto {
		f, _ := c.Tok.DetectToolFormat()
		return f
	}
	return c.Format
}

// ResolveToolFormat turns a configured format name into the format a run uses, with a line
// for the console saying which and why.
func ResolveToolFormat(tk *tokenizer.Tokenizer, name string) (tokenizer.ToolFormat, string, error) {
	f, err := tokenizer.ParseToolFormat(name)
	if err != nil {
		return "", "", fmt.Errorf("%w: actor_rollout_ref.rollout.multi_turn.format: %v", ErrConfig, err)
	}
	if f != tokenizer.ToolFormatAuto {
		return f, fmt.Sprintf("tool-call format: %s (actor_rollout_ref.rollout.multi_turn.format)", f), nil
	}
	f, why := tk.DetectToolFormat()
	return f, fmt.Sprintf("tool-call format: %s (auto: %s)", f, why), nil
}

// RenderPrompt renders messages (and tools) with the chat template and the generation prompt.
func (c Chat) RenderPrompt(msgs []task.Message, tools []task.ToolSpec) (string, error) {
	text, err := c.Tok.ApplyChatTemplateKwargs(TokMessages(msgs), ToolSchemas(tools), true, c.Kwargs)
	if err != nil {
		return "", fmt.Errorf("%w: chat template: %v", ErrConfig, err)
	}
	return text, nil
}

// EncodePrompt renders the prompt as the loops do: the chat template over the messages, with
// the tools for the tool agent, and the generation prompt.
func (c Chat) EncodePrompt(agentName string, p task.Prompt) ([]int, error) {
	var tools []task.ToolSpec
	if agentName == ToolAgent {
		tools = p.Tools
	}
	text, err := c.RenderPrompt(p.Messages, tools)
	if err != nil {
		return nil, err
	}
	return c.Tok.Encode(text, false), nil
}

// EncodeObservation renders observation messages (tool results, user turns) on their own and
// encodes them, as the tool agent appends them to a trajectory (with mask 0): the chat
// template over the messages alone with the generation prompt, the template's default prefix
// cut off (tokenizer.RenderObservation).
func (c Chat) EncodeObservation(msgs []task.Message) ([]int, error) {
	text, err := c.Tok.RenderObservationKwargs(TokMessages(msgs), c.Kwargs)
	if err != nil {
		return nil, fmt.Errorf("%w: observation template: %v", ErrConfig, err)
	}
	return c.Tok.Encode(text, false), nil
}

// ParseToolCalls reads the tool calls of an assistant turn (its text with special tokens
// kept) in the chat's format; see tokenizer.ParseToolCalls.
func (c Chat) ParseToolCalls(raw string) ([]tokenizer.ToolCall, string, []error) {
	return tokenizer.ParseToolCalls(c.ToolFormat(), raw)
}

// ToolCallID is the id the rollout gives call i of an assistant turn when the model wrote
// none: call_TURN_I, or for the mistral format 9 letters and digits (Mistral's templates
// refuse other ids).
func ToolCallID(f tokenizer.ToolFormat, turn, i int) string {
	if f == tokenizer.ToolFormatMistral {
		return fmt.Sprintf("t%03dc%04d", turn%1000, i%10000)
	}
	return fmt.Sprintf("call_%d_%d", turn, i)
}

// ValidToolCallID tells whether a model-written id can be kept: Mistral's 9 letters and
// digits for the mistral format, any short printable id otherwise.
func ValidToolCallID(f tokenizer.ToolFormat, id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (f == tokenizer.ToolFormatMistral || r <= ' ' || r > '~') {
			return false
		}
	}
	return f != tokenizer.ToolFormatMistral || len(id) == 9
}

// TokMessages converts a conversation to the tokenizer's messages (what its chat template renders).
func TokMessages(ms []task.Message) []tokenizer.Message {
	out := make([]tokenizer.Message, len(ms))
	for i, m := range ms {
		out[i] = tokenizer.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, tokenizer.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
	}
	return out
}

// ToolSchemas are the tools as the rollout passes them to the chat template: OpenAI function
// schemas, nil for none. SFT renders its rows through the same two functions, so SFT and RL
// see identical tokens.
func ToolSchemas(ts []task.ToolSpec) []json.RawMessage {
	if len(ts) == 0 {
		return nil
	}
	out := make([]json.RawMessage, len(ts))
	for i, t := range ts {
		out[i] = t.OpenAI()
	}
	return out
}

// ToolsRendered tells whether the chat template shows the model a prompt's tools: the prompt
// rendered with the tools differs from the prompt rendered without them, and names every tool.
// A template without a tools section (SmolLM2's, Gemma 3's) renders both alike: the schemas
// are dropped and the model never learns the tools exist.
func (c Chat) ToolsRendered(msgs []task.Message, tools []task.ToolSpec) (bool, error) {
	if len(tools) == 0 {
		return true, nil
	}
	with, err := c.RenderPrompt(msgs, tools)
	if err != nil {
		return false, err
	}
	without, err := c.RenderPrompt(msgs, nil)
	if err != nil {
		return false, err
	}
	if with == without {
		return false, nil
	}
	for _, t := range tools {
		if !strings.Contains(with, t.Name) {
			return false, nil
		}
	}
	return true, nil
}

// DroppedToolsWarning is the console warning for a prompt whose tools the chat template does
// not render (see Chat.ToolsRendered): it names the model, the template and the fixes. who
// names whose tools they are (e.g. "task gsm8k").
func (c Chat) DroppedToolsWarning(model, who string, tools []task.ToolSpec) string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	how := "it renders the prompt the same with and without them"
	if !strings.Contains(c.Tok.ChatTemplate(), "tools") {
		how = "it never reads the tools variable"
	}
	return fmt.Sprintf("warning: the chat template of %s (%s) has no tools section: the schemas of the tools of %s (%s) are not in the prompt "+
		"(%s), so the model is never shown them. Fixes: a model or chat template that renders tools (docs/tokenizer.md lists them); "+
		"or describe the tools in the task's prompt text; or a cold start: rlhost sft on conversations with tool calls "+
		"(data.multiturn.tool_calls_as_text=true writes them as %s text, the format this run parses)",
		model, templateSource(c.Tok), who, strings.Join(names, ", "), how, c.ToolFormat())
}

// templateSource says where the chat template of tk came from: the one the config set
// (SetChatTemplate), or the model's own as tokenizer.Load reads it.
func templateSource(tk *tokenizer.Tokenizer) string {
	if o := tk.ChatTemplateOrigin(); o != "" {
		return o
	}
	name := tk.Name()
	if strings.HasSuffix(strings.ToLower(name), ".gguf") {
		return "the GGUF's tokenizer.chat_template"
	}
	dir := filepath.Dir(name)
	if _, err := os.Stat(filepath.Join(dir, "chat_template.jinja")); err == nil {
		return filepath.Join(dir, "chat_template.jinja")
	}
	return filepath.Join(dir, "tokenizer_config.json")
}
