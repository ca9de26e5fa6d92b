package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rlhost/rlhost/gpu/gguf"
	"github.com/rlhost/rlhost/gpu/tokenizer"
)

// engineServer answers POSTs to path with reply(request body); calls counts them.
func engineServer(t *testing.T, path string, reply func(req map[string]any) (int, any)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != path || r.Method != http.MethodPost {
			http.Error(w, "no route "+r.URL.Path, http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer sekret" {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		status, body := reply(req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func ints(v any) []int {
	xs, _ := v.([]any)
	out := make([]int, len(xs))
	for i, x := range xs {
		f, _ := x.(float64)
		out[i] = int(f)
	}
	return out
}

var (
	wantIDs = []int{17, 42, 2}
	wantLPs = []float32{-0.5, -1.25, -0.125}
)

// The three id-returning protocols, answered in the shapes their servers document.
func TestEngineProtocols(t *testing.T) {
	prompt := []int{1, 2, 3, 4}
	sp := SamplingParams{MaxTokens: 8, Temperature: 1, TopP: 1, TopK: -1, Seed: 1<<40 + 7}
	for _, tc := range []struct {
		protocol, path string
		reply          func(req map[string]any) (int, any)
	}{
		{ProtocolVLLM, "/v1/completions", func(req map[string]any) (int, any) {
			if !equalInts(ints(req["prompt"]), prompt) || req["return_token_ids"] != true || req["max_tokens"] != 8.0 || req["seed"] != 7.0 {
				return 400, map[string]any{"error": fmt.Sprint(req)}
			}
			return 200, map[string]any{"choices": []any{map[string]any{"text": "x", "token_ids": wantIDs, "finish_reason": "stop",
				"logprobs": map[string]any{"tokens": []string{"a", "b", ""}, "token_logprobs": wantLPs}}}}
		}},
		{ProtocolVLLM + " (token_id:N)", "/v1/completions", func(req map[string]any) (int, any) {
			return 200, map[string]any{"choices": []any{map[string]any{"text": "x", "finish_reason": "stop",
				"logprobs": map[string]any{"tokens": []string{"token_id:17", "token_id:42", "token_id:2"}, "token_logprobs": wantLPs}}}}
		}},
		{ProtocolSGLang, "/generate", func(req map[string]any) (int, any) {
			if !equalInts(ints(req["input_ids"]), prompt) || req["return_logprob"] != true {
				return 400, map[string]any{"error": fmt.Sprint(req)}
			}
			otl := []any{}
			for i := range wantIDs {
				otl = append(otl, []any{wantLPs[i], wantIDs[i], nil})
			}
			return 200, map[string]any{"text": "x", "output_ids": wantIDs, "meta_info": map[string]any{"output_token_logprobs": otl,
				"finish_reason": map[string]any{"type": "stop", "matched": 2}}}
		}},
		{ProtocolLlamaCpp, "/completion", func(req map[string]any) (int, any) {
			if !equalInts(ints(req["prompt"]), prompt) || req["return_tokens"] != true || req["n_probs"] != 1.0 || req["n_predict"] != 8.0 {
				return 400, map[string]any{"error": fmt.Sprint(req)}
			}
			probs := []any{}
			for i := range wantIDs {
				probs = append(probs, map[string]any{"id": wantIDs[i], "token": "t", "logprob": wantLPs[i], "top_logprobs": []any{}})
			}
			return 200, map[string]any{"content": "x", "tokens": wantIDs, "stop_type": "eos", "completion_probabilities": probs}
		}},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			srv, _ := engineServer(t, tc.path, tc.reply)
			e, err := NewEnginePolicy(EngineConfig{BaseURL: srv.URL + "/v1/", Protocol: strings.Fields(tc.protocol)[0], APIKey: "sekret"})
			if err != nil {
				t.Fatal(err)
			}
			g, err := e.Generate(context.Background(), prompt, sp)
			if err != nil {
				t.Fatal(err)
			}
			if !equalInts(g.Tokens, wantIDs) || fmt.Sprint(g.Logprobs) != fmt.Sprint(wantLPs) || g.FinishReason != "stop" {
				t.Errorf("got %+v", g)
			}
			if s := e.Stats(); s.Requests != 1 || s.Failures != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// Engines that leave out what exact RL needs are refused with the URL and the field.
func TestEngineMissingFields(t *testing.T) {
	for _, tc := range []struct {
		protocol, path string
		answer         any
		want           string
	}{
		{ProtocolVLLM, "/v1/completions", map[string]any{"choices": []any{map[string]any{"token_ids": wantIDs, "finish_reason": "stop"}}},
			"has no choices[0].logprobs.token_logprobs"},
		{ProtocolVLLM, "/v1/completions", map[string]any{"choices": []any{map[string]any{"finish_reason": "stop",
			"logprobs": map[string]any{"tokens": []string{"a", "b", "c"}, "token_logprobs": wantLPs}}}}, `logprobs.tokens[0] = "a" is not token_id:N`},
		{ProtocolVLLM, "/v1/completions", map[string]any{"choices": []any{map[string]any{"token_ids": wantIDs, "finish_reason": "stop",
			"logprobs": map[string]any{"token_logprobs": []any{-1.0, nil, -2.0}}}}}, "token_logprobs[1] (null)"},
		{ProtocolVLLM, "/v1/completions", map[string]any{"choices": []any{map[string]any{"token_ids": wantIDs, "finish_reason": "stop",
			"logprobs": map[string]any{"token_logprobs": []any{-1.0}}}}}, "1 log-probs for 3 tokens"},
		{ProtocolSGLang, "/generate", map[string]any{"text": "x", "meta_info": map[string]any{}}, "has no meta_info.output_token_logprobs"},
		{ProtocolLlamaCpp, "/completion", map[string]any{"content": "x", "tokens": wantIDs}, "has no completion_probabilities"},
		{ProtocolLlamaCpp, "/completion", map[string]any{"content": "x"}, "has no tokens (return_tokens)"},
		{ProtocolLlamaCpp, "/completion", map[string]any{"content": "x", "tokens": wantIDs, "completion_probabilities": []any{
			map[string]any{"id": 17, "logprob": -0.5}, map[string]any{"id": 2, "logprob": -0.1}}}, "has no completion_probabilities entry for tokens[1] = 42"},
	} {
		srv, _ := engineServer(t, tc.path, func(map[string]any) (int, any) { return 200, tc.answer })
		e, err := NewEnginePolicy(EngineConfig{BaseURL: srv.URL, Protocol: tc.protocol, APIKey: "sekret"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Generate(context.Background(), []int{1}, SamplingParams{MaxTokens: 4})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("%s %v: error %v, want %q and the URL", tc.protocol, tc.answer, err, tc.want)
		}
		if s := e.Stats(); s.Failures != 1 {
			t.Errorf("stats %+v", s)
		}
	}
}

func TestEngineRetries(t *testing.T) {
	ok := map[string]any{"choices": []any{map[string]any{"token_ids": wantIDs, "finish_reason": "length",
		"logprobs": map[string]any{"token_logprobs": wantLPs}}}}
	// Two 503s, then an answer.
	var n atomic.Int32
	srv, calls := engineServer(t, "/v1/completions", func(map[string]any) (int, any) {
		if n.Add(1) <= 2 {
			return 503, map[string]any{"error": "loading"}
		}
		return 200, ok
	})
	e, _ := NewEnginePolicy(EngineConfig{BaseURL: srv.URL, APIKey: "sekret", MaxRetries: 3})
	g, err := e.Generate(context.Background(), []int{1}, SamplingParams{MaxTokens: 4})
	if err != nil || g.FinishReason != "length" || calls.Load() != 3 || e.Stats().Retries != 2 {
		t.Errorf("503 x2: %+v %v calls=%d stats=%+v", g, err, calls.Load(), e.Stats())
	}
	// A 400 is not retried.
	srv, calls = engineServer(t, "/v1/completions", func(map[string]any) (int, any) { return 400, map[string]any{"error": "bad prompt"} })
	e, _ = NewEnginePolicy(EngineConfig{BaseURL: srv.URL, APIKey: "sekret", MaxRetries: 3})
	if _, err := e.Generate(context.Background(), []int{1}, SamplingParams{MaxTokens: 4}); err == nil || !strings.Contains(err.Error(), "HTTP 400") || calls.Load() != 1 {
		t.Errorf("400: %v calls=%d", err, calls.Load())
	}
	// An engine that never answers: each attempt times out, then the call fails (no stall).
	block := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(block)
	e, _ = NewEnginePolicy(EngineConfig{BaseURL: hang.URL, MaxRetries: 1, Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err = e.Generate(context.Background(), []int{1}, SamplingParams{MaxTokens: 4})
	if err == nil || !strings.Contains(err.Error(), "no answer within 100ms (2 attempts)") || time.Since(start) > 5*time.Second {
		t.Errorf("hang: %v after %v", err, time.Since(start))
	}
	// A wrong key is a clear 401, not retried.
	srv, _ = engineServer(t, "/v1/completions", func(map[string]any) (int, any) { return 200, ok })
	e, _ = NewEnginePolicy(EngineConfig{BaseURL: srv.URL, APIKey: "wrong"})
	if _, err := e.Generate(context.Background(), []int{1}, SamplingParams{MaxTokens: 4}); err == nil || !strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("401: %v", err)
	}
}

// vocabBytes reads the default model's vocabulary as the bytes of each token id.
func vocabBytes(t *testing.T, pm *pieceMapper) [][]byte {
	t.Helper()
	p := os.Getenv("RLHOST_MODEL")
	if p == "" {
		p = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	js, _, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(js, &tj); err != nil {
		t.Fatal(err)
	}
	back := map[rune]byte{}
	for b, r := range pm.rune_ {
		back[r] = byte(b)
	}
	out := make([][]byte, len(tj.Model.Vocab))
	for s, id := range tj.Model.Vocab {
		var b []byte
		for _, r := range s {
			b = append(b, back[r])
		}
		out[id] = b
	}
	return out
}

// lcpAnswer is what llama-cpp-python's completion returns for ids (pieces decoded with errors
// ignored, special tokens as empty pieces, character offsets of the decoded prefixes).
func lcpAnswer(vocab [][]byte, special map[int]bool, ids []int) (text string, pieces []string, offsets []int) {
	var all []byte
	for _, id := range ids {
		b := vocab[id]
		if special[id] {
			b = nil
		}
		offsets = append(offsets, utf8.RuneCountInString(decodeIgnore(all)))
		pieces = append(pieces, decodeIgnore(b))
		all = append(all, b...)
	}
	return decodeIgnore(all), pieces, offsets
}

func TestPieceSplit(t *testing.T) {
	tk := smolTokenizer(t)
	pm, err := newPieceMapper(tk)
	if err != nil {
		t.Fatal(err)
	}
	vocab := vocabBytes(t, pm)
	t.Logf("%d pieces shown by partial tokens", len(pm.partial))
	for _, s := range []string{"Hello, world!", "The answer is 42.\n\n#### 42", "naïve café — ok",
		"Natalia sold 48/2 = <<48/2=24>>24 clips in May.", "<tool_call>{\"name\": \"calc\"}</tool_call>"} {
		ids := tk.Encode(s, false)
		var all []byte
		for _, id := range ids {
			all = append(all, vocab[id]...)
		}
		if !utf8.Valid(all) {
			continue // the split assumes a UTF-8 completion (docs/engines.md)
		}
		text, pieces, offsets := lcpAnswer(vocab, pm.special, ids)
		got, err := pm.split(text, pieces, offsets, false)
		if err != nil || !equalInts(got, ids) {
			t.Errorf("%q: split = %v, %v; want %v", s, got, err, ids)
		}
	}
	var ids []int
	var text string
	var pieces []string
	var offsets []int
	// Text whose tokens split characters: exact or refused, never other ids.
	for _, s := range []string{"日本語のテキスト", "世界 🎉🎉", "  spaces\t\ttabs\n"} {
		ids := tk.Encode(s, false)
		var all []byte
		for _, id := range ids {
			all = append(all, vocab[id]...)
		}
		if !utf8.Valid(all) {
			continue // the split assumes a UTF-8 completion (docs/engines.md)
		}
		text, pieces, offsets := lcpAnswer(vocab, pm.special, ids)
		got, err := pm.split(text, pieces, offsets, false)
		t.Logf("%q: %v", s, err)
		if err == nil && !equalInts(got, ids) {
			t.Errorf("%q: split = %v; want %v", s, got, ids)
		}
	}
	// At a length cut, a last piece that an incomplete character shows too is refused.
	ids = append(tk.Encode("is", false), 216) // " "
	text, pieces, offsets = lcpAnswer(vocab, pm.special, ids)
	if got, err := pm.split(text, pieces, offsets, false); err != nil || !equalInts(got, ids) {
		t.Errorf("stop after a space: %v %v", got, err)
	}
	if _, err := pm.split(text, pieces, offsets, true); err == nil || !strings.Contains(err.Error(), "the last token id is ambiguous") {
		t.Errorf("cut after a space: %v", err)
	}
	// A special token is an empty piece: its id cannot be known, so the answer is refused.
	ids = append(tk.Encode("Hi", false), tk.EOS())
	text, pieces, offsets = lcpAnswer(vocab, pm.special, append(ids, tk.Encode(" there", false)...))
	if _, err := pm.split(text, pieces, offsets, false); err == nil || !strings.Contains(err.Error(), "cannot be mapped") {
		t.Errorf("special token inside: %v", err)
	}
	// Random UTF-8 id sequences: the split is the ids, or an error; never other ids.
	r := rand.New(rand.NewPCG(1, 2))
	exact, refused := 0, 0
	for range 2000 {
		ids := make([]int, 1+r.IntN(6))
		for i := range ids {
			for {
				ids[i] = r.IntN(len(vocab))
				if !pm.special[ids[i]] {
					break
				}
			}
		}
		var all []byte
		for _, id := range ids {
			all = append(all, vocab[id]...)
		}
		if !utf8.Valid(all) {
			continue // the split assumes a UTF-8 completion (docs/engines.md)
		}
		text, pieces, offsets := lcpAnswer(vocab, pm.special, ids)
		got, err := pm.split(text, pieces, offsets, false)
		if err != nil {
			refused++
			continue
		}
		if !equalInts(got, ids) {
			t.Fatalf("ids %v: split gave %v", ids, got)
		}
		exact++
	}
	t.Logf("random sequences: %d exact, %d refused", exact, refused)
	if exact < 1000 {
		t.Errorf("only %d of 2000 random sequences recovered (%d refused)", exact, refused)
	}
}

func FuzzPieceSplit(f *testing.F) {
	f.Add("Hello, world!", "Hello\x00,\x00 world\x00!", "0,5,6,12", false)
	f.Add("世界", "\x00界", "0,0", false)
	f.Add("", "", "", false)
	f.Add("abc", "abc\x00", "0,3", false)
	p := os.Getenv("RLHOST_MODEL")
	if p == "" {
		p = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	}
	tk, err := tokenizer.Load(p)
	if err != nil {
		f.Skipf("the default model: %v (make model)", err)
	}
	defer tk.Close()
	pm, err := newPieceMapper(tk)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text, pieces, offsets string, cut bool) {
		if len(text) > 200 || len(pieces) > 400 {
			return
		}
		ps := strings.Split(pieces, "\x00")
		if pieces == "" {
			ps = nil
		}
		var os []int
		for _, o := range strings.Split(offsets, ",") {
			var k int
			fmt.Sscanf(o, "%d", &k)
			os = append(os, k)
		}
		if len(os) != len(ps) {
			return
		}
		ids, err := pm.split(text, ps, os, cut)
		if err != nil {
			return
		}
		if len(ids) != len(ps) || tk.Decode(ids, false) != text {
			t.Fatalf("split(%q, %q) = %v decodes to %q", text, ps, ids, tk.Decode(ids, false))
		}
	})
}
