package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// tinyChatWith copies host/sft/testdata/tiny-chat (a tiny Llama and its tokenizer, eos
// <|im_end|> = 257 in config.json, generation_config.json and tokenizer_config.json) with
// config.json's eos_token_id set to eos (JSON) and generation_config.json's text set to gen
// ("": no generation_config.json).
func tinyChatWith(t *testing.T, eos, gen string) string {
	t.Helper()
	src, dir := filepath.Join("..", "..", "host", "sft", "testdata", "tiny-chat"), t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			var cfg map[string]json.RawMessage
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			cfg["eos_token_id"] = json.RawMessage(eos)
			b, _ = json.Marshal(cfg)
		}
		writeFile(t, filepath.Join(dir, f), string(b))
	}
	if gen != "" {
		writeFile(t, filepath.Join(dir, "generation_config.json"), gen)
	}
	return dir
}

// `rlhost generate` stops at every eos id the checkpoint declares (config.json's list,
// generation_config.json's), and where it declares none at the tokenizer's eos, saying so,
// as the trainer does. The chat prompt below greedily gives 9 10 29 236 71 177 ... (no 257).
func TestGenerateEOS(t *testing.T) {
	gen := func(dir string, extra ...string) ([]int, string, string) {
		t.Helper()
		stdout, stderr, err := run(t, append([]string{"generate", "--model", dir, "--chat", "--prompt", "What is 2+2?", "--max-tokens", "12"}, extra...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var out struct {
			TokenIDs     []int  `json:"token_ids"`
			FinishReason string `json:"finish_reason"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		return out.TokenIDs, out.FinishReason, stderr
	}
	all, reason, loaded := gen(tinyChatWith(t, `257`, ""), "--ignore-eos")
	if len(all) != 12 || reason != "length" || slices.Contains(all, 257) {
		t.Fatalf("--ignore-eos: %v (%s); want 12 tokens without 257", all, reason)
	}
	if !strings.Contains(loaded, ": llama: 2 layers, hidden ") {
		t.Errorf("stderr %q does not name the family it loaded", loaded)
	}
	for _, tt := range []struct {
		name, eos, gen string
		stop           int // the id generation stops at
	}{
		{"config.json list", `[257, 1, ` + strconv.Itoa(all[4]) + `]`, "", all[4]},
		{"generation_config.json", `257`, `{"eos_token_id": [257, ` + strconv.Itoa(all[3]) + `]}`, all[3]},
	} {
		dir := tinyChatWith(t, tt.eos, tt.gen)
		toks, reason, _ := gen(dir)
		i := slices.Index(all, tt.stop)
		if !slices.Equal(toks, all[:i+1]) || reason != "stop" {
			t.Errorf("%s: %v (%s); want %v (stop)", tt.name, toks, reason, all[:i+1])
		}
		if toks, reason, _ := gen(dir, "--ignore-eos"); !slices.Equal(toks, all) || reason != "length" {
			t.Errorf("%s, --ignore-eos: %v (%s); want %v (length)", tt.name, toks, reason, all)
		}
	}
	toks, reason, stderr := gen(tinyChatWith(t, `null`, ""))
	if want := "the checkpoint declares no eos_token_id (config.json, generation_config.json); generation stops at the tokenizer's eos (id 257)"; !strings.Contains(stderr, want) {
		t.Errorf("no eos id: stderr %q; want %q", stderr, want)
	}
	if !slices.Equal(toks, all) || reason != "length" {
		t.Errorf("no eos id: %v (%s); want %v (length)", toks, reason, all)
	}
}

// `rlhost generate --chat --tools` warns once, on stderr, when the chat template drops the
// tools (naming the model, the template's file and the fixes), and says nothing when the
// template renders them.
func TestGenerateWarnsDroppedTools(t *testing.T) {
	tools := `[{"type": "function", "function": {"name": "calc_reward", "description": "Score an answer.", "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}}}}]`
	gen := func(dir string) (string, string) {
		t.Helper()
		stdout, stderr, err := run(t, "generate", "--model", dir, "--chat", "--prompt", "What is 2+2?", "--max-tokens", "2", "--tools", tools)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		return stdout, stderr
	}
	withTools := tinyChatWith(t, `257`, "")
	if _, stderr := gen(withTools); strings.Contains(stderr, "tools section") {
		t.Errorf("a template that renders tools warned:\n%s", stderr)
	}
	// The same model with a template that has no tools section (SmolLM2's shape).
	plain := tinyChatWith(t, `257`, "")
	cfgPath := filepath.Join(plain, "tokenizer_config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["chat_template"] = "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
	b, _ = json.Marshal(cfg)
	writeFile(t, cfgPath, string(b))
	_, stderr := gen(plain)
	if n := strings.Count(stderr, "has no tools section"); n != 1 {
		t.Fatalf("want one warning, got %d:\n%s", n, stderr)
	}
	for _, w := range []string{plain, filepath.Join(plain, "tokenizer_config.json"), "calc_reward", "data.multiturn.tool_calls_as_text", "rlhost sft", "never reads the tools variable"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("warning does not name %q:\n%s", w, stderr)
		}
	}
	if _, stderr, err := run(t, "generate", "--model", plain, "--prompt", "x", "--tools", tools); err == nil || !strings.Contains(stderr+err.Error(), "need --chat") {
		t.Errorf("--tools without --chat: %v %s", err, stderr)
	}
}
