package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rlhost/rlhost/gpu/tokenizer"
)

// Engine protocols: how an external server is asked for token ids and log-probs
// (docs/engines.md).
const (
	ProtocolVLLM           = "vllm"             // POST /v1/completions, prompt as ids, return_token_ids / return_tokens_as_token_ids
	ProtocolSGLang         = "sglang"           // POST /generate, input_ids, return_logprob
	ProtocolLlamaCpp       = "llamacpp"         // llama.cpp server: POST /completion, prompt as ids, return_tokens, n_probs
	ProtocolLlamaCppPython = "llama-cpp-python" // POST /v1/completions with text; ids recovered from the pieces and verified
)

// EngineConfig configures an EnginePolicy.
type EngineConfig struct {
	BaseURL    string // http://HOST:PORT (a trailing /v1 is removed)
	Protocol   string // one of the Protocol constants; "" = vllm
	Model      string // the model name sent in requests; "" = none
	APIKey     string // sent as "Authorization: Bearer KEY" when set; never logged
	Timeout    time.Duration
	MaxRetries int // retries after a connection error, a timeout, 429 or 5xx
	// Tokenizer is the policy's tokenizer; the llama-cpp-python protocol needs it (the prompt
	// goes as text and the completion comes back as text pieces).
	Tokenizer *tokenizer.Tokenizer
	Client    *http.Client // nil: a client of its own
}

// EngineStats counts what an EnginePolicy saw.
type EngineStats struct {
	Requests        int // generate calls answered
	Retries         int // requests sent again after a retryable failure
	Failures        int // generate calls that returned an error
	MissingLogprobs int // answers without the log-probs of the sampled tokens
	EndTokenMissing int // answers that stopped at an end-of-generation token without returning it
}

// EnginePolicy is a Policy served by an external OpenAI-compatible engine (vLLM, SGLang,
// llama.cpp's server, llama-cpp-python's server): prompts go as token ids (text only for
// llama-cpp-python, verified), and the sampled token ids and their log-probs come back.
// The engine batches concurrent requests itself.
type EnginePolicy struct {
	cfg    EngineConfig
	base   string
	client *http.Client
	pieces *pieceMapper // llama-cpp-python only

	mu       sync.Mutex
	stats    EngineStats
	verified map[string]bool // llama-cpp-python: prompts whose tokenisation by the engine was checked
}

// NewEnginePolicy checks the configuration; it does not contact the engine.
func NewEnginePolicy(cfg EngineConfig) (*EnginePolicy, error) {
	if cfg.Protocol == "" {
		cfg.Protocol = ProtocolVLLM
	}
	switch cfg.Protocol {
	case ProtocolVLLM, ProtocolSGLang, ProtocolLlamaCpp, ProtocolLlamaCppPython:
	default:
		return nil, fmt.Errorf("rollout: engine protocol %q is not one of vllm, sglang, llamacpp, llama-cpp-python", cfg.Protocol)
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	base = strings.TrimSuffix(base, "/v1")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("rollout: engine base URL %q is not an http:// or https:// URL", cfg.BaseURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	e := &EnginePolicy{cfg: cfg, base: base, client: cfg.Client, verified: map[string]bool{}}
	if e.client == nil {
		e.client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64,
			DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}}
	}
	if cfg.Protocol == ProtocolLlamaCppPython {
		if cfg.Tokenizer == nil {
			return nil, errors.New("rollout: engine protocol llama-cpp-python needs the policy's tokenizer")
		}
		pm, err := newPieceMapper(cfg.Tokenizer)
		if err != nil {
			return nil, err
		}
		e.pieces = pm
	}
	return e, nil
}

// BaseURL is the engine's base URL (without /v1).
func (e *EnginePolicy) BaseURL() string { return e.base }

// Stats returns the counts so far.
func (e *EnginePolicy) Stats() EngineStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

func (e *EnginePolicy) count(f func(*EngineStats)) {
	e.mu.Lock()
	f(&e.stats)
	e.mu.Unlock()
}

// Generate implements Policy.
func (e *EnginePolicy) Generate(ctx context.Context, prompt []int, sp SamplingParams) (Generation, error) {
	if sp.MaxTokens <= 0 {
		return Generation{FinishReason: "length"}, nil
	}
	var g Generation
	var err error
	switch e.cfg.Protocol {
	case ProtocolVLLM:
		g, err = e.vllm(ctx, prompt, sp)
	case ProtocolSGLang:
		g, err = e.sglang(ctx, prompt, sp)
	case ProtocolLlamaCpp:
		g, err = e.llamacpp(ctx, prompt, sp)
	case ProtocolLlamaCppPython:
		g, err = e.llamaCppPython(ctx, prompt, sp)
	}
	if err == nil && len(g.Logprobs) != len(g.Tokens) {
		err = fmt.Errorf("%d log-probs for %d tokens", len(g.Logprobs), len(g.Tokens))
	}
	if err == nil && len(g.Tokens) > sp.MaxTokens {
		err = fmt.Errorf("%d tokens returned, max_tokens was %d", len(g.Tokens), sp.MaxTokens)
	}
	if err != nil {
		e.count(func(s *EngineStats) { s.Failures++ })
		var me *missingError
		if errors.As(err, &me) {
			e.count(func(s *EngineStats) { s.MissingLogprobs++ })
		}
		if strings.HasPrefix(err.Error(), "rollout: engine ") {
			return Generation{}, err
		}
		return Generation{}, fmt.Errorf("rollout: engine %s (%s): %w", e.base, e.cfg.Protocol, err)
	}
	e.count(func(s *EngineStats) { s.Requests++ })
	return g, nil
}

// missingError is an answer without a field exact RL needs.
type missingError struct{ url, field string }

func (m *missingError) Error() string {
	return fmt.Sprintf("rollout: engine %s: the answer has no %s (exact RL needs the sampled token ids and their log-probs; see docs/engines.md)", m.url, m.field)
}

// seed31 maps the call's 64-bit seed to the range every engine takes (llama.cpp seeds are 32-bit).
func seed31(s uint64) int64 { return int64(s % (1 << 31)) }

// topP and topK in the engines' conventions (off = 1.0; off = -1 or 0).
func topP(p float64) float64 {
	if p <= 0 || p > 1 {
		return 1
	}
	return p
}

// post sends body as JSON to path and decodes the answer into out, retrying connection
// errors, timeouts, 429 and 5xx up to MaxRetries times with a growing pause.
func (e *EnginePolicy) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	url := e.base + path
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			e.count(func(s *EngineStats) { s.Retries++ })
			pause := min(200*time.Millisecond<<(attempt-1), 5*time.Second)
			pause += time.Duration(rand.Int64N(int64(pause/4) + 1))
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return fmt.Errorf("POST %s: %w (after %v)", url, ctx.Err(), last)
			}
		}
		retry, err := e.try(ctx, url, b, out)
		if err == nil {
			return nil
		}
		last = err
		if !retry || attempt >= e.cfg.MaxRetries || ctx.Err() != nil {
			if attempt > 0 {
				return fmt.Errorf("%w (%d attempts)", err, attempt+1)
			}
			return err
		}
	}
}

func (e *EnginePolicy) try(ctx context.Context, url string, body []byte, out any) (retry bool, err error) {
	status, data, err := e.send(ctx, http.MethodPost, url, url, body, 256<<20)
	if err != nil {
		return status == 0 || status == http.StatusTooManyRequests || status >= 500, err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return false, fmt.Errorf("POST %s: the answer is not the expected JSON: %v: %s", url, err, clipText(string(data), 200))
	}
	return false, nil
}

// send makes one request of the engine (a JSON body when body is not nil, the API key)
// within the configured timeout and reads at most limit bytes of the answer; what names the
// call in errors. An answer other than 200 is an error with its status and text; a request
// that got no answer is an error with status 0.
func (e *EnginePolicy) send(ctx context.Context, method, url, what string, body []byte, limit int64) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.cfg.APIKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return 0, nil, fmt.Errorf("%s %s: no answer within %v", method, what, e.cfg.Timeout)
		}
		return 0, nil, fmt.Errorf("%s %s: %v", method, what, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %v", method, what, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, data, fmt.Errorf("%s %s: HTTP %d: %s", method, what, resp.StatusCode, clipText(strings.TrimSpace(string(data)), 300))
	}
	return resp.StatusCode, data, nil
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// vLLM: /v1/completions with the prompt as token ids. return_token_ids (vLLM >= 0.10.2) gives
// choices[].token_ids; return_tokens_as_token_ids gives logprobs.tokens as "token_id:N" (older
// versions). Either is exact.
func (e *EnginePolicy) vllm(ctx context.Context, prompt []int, sp SamplingParams) (Generation, error) {
	body := map[string]any{"prompt": prompt, "max_tokens": sp.MaxTokens, "temperature": sp.Temperature,
		"top_p": topP(sp.TopP), "top_k": -1, "min_p": 0, "repetition_penalty": 1, "seed": seed31(sp.Seed),
		"logprobs": 1, "return_tokens_as_token_ids": true, "return_token_ids": true,
		"skip_special_tokens": false, "include_stop_str_in_output": true}
	if sp.TopK > 0 {
		body["top_k"] = sp.TopK
	}
	if e.cfg.Model != "" {
		body["model"] = e.cfg.Model
	}
	var resp struct {
		Choices []struct {
			TokenIDs []int `json:"token_ids"`
			Logprobs *struct {
				Tokens        []string   `json:"tokens"`
				TokenLogprobs []*float64 `json:"token_logprobs"`
			} `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	url := e.base + "/v1/completions"
	if err := e.post(ctx, "/v1/completions", body, &resp); err != nil {
		return Generation{}, err
	}
	if len(resp.Choices) != 1 {
		return Generation{}, fmt.Errorf("POST %s: %d choices, want 1", url, len(resp.Choices))
	}
	c := resp.Choices[0]
	if c.Logprobs == nil || c.Logprobs.TokenLogprobs == nil {
		return Generation{}, &missingError{url, "choices[0].logprobs.token_logprobs"}
	}
	ids := c.TokenIDs
	if ids == nil {
		ids = make([]int, len(c.Logprobs.Tokens))
		for i, s := range c.Logprobs.Tokens {
			n, ok := strings.CutPrefix(s, "token_id:")
			if !ok {
				return Generation{}, &missingError{url, fmt.Sprintf("choices[0].token_ids, and logprobs.tokens[%d] = %q is not token_id:N (return_tokens_as_token_ids)", i, clipText(s, 40))}
			}
			if _, err := fmt.Sscanf(n, "%d", &ids[i]); err != nil {
				return Generation{}, fmt.Errorf("POST %s: logprobs.tokens[%d] = %q: %v", url, i, s, err)
			}
		}
	}
	lps, err := floats(url, "choices[0].logprobs.token_logprobs", c.Logprobs.TokenLogprobs)
	if err != nil {
		return Generation{}, err
	}
	return Generation{Tokens: ids, Logprobs: lps, FinishReason: finish(c.FinishReason)}, nil
}

func floats(url, field string, xs []*float64) ([]float32, error) {
	out := make([]float32, len(xs))
	for i, x := range xs {
		if x == nil {
			return nil, &missingError{url, fmt.Sprintf("%s[%d] (null)", field, i)}
		}
		out[i] = float32(*x)
	}
	return out, nil
}

// finish maps the engines' finish reasons to "stop" or "length".
func finish(r string) string {
	switch r {
	case "length", "limit", "max_tokens":
		return "length"
	}
	return "stop"
}

// SGLang: the native /generate with input_ids; meta_info.output_token_logprobs holds
// [logprob, token_id, text] per output token.
func (e *EnginePolicy) sglang(ctx context.Context, prompt []int, sp SamplingParams) (Generation, error) {
	// No seed: SGLang versions before sampling_seed reject unknown sampling parameters, so the
	// engine draws its own random stream (docs/engines.md).
	params := map[string]any{"max_new_tokens": sp.MaxTokens, "temperature": sp.Temperature, "top_p": topP(sp.TopP),
		"top_k": -1, "min_p": 0, "repetition_penalty": 1, "skip_special_tokens": false, "no_stop_trim": true}
	if sp.TopK > 0 {
		params["top_k"] = sp.TopK
	}
	body := map[string]any{"input_ids": prompt, "sampling_params": params, "return_logprob": true}
	var resp struct {
		OutputIDs []int `json:"output_ids"`
		MetaInfo  struct {
			OutputTokenLogprobs [][]any `json:"output_token_logprobs"`
			FinishReason        *struct {
				Type string `json:"type"`
			} `json:"finish_reason"`
		} `json:"meta_info"`
	}
	url := e.base + "/generate"
	if err := e.post(ctx, "/generate", body, &resp); err != nil {
		return Generation{}, err
	}
	otl := resp.MetaInfo.OutputTokenLogprobs
	if otl == nil {
		return Generation{}, &missingError{url, "meta_info.output_token_logprobs"}
	}
	g := Generation{Tokens: make([]int, len(otl)), Logprobs: make([]float32, len(otl)), FinishReason: "stop"}
	for i, x := range otl {
		if len(x) < 2 {
			return Generation{}, fmt.Errorf("POST %s: meta_info.output_token_logprobs[%d] has %d fields, want [logprob, token_id, text]", url, i, len(x))
		}
		lp, ok1 := x[0].(float64)
		id, ok2 := x[1].(float64)
		if !ok1 {
			return Generation{}, &missingError{url, fmt.Sprintf("meta_info.output_token_logprobs[%d][0] (the log-prob)", i)}
		}
		if !ok2 || id != float64(int(id)) || id < 0 {
			return Generation{}, fmt.Errorf("POST %s: meta_info.output_token_logprobs[%d][1] = %v is not a token id", url, i, x[1])
		}
		g.Tokens[i], g.Logprobs[i] = int(id), float32(lp)
	}
	if resp.OutputIDs != nil && !equalInts(resp.OutputIDs, g.Tokens) {
		return Generation{}, fmt.Errorf("POST %s: output_ids (%d) differ from the ids in meta_info.output_token_logprobs (%d)", url, len(resp.OutputIDs), len(g.Tokens))
	}
	if f := resp.MetaInfo.FinishReason; f != nil {
		g.FinishReason = finish(f.Type)
	}
	return g, nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// llama.cpp's server: /completion with the prompt as ids; return_tokens gives the ids,
// n_probs the completion_probabilities (id and logprob per token).
func (e *EnginePolicy) llamacpp(ctx context.Context, prompt []int, sp SamplingParams) (Generation, error) {
	body := map[string]any{"prompt": prompt, "n_predict": sp.MaxTokens, "temperature": sp.Temperature,
		"top_p": topP(sp.TopP), "top_k": max(sp.TopK, 0), "min_p": 0, "repeat_penalty": 1, "seed": seed31(sp.Seed),
		"n_probs": 1, "return_tokens": true, "cache_prompt": true, "stream": false}
	if e.cfg.Model != "" {
		body["model"] = e.cfg.Model
	}
	var resp struct {
		Tokens   []int  `json:"tokens"`
		StopType string `json:"stop_type"`
		Probs    []struct {
			ID      *int     `json:"id"`
			Logprob *float64 `json:"logprob"`
		} `json:"completion_probabilities"`
		StoppedLimit bool `json:"stopped_limit"`
	}
	url := e.base + "/completion"
	if err := e.post(ctx, "/completion", body, &resp); err != nil {
		return Generation{}, err
	}
	if resp.Tokens == nil {
		return Generation{}, &missingError{url, "tokens (return_tokens)"}
	}
	if resp.Probs == nil {
		return Generation{}, &missingError{url, "completion_probabilities (n_probs)"}
	}
	// The server keeps no probability for a token that leaves an incomplete UTF-8 character
	// (tools/server: add_token only once the text is valid), so entries are matched by id.
	g := Generation{Tokens: resp.Tokens, Logprobs: make([]float32, len(resp.Tokens)), FinishReason: "stop"}
	k := 0
	for i, id := range resp.Tokens {
		if k >= len(resp.Probs) || resp.Probs[k].ID == nil || *resp.Probs[k].ID != id {
			return Generation{}, &missingError{url, fmt.Sprintf("completion_probabilities entry for tokens[%d] = %d (the server keeps none for a token that ends inside a UTF-8 character)", i, id)}
		}
		if resp.Probs[k].Logprob == nil {
			return Generation{}, &missingError{url, fmt.Sprintf("completion_probabilities[%d].logprob", k)}
		}
		g.Logprobs[i] = float32(*resp.Probs[k].Logprob)
		k++
	}
	if k != len(resp.Probs) {
		return Generation{}, fmt.Errorf("POST %s: %d completion_probabilities for %d tokens", url, len(resp.Probs), len(resp.Tokens))
	}
	if resp.StopType == "limit" || resp.StoppedLimit {
		g.FinishReason = "length"
	}
	return g, nil
}
