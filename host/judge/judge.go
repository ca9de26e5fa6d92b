// Package judge is the host's LLM-as-judge service: task plugins call Host.Judge (sdk/task:
// Host.Judge) and the host answers with a chat completion of the run's judge model,
//
//   - the policy being trained (reward_model.judge.backend=policy),
//   - a second local model (backend=model, reward_model.judge.model_path), or
//   - an OpenAI-compatible endpoint (backend=openai, reward_model.judge.base_url).
//
// The local backends serve their model through host/chatserver (the same chat templating and
// generation as gen_chat's endpoint, one session per call), so every backend is reached the
// same way: an OpenAI chat-completions request ([OpenAI]). [Service] serves the Host gRPC
// service on a Unix socket in a private directory, with a per-run token.
package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// OpenAI judges through an OpenAI-compatible chat-completions endpoint.
type OpenAI struct {
	BaseURL   string // e.g. http://127.0.0.1:8000/v1 (POST BaseURL/chat/completions)
	APIKey    string // sent as a Bearer token when set; never logged
	Model     string // the request's model field
	MaxTokens int    // when a request gives none
	Client    *http.Client
}

type wireMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []wireMessage `json:"messages"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
	Temperature float64       `json:"temperature"`
	Stop        []string      `json:"stop,omitempty"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message      wireMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// maxResponse bounds a judge reply read from the endpoint.
const maxResponse = 8 << 20

// Judge implements task.Judger.
func (o *OpenAI) Judge(ctx context.Context, req task.JudgeRequest) (task.JudgeResult, error) {
	body := chatRequest{Model: o.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, Stop: req.Stop}
	if body.MaxTokens == 0 {
		body.MaxTokens = o.MaxTokens
	}
	if body.Model == "" {
		body.Model = "judge"
	}
	for _, m := range req.Messages {
		body.Messages = append(body.Messages, wireMessage{Role: m.Role, Content: m.Content})
	}
	b, err := json.Marshal(body)
	if err != nil {
		return task.JudgeResult{}, err
	}
	url := strings.TrimSuffix(o.BaseURL, "/") + "/chat/completions"
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return task.JudgeResult{}, fmt.Errorf("judge: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(hr)
	if err != nil {
		return task.JudgeResult{}, fmt.Errorf("judge: POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return task.JudgeResult{}, fmt.Errorf("judge: POST %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return task.JudgeResult{}, fmt.Errorf("judge: POST %s: %s: %s", url, resp.Status, clip(string(text), 300))
	}
	var cr chatResponse
	if err := json.Unmarshal(text, &cr); err != nil {
		return task.JudgeResult{}, fmt.Errorf("judge: POST %s: not a chat completion: %v", url, err)
	}
	if len(cr.Choices) == 0 {
		return task.JudgeResult{}, fmt.Errorf("judge: POST %s: the reply has no choices", url)
	}
	c := cr.Choices[0]
	return task.JudgeResult{Text: c.Message.Content, FinishReason: c.FinishReason, PromptTokens: cr.Usage.PromptTokens,
		CompletionTokens: cr.Usage.CompletionTokens, Model: cr.Model}, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Local judges with a model the host runs: each call opens a session on the model's chat
// endpoint (host/chatserver), makes one chat-completions request to it, and closes it.
type Local struct {
	Endpoint  rollout.ChatEndpoint
	Model     string // the model name reported in results
	MaxTokens int
	Seed      uint64 // the random stream of sampled (temperature > 0) judgements
	Client    *http.Client
	calls     atomic.Uint64
}

// Judge implements task.Judger.
func (l *Local) Judge(ctx context.Context, req task.JudgeRequest) (task.JudgeResult, error) {
	n := l.calls.Add(1)
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = l.MaxTokens
	}
	s, err := l.Endpoint.Open(fmt.Sprintf("judge-%d", n), rollout.SamplingParams{MaxTokens: maxTokens,
		Temperature: req.Temperature, Seed: l.Seed ^ n})
	if err != nil {
		return task.JudgeResult{}, err
	}
	defer s.Close()
	o := &OpenAI{BaseURL: s.BaseURL(), APIKey: s.APIKey(), Model: l.Model, MaxTokens: maxTokens, Client: l.Client}
	r, err := o.Judge(ctx, req)
	if r.Model == "" {
		r.Model = l.Model
	}
	return r, err
}

// Timeout wraps a judge so that each call gets at most d.
type Timeout struct {
	J task.Judger
	D time.Duration
}

// Judge implements task.Judger.
func (t Timeout) Judge(ctx context.Context, req task.JudgeRequest) (task.JudgeResult, error) {
	if t.D > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.D)
		defer cancel()
	}
	return t.J.Judge(ctx, req)
}
