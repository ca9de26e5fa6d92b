package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The chat templates of the Llama 3.1/3.2, Gemma 3 and Mistral families, against goldens made
// by scripts/goldens/tokenizer/make_chat_goldens.py (transformers' apply_chat_template, and
// for mistral mistral-common's encoding; see docs/tokenizer.md for which golden uses which).

const lenmlVersion = "3.7.2"
const mistralCommonVersion = "1.13.1"

// cacheDir is a directory under ~/.cache/rlhost (or $env) holding file; it skips (fails under
// CI) when file is missing.
func cacheDir(t testing.TB, env, makeTarget string, rel ...string) string {
	p := os.Getenv(env)
	if p == "" {
		home, _ := os.UserHomeDir()
		p = filepath.Join(append([]string{home, ".cache", "rlhost"}, rel...)...)
	}
	needAsset(t, filepath.Join(p, "tokenizer.json"), makeTarget)
	return p
}

func llama31Dir(t testing.TB) string {
	return cacheDir(t, "RLHOST_LLAMA31_TOKENIZER", "tokenizer-llama3_1", "tokenizer-llama3_1", lenmlVersion, "llama-3.1")
}

func gemma3Dir(t testing.TB) string {
	return cacheDir(t, "RLHOST_GEMMA3_TOKENIZER", "tokenizer-gemma3", "tokenizer-gemma3", lenmlVersion, "package", "models")
}

func mistralDir(t testing.TB) string {
	return cacheDir(t, "RLHOST_MISTRAL_TOKENIZER", "tokenizer-mistral", "tokenizer-mistral", mistralCommonVersion, "tekken_240718")
}

var withTemplate sync.Map // dir + "\x00" + template -> *loadResult

// loadWithTemplate is the tokenizer of dir (loaded once per test binary) with the chat
// template of testdata/templates/NAME (or the directory's own when name is "").
func loadWithTemplate(t testing.TB, dir, name string) *Tokenizer {
	t.Helper()
	r, _ := withTemplate.LoadOrStore(dir+"\x00"+name, &loadResult{})
	lr := r.(*loadResult)
	lr.once.Do(func() {
		base := load(t, dir)
		if name == "" {
			lr.tk = base
			return
		}
		b, err := os.ReadFile(filepath.Join("testdata", "templates", name))
		if err != nil {
			lr.err = err
			return
		}
		// The same Rust tokenizer and vocabulary with another template.
		lr.tk = &Tokenizer{name: base.name, tk: base.tk, vocabSize: base.vocabSize, added: base.added, byContent: base.byContent,
			byteLevel: base.byteLevel, soleByteTokens: base.soleByteTokens, vocab: base.vocab, bos: base.bos, eos: base.eos,
			pad: base.pad, unk: base.unk, bosText: base.bosText, eosText: base.eosText, chatTemplate: string(b)}
	})
	if lr.err != nil {
		t.Fatalf("load %s with template %q: %v", dir, name, lr.err)
	}
	return lr.tk
}

type familyCase struct {
	chatGolden
	IDs             []int  `json:"ids"`
	Exception       string `json:"exception"`
	ReferenceIDs    []int  `json:"reference_ids"`
	TemplateDiffers string `json:"template_differs"`
}

type familyGoldens struct {
	Template  string       `json:"template"`
	Reference string       `json:"reference"`
	Cases     []familyCase `json:"cases"`
}

// chatFamilies: golden file name, the tokenizer directory and the template file.
var chatFamilies = []struct {
	name     string
	dir      func(testing.TB) string
	template string
}{
	{"llama3_1", llama31Dir, "meta-llama-Llama-3.1-8B-Instruct.jinja"},
	{"llama3_2", llama31Dir, "meta-llama-Llama-3.2-3B-Instruct.jinja"},
	{"gemma3", gemma3Dir, ""},
	{"mistral", mistralDir, "mistral-common-1.13.1-v3-tekken.jinja"},
	{"mistral_nemo", mistralDir, "mistralai-Mistral-Nemo-Instruct-2407.jinja"},
}

// TestChatFamilyGoldens renders every golden conversation of each family and compares the
// text and its token ids with the reference; a conversation the template refuses in Python
// (raise_exception) must be refused here with the same message.
func TestChatFamilyGoldens(t *testing.T) {
	for _, f := range chatFamilies {
		t.Run(f.name, func(t *testing.T) {
			tk := loadWithTemplate(t, f.dir(t), f.template)
			var g familyGoldens
			readJSON(t, "chat_"+f.name+".json", &g)
			if len(g.Cases) == 0 {
				t.Fatal("no goldens")
			}
			for _, c := range g.Cases {
				got, err := tk.ApplyChatTemplateKwargs(c.Messages, c.Tools, c.AddGenerationPrompt, c.Kwargs)
				if c.Exception != "" {
					if err == nil || !strings.Contains(err.Error(), "raised an exception: "+c.Exception) {
						t.Errorf("%s agp=%v: got %q, %v; want the exception %q", c.Name, c.AddGenerationPrompt, got, err, c.Exception)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s agp=%v: %v", c.Name, c.AddGenerationPrompt, err)
					continue
				}
				if got != c.Text {
					t.Errorf("%s agp=%v: rendered text differs at byte %d:\n got %q\nwant %q",
						c.Name, c.AddGenerationPrompt, firstDiff(got, c.Text), got, c.Text)
					continue
				}
				ids := tk.Encode(got, false)
				if !slices.Equal(ids, c.IDs) {
					t.Errorf("%s agp=%v: ids differ from the reference tokenizer's:\n got %v\nwant %v", c.Name, c.AddGenerationPrompt, ids, c.IDs)
				}
				if c.ReferenceIDs != nil && c.TemplateDiffers == "" && !slices.Equal(ids, c.ReferenceIDs) {
					t.Errorf("%s agp=%v: ids differ from %s's:\n got %v\nwant %v", c.Name, c.AddGenerationPrompt, g.Reference, ids, c.ReferenceIDs)
				}
			}
		})
	}
}

type familyObs struct {
	obsGolden
	IDs       []int  `json:"ids"`
	Exception string `json:"exception"`
}

// TestRenderObservationFamilies: a tool or user turn rendered alone gives the text it adds to
// a conversation (the golden: the conversation rendered with and without it, in Python).
// Gemma 3's template cannot render a tool turn after an assistant turn: that is an error
// naming the template's exception.
func TestRenderObservationFamilies(t *testing.T) {
	for _, f := range chatFamilies {
		if f.name == "llama3_2" {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			tk := loadWithTemplate(t, f.dir(t), f.template)
			var goldens []familyObs
			readJSON(t, "obs_"+f.name+".json", &goldens)
			for _, g := range goldens {
				got, err := tk.RenderObservationKwargs(g.Messages, g.Kwargs)
				if g.Exception != "" {
					if err == nil || !strings.Contains(err.Error(), g.Exception) {
						t.Errorf("%s: got %q, %v; want an error with %q", g.Name, got, err, g.Exception)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", g.Name, err)
					continue
				}
				if got != g.Text {
					t.Errorf("%s: RenderObservation = %q, want %q", g.Name, got, g.Text)
				}
				if ids := tk.Encode(got, false); !slices.Equal(ids, g.IDs) {
					t.Errorf("%s: ids %v, want %v", g.Name, ids, g.IDs)
				}
			}
		})
	}
}

// TestFamilyToolSupport: the tool-call format each family's own template names, and whether
// the template shows the model its tools (a prompt renders differently with them).
func TestFamilyToolSupport(t *testing.T) {
	tool := json.RawMessage(`{"type": "function", "function": {"name": "calc_reward", "description": "Score.", "parameters": {"type": "object"}}}`)
	msgs := []Message{{Role: "user", Content: "2+2?"}}
	for _, tt := range []struct {
		name   string
		tk     func(testing.TB) *Tokenizer
		format ToolFormat
		tools  bool
	}{
		{"smollm2", func(t testing.TB) *Tokenizer { return load(t, modelPath(t)) }, ToolFormatHermes, false},
		{"qwen3", func(t testing.TB) *Tokenizer { return load(t, qwen3Dir(t)) }, ToolFormatHermes, true},
		{"llama3_1", func(t testing.TB) *Tokenizer {
			return loadWithTemplate(t, llama31Dir(t), "meta-llama-Llama-3.1-8B-Instruct.jinja")
		}, ToolFormatLlama3JSON, true},
		{"llama3_2", func(t testing.TB) *Tokenizer {
			return loadWithTemplate(t, llama31Dir(t), "meta-llama-Llama-3.2-3B-Instruct.jinja")
		}, ToolFormatLlama3JSON, true},
		{"gemma3", func(t testing.TB) *Tokenizer { return loadWithTemplate(t, gemma3Dir(t), "") }, ToolFormatHermes, false},
		{"mistral", func(t testing.TB) *Tokenizer {
			return loadWithTemplate(t, mistralDir(t), "mistral-common-1.13.1-v3-tekken.jinja")
		}, ToolFormatMistral, true},
		{"mistral_nemo", func(t testing.TB) *Tokenizer {
			return loadWithTemplate(t, mistralDir(t), "mistralai-Mistral-Nemo-Instruct-2407.jinja")
		}, ToolFormatMistral, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tk := tt.tk(t)
			if f, why := tk.DetectToolFormat(); f != tt.format {
				t.Errorf("DetectToolFormat = %s (%s), want %s", f, why, tt.format)
			}
			with, err := tk.ApplyChatTemplate(msgs, []json.RawMessage{tool}, true)
			if err != nil {
				t.Fatal(err)
			}
			without, err := tk.ApplyChatTemplate(msgs, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := with != without && strings.Contains(with, "calc_reward"); got != tt.tools {
				t.Errorf("renders tools: %v, want %v", got, tt.tools)
			}
		})
	}
}

// TestFamilyToolCallRoundTrip: what each family's template renders for an assistant turn with
// tool calls holds FormatToolCalls' text for the family's format, and the family's parser
// reads the rendered turn back as the same calls (ids included where the format has them).
func TestFamilyToolCallRoundTrip(t *testing.T) {
	calls := []ToolCall{{ID: "a1b2c3d4e", Name: "get_weather", Arguments: json.RawMessage(`{"city": "東京", "days": 2, "opts": {"unit": "C", "hours": [6, 12]}}`)}}
	for _, tt := range []struct {
		name string
		tk   func(testing.TB) *Tokenizer
	}{
		{"qwen3", func(t testing.TB) *Tokenizer { return load(t, qwen3Dir(t)) }},
		{"llama3_1", func(t testing.TB) *Tokenizer {
			return loadWithTemplate(t, llama31Dir(t), "meta-llama-Llama-3.1-8B-Instruct.jinja")
		}},
		{"mistral", func(t testing.TB) *Tokenizer {
			return loadWithTemplate(t, mistralDir(t), "mistral-common-1.13.1-v3-tekken.jinja")
		}},
		{"mistral_nemo", func(t testing.TB) *Tokenizer {
			return loadWithTemplate(t, mistralDir(t), "mistralai-Mistral-Nemo-Instruct-2407.jinja")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tk := tt.tk(t)
			f, _ := tk.DetectToolFormat()
			user := []Message{{Role: "user", Content: "Weather?"}}
			before, err := tk.ApplyChatTemplate(user, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			after, err := tk.ApplyChatTemplate(append(user, Message{Role: "assistant", ToolCalls: calls}), nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(after, before) {
				t.Fatalf("the turn does not extend the prompt:\n%q\n%q", before, after)
			}
			turn := after[len(before):]
			want := calls
			if f != ToolFormatMistral {
				want = []ToolCall{{Name: calls[0].Name, Arguments: calls[0].Arguments}}
			}
			if w := FormatToolCalls(f, want); !strings.Contains(turn, w) {
				t.Errorf("%s turn %q does not hold %q", f, turn, w)
			}
			got, _, errs := ParseToolCalls(f, turn)
			if len(errs) > 0 || len(got) != 1 || got[0].Name != want[0].Name || got[0].ID != want[0].ID || !sameJSON(t, got[0].Arguments, want[0].Arguments) {
				t.Errorf("%s parses %q as %+v %v", f, turn, got, errs)
			}
		})
	}
}
