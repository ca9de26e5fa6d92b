package trainer

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// The dropped-tools warning comes once per run whatever the number of prompts, only for
// tool_agent prompts with tools, and not when the template renders the tools.
func TestWarnDroppedTools(t *testing.T) {
	_, smolTk := smol(t)
	tiny, err := tokenizer.Load(filepath.Join("..", "sft", "testdata", "tiny-chat"))
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	tools := []task.ToolSpec{{Name: "calc_gsm8k_reward", Description: "Score an answer.", Parameters: []byte(`{"type": "object"}`)}}
	rt := &runTask{name: "gsm8k"}
	ex := func(agent string, tools []task.ToolSpec) example {
		return example{Row: task.Row{AgentName: agent}, Prompt: task.Prompt{Messages: []task.Message{{Role: "user", Content: "2+2?"}}, Tools: tools}, task: rt}
	}
	many := []example{ex("", nil), ex(rollout.ToolAgent, tools), ex(rollout.ToolAgent, tools), ex("", tools)}
	for _, tt := range []struct {
		name     string
		tk       *tokenizer.Tokenizer
		train    []example
		warnings int
		format   bool // the tool-call format line is printed
	}{
		{"no tools section, many prompts", smolTk, many, 1, true},
		{"template renders tools", tiny, many, 0, true},
		{"single-turn prompts only", smolTk, []example{ex("", nil), ex(rollout.SingleTurnAgent, tools)}, 0, false},
		{"tool agent via the default loop", smolTk, []example{ex("", tools)}, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := &Trainer{render: rollout.Chat{Tok: tt.tk, Format: tokenizer.ToolFormatHermes}, train: tt.train, val: tt.train}
			var out bytes.Buffer
			defLoop := rollout.SingleTurnAgent
			if tt.name == "tool agent via the default loop" {
				defLoop = rollout.ToolAgent
			}
			if err := tr.warnDroppedTools(&out, "models/x.gguf", defLoop, "tool-call format: hermes"); err != nil {
				t.Fatal(err)
			}
			var quiet bytes.Buffer // the default (auto, found hermes) prints no format line
			if err := tr.warnDroppedTools(&quiet, "models/x.gguf", defLoop, ""); err != nil || strings.Contains(quiet.String(), "tool-call format") {
				t.Errorf("format line printed without one: %v\n%s", err, quiet.String())
			}
			if n := strings.Count(out.String(), "has no tools section"); n != tt.warnings {
				t.Errorf("%d warnings, want %d:\n%s", n, tt.warnings, out.String())
			}
			if got := strings.Contains(out.String(), "tool-call format: hermes"); got != tt.format {
				t.Errorf("format line printed %v, want %v:\n%s", got, tt.format, out.String())
			}
			if tt.warnings > 0 {
				for _, w := range []string{"models/x.gguf", "task gsm8k", "calc_gsm8k_reward", "data.multiturn.tool_calls_as_text", "rlhost sft"} {
					if !strings.Contains(out.String(), w) {
						t.Errorf("warning lacks %q:\n%s", w, out.String())
					}
				}
			}
		})
	}
}
