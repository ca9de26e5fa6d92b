package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/config"
	hostrollout "github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/host/trainer"
	"github.com/rlhost/rlhost/sdk/task"
	"github.com/urfave/cli/v2"
)

func init() { extraCommands = append(extraCommands, generateCommand()) }

func generateCommand() *cli.Command {
	return &cli.Command{
		Name:  "generate",
		Usage: "continue a prompt with a model and print JSON (token ids, text, per-token log-probs)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "an HF model directory or a .gguf file (default: the model `make model` installs, looked up as actor_rollout_ref.model.path's default is)"},
			&cli.StringFlag{Name: "prompt", Required: true, Usage: "the prompt text (a user message with --chat)"},
			&cli.BoolFlag{Name: "chat", Usage: "render the prompt as a user message with the model's chat template"},
			&cli.StringFlag{Name: "tools", Usage: "with --chat: tools for the chat template, a JSON list (or @FILE) of OpenAI function schemas or {name, description, parameters}; a warning says when the template does not render them"},
			&cli.StringFlag{Name: "chat-template-kwargs", Usage: "with --chat: extra chat-template variables as a JSON object, e.g. '{\"enable_thinking\": false}' (data.apply_chat_template_kwargs)"},
			&cli.IntFlag{Name: "max-tokens", Value: 64},
			&cli.Float64Flag{Name: "temperature", Value: 0, Usage: "0 = greedy"},
			&cli.Float64Flag{Name: "top-p", Value: 1},
			&cli.IntFlag{Name: "top-k", Value: 0},
			&cli.Uint64Flag{Name: "seed", Value: 1},
			&cli.BoolFlag{Name: "logprobs", Usage: "include per-token log-probs"},
			&cli.StringFlag{Name: "dtype", Value: "float32", Usage: "weight type of the matrix products: float32, bfloat16, int8 or auto (actor_rollout_ref.rollout.dtype)"},
			&cli.BoolFlag{Name: "ignore-eos", Usage: "do not stop at the end-of-sequence ids (every id of config.json's and generation_config.json's eos_token_id; always max-tokens new tokens)"},
			&cli.BoolFlag{Name: "timing", Usage: "include the generation wall time (prompt + new tokens, model load excluded) and new tokens/s"},
		},
		Action: func(c *cli.Context) error {
			path := c.String("model")
			if path == "" {
				var err error
				if path, err = config.DefaultModel(); err != nil {
					return err
				}
			}
			tk, err := tokenizer.Load(path)
			if err != nil {
				return err
			}
			defer tk.Close()
			ck, err := weights.Load(path)
			if err != nil {
				return err
			}
			m, err := model.New(cpu.New(), ck)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "loaded %s: %s\n", path, m.Config.Describe())
			trainer.FallBackEOS(c.App.ErrWriter, path, m, tk) // as the trainer does, not id 0
			text := c.String("prompt")
			if c.Bool("chat") {
				if text, err = chatPrompt(c, path, tk, text); err != nil {
					return err
				}
			} else if c.IsSet("tools") || c.IsSet("chat-template-kwargs") {
				return fmt.Errorf("generate: --tools and --chat-template-kwargs need --chat")
			}
			ids := tk.Encode(text, !c.Bool("chat"))
			prompt := make([]int32, len(ids))
			for i, id := range ids {
				prompt[i] = int32(id)
			}
			n := c.Int("max-tokens")
			g, err := m.NewGenerator(1, len(prompt)+n+1)
			if err != nil {
				return err
			}
			if _, err := g.SetDtypeName(c.String("dtype")); err != nil {
				return err
			}
			start := time.Now()
			res, err := g.Generate([]model.Request{{Prompt: prompt, Sample: model.SampleConfig{MaxTokens: n,
				Temperature: float32(c.Float64("temperature")), TopP: float32(c.Float64("top-p")), TopK: c.Int("top-k"), Seed: c.Uint64("seed"), IgnoreEOS: c.Bool("ignore-eos")}}})
			if err != nil {
				return err
			}
			elapsed := time.Since(start)
			r := res[0]
			out := map[string]any{"prompt_ids": ids, "token_ids": r.Tokens, "text": tk.Decode(int32sToInts(r.Tokens), true),
				"finish_reason": r.FinishReason}
			if c.Bool("logprobs") {
				out["logprobs"] = r.Logprobs
			}
			if c.Bool("timing") {
				out["timing"] = map[string]float64{"generate_s": elapsed.Seconds(),
					"tokens_per_s": float64(len(r.Tokens)) / elapsed.Seconds()}
			}
			enc := json.NewEncoder(c.App.Writer)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(out); err != nil {
				return fmt.Errorf("generate: %w", err)
			}
			return nil
		},
	}
}

// chatPrompt renders text as a user message with the chat template, the --tools and the
// --chat-template-kwargs, and warns (once, on stderr) when the template drops the tools.
func chatPrompt(c *cli.Context, path string, tk *tokenizer.Tokenizer, text string) (string, error) {
	chat := hostrollout.Chat{Tok: tk}
	if s := c.String("chat-template-kwargs"); s != "" {
		if err := json.Unmarshal([]byte(s), &chat.Kwargs); err != nil {
			return "", fmt.Errorf("generate: --chat-template-kwargs: want a JSON object: %v", err)
		}
	}
	tools, err := parseToolsFlag(c.String("tools"))
	if err != nil {
		return "", err
	}
	msgs := []task.Message{{Role: "user", Content: text}}
	if len(tools) > 0 {
		ok, err := chat.ToolsRendered(msgs, tools)
		if err != nil {
			return "", err
		}
		if !ok {
			fmt.Fprintln(c.App.ErrWriter, chat.DroppedToolsWarning(path, "--tools", tools))
		}
	}
	return chat.RenderPrompt(msgs, tools)
}

// parseToolsFlag reads --tools: a JSON list (or @FILE holding one) of OpenAI function schemas
// ({"type": "function", "function": {...}}) or bare {name, description, parameters}.
func parseToolsFlag(s string) ([]task.ToolSpec, error) {
	if s == "" {
		return nil, nil
	}
	src := "--tools"
	if name, ok := strings.CutPrefix(s, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("generate: --tools: %w", err)
		}
		s, src = string(b), name
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("generate: %s: want a JSON list of tool schemas: %v", src, err)
	}
	out := make([]task.ToolSpec, len(raw))
	for i, r := range raw {
		var w struct {
			Function *task.ToolSpec `json:"function"`
		}
		if err := json.Unmarshal(r, &w); err == nil && w.Function != nil {
			out[i] = *w.Function
		} else if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, fmt.Errorf("generate: %s: tool %d: %v", src, i, err)
		}
		if out[i].Name == "" {
			return nil, fmt.Errorf("generate: %s: tool %d has no name", src, i)
		}
	}
	return out, nil
}

func int32sToInts(x []int32) []int {
	out := make([]int, len(x))
	for i, v := range x {
		out[i] = int(v)
	}
	return out
}
