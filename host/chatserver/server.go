package chatserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// Options configure a Server.
type Options struct {
	Model      string // the model name reported in responses; default "policy"
	MaxContext int    // prompt + completion tokens at most (the policy's maxT); 0: no limit
	MaxBody    int64  // request body bytes at most; default 32 MiB
	// TemplateKwargs are extra chat-template variables (data.apply_chat_template_kwargs).
	TemplateKwargs map[string]any
	// ToolFormat is the tool-call format replies are parsed in (multi_turn.format); "" or
	// auto: detected from the tokenizer, as the rollout does.
	ToolFormat tokenizer.ToolFormat
}

// Server is the OpenAI-compatible endpoint. It implements rollout.ChatEndpoint.
type Server struct {
	policy rollout.Policy
	tk     *tokenizer.Tokenizer
	chat   rollout.Chat
	opts   Options

	mu       sync.Mutex
	sessions map[string]*session

	ln   net.Listener
	http *http.Server
	url  string
}

// New returns a server over the policy and tokenizer; Start makes it listen.
func New(p rollout.Policy, tk *tokenizer.Tokenizer, opts Options) *Server {
	if opts.Model == "" {
		opts.Model = "policy"
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 32 << 20
	}
	chat := rollout.Chat{Tok: tk, Kwargs: opts.TemplateKwargs, Format: opts.ToolFormat}
	chat.Format = chat.ToolFormat()
	return &Server{policy: p, tk: tk, chat: chat, opts: opts, sessions: map[string]*session{}}
}

// Start listens on 127.0.0.1 (a free port) and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("chatserver: listen: %w", err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.http.Serve(ln)
	return nil
}

// URL returns http://127.0.0.1:PORT (empty before Start).
func (s *Server) URL() string { return s.url }

// Close stops the server; requests in flight are cancelled.
func (s *Server) Close() error {
	if s.http == nil {
		return nil
	}
	return s.http.Close()
}

// Open implements rollout.ChatEndpoint: a session for one trajectory, with its own key.
func (s *Server) Open(trajectoryID string, sp rollout.SamplingParams) (rollout.ChatSession, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("chatserver: key: %w", err)
	}
	ss := &session{srv: s, id: trajectoryID, key: "rlh-" + hex.EncodeToString(b[:]), sp: sp}
	s.mu.Lock()
	s.sessions[ss.key] = ss
	s.mu.Unlock()
	return ss, nil
}

func (s *Server) lookup(key string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[key]
}

// session is one trajectory's endpoint.
type session struct {
	srv *Server
	id  string
	key string
	sp  rollout.SamplingParams

	mu    sync.Mutex
	calls []record
	next  int
}

// record is a served call with what is needed to extend it.
type record struct {
	rollout.ChatCall
	tools   string // the request's tools, as JSON, for matching
	rootLen int    // prompt tokens of the first call of its conversation
}

func (ss *session) BaseURL() string { return ss.srv.url + "/t/" + ss.key + "/v1" }
func (ss *session) APIKey() string  { return ss.key }

func (ss *session) Calls() []rollout.ChatCall {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]rollout.ChatCall, len(ss.calls))
	for i, r := range ss.calls {
		out[i] = r.ChatCall
	}
	slices.SortStableFunc(out, func(a, b rollout.ChatCall) int {
		if a.Index != b.Index {
			return a.Index - b.Index
		}
		return a.Choice - b.Choice
	})
	return out
}

func (ss *session) Close() {
	ss.srv.mu.Lock()
	delete(ss.srv.sessions, ss.key)
	ss.srv.mu.Unlock()
}

// ServeHTTP routes /v1/... and /t/KEY/v1/....
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, key := r.URL.Path, ""
	if rest, ok := strings.CutPrefix(path, "/t/"); ok {
		k, p, _ := strings.Cut(rest, "/")
		key, path = k, "/"+p
	} else if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = strings.TrimSpace(a)
	}
	switch path {
	case "/v1/chat/completions", "/v1/models":
	default:
		writeError(w, http.StatusNotFound, "not_found", "chatserver: no route %s %s", r.Method, r.URL.Path)
		return
	}
	ss := s.lookup(key)
	if ss == nil {
		writeError(w, http.StatusUnauthorized, "invalid_api_key", "chatserver: unknown or closed trajectory key")
		return
	}
	if path == "/v1/models" {
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": s.opts.Model, "object": "model", "owned_by": "rlhost"}}})
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "chatserver: %s needs POST", path)
		return
	}
	var req chatRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "chatserver: request body is not valid JSON: %v", err)
		return
	}
	resp, status, err := ss.complete(r.Context(), &req)
	if err != nil {
		typ := "invalid_request_error"
		if status >= 500 {
			typ = "server_error"
		}
		writeError(w, status, typ, "%v", err)
		return
	}
	if req.Stream {
		writeStream(w, resp, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// Wire types (OpenAI's).
type chatRequest struct {
	Model               string            `json:"model"`
	Messages            []wireMessage     `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	Temperature         *float64          `json:"temperature"`
	TopP                *float64          `json:"top_p"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	N                   *int              `json:"n"`
	Logprobs            bool              `json:"logprobs"`
	TopLogprobs         int               `json:"top_logprobs"`
	Stop                json.RawMessage   `json:"stop"`
	Stream              bool              `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type outMessage struct {
	Role      string        `json:"role"`
	Content   *string       `json:"content"`
	ToolCalls []outToolCall `json:"tool_calls,omitempty"`
}

type outToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type tokenLogprob struct {
	Token       string  `json:"token"`
	Logprob     float32 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []any   `json:"top_logprobs"`
}

type choice struct {
	Index        int        `json:"index"`
	Message      outMessage `json:"message"`
	Logprobs     any        `json:"logprobs"`
	FinishReason string     `json:"finish_reason"`
	TokenIDs     []int      `json:"token_ids"`
}

type chatResponse struct {
	ID             string         `json:"id"`
	Object         string         `json:"object"`
	Created        int64          `json:"created"`
	Model          string         `json:"model"`
	Choices        []choice       `json:"choices"`
	Usage          map[string]int `json:"usage"`
	PromptTokenIDs []int          `json:"prompt_token_ids"`
}

// messages converts the request's messages; errors name the message.
func (req *chatRequest) messages() ([]task.Message, error) {
	if len(req.Messages) == 0 {
		return nil, errors.New("chatserver: messages is empty")
	}
	out := make([]task.Message, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant", "tool", "developer":
		default:
			return nil, fmt.Errorf("chatserver: messages[%d]: unknown role %q", i, m.Role)
		}
		text, err := contentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("chatserver: messages[%d].content: %v", i, err)
		}
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		out[i] = task.Message{Role: role, Content: text, ToolCallID: m.ToolCallID, Name: m.Name}
		for j, c := range m.ToolCalls {
			if c.Function.Name == "" {
				return nil, fmt.Errorf("chatserver: messages[%d].tool_calls[%d]: no function name", i, j)
			}
			args, err := argumentsJSON(c.Function.Arguments)
			if err != nil {
				return nil, fmt.Errorf("chatserver: messages[%d].tool_calls[%d].function.arguments: %v", i, j, err)
			}
			out[i].ToolCalls = append(out[i].ToolCalls, task.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
		}
	}
	return out, nil
}

// contentText reads a content that is a string, null, or a list of {"type": "text", "text": ...}.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("not a string or a list of text parts")
	}
	var b strings.Builder
	for k, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("part %d: type %q is not supported (only text)", k, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// argumentsJSON accepts OpenAI's JSON-in-a-string arguments, or an object.
func argumentsJSON(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if s == "" {
			return json.RawMessage("{}"), nil
		}
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("not JSON: %q", clip(s, 80))
		}
		return json.RawMessage(s), nil
	}
	if !json.Valid(raw) {
		return nil, errors.New("not JSON")
	}
	return raw, nil
}

func (req *chatRequest) stops() ([]string, error) {
	raw := bytes.TrimSpace(req.Stop)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("chatserver: stop must be a string or a list of strings")
	}
	return many, nil
}

// prompt renders msgs for the session: an extension of an earlier call when the messages
// continue its conversation, else the whole chat template.
func (ss *session) prompt(msgs []task.Message, tools []json.RawMessage, toolsKey string) ([]int, int, error) {
	tk := ss.srv.tk
	ss.mu.Lock()
	var base *record
	for i := range ss.calls {
		c := &ss.calls[i]
		n := len(c.Messages)
		if c.tools != toolsKey || n+1 >= len(msgs) || base != nil && n <= len(base.Messages) {
			continue
		}
		if !slices.EqualFunc(c.Messages, msgs[:n], sameMessage) || !sameMessage(c.Reply, msgs[n]) {
			continue
		}
		base = c
	}
	var ids []int
	var rest []task.Message
	if base != nil {
		ids = append(slices.Clone(base.PromptIDs), base.CompletionIDs...)
		rest = msgs[len(base.Messages)+1:]
	}
	ss.mu.Unlock()
	if base != nil {
		text, err := tk.RenderObservationKwargs(toTok(rest), ss.srv.chat.Kwargs)
		if err != nil {
			return nil, 0, fmt.Errorf("chatserver: chat template: %v", err)
		}
		return append(ids, tk.Encode(text, false)...), base.rootLen, nil
	}
	text, err := tk.ApplyChatTemplateKwargs(toTok(msgs), tools, true, ss.srv.chat.Kwargs)
	if err != nil {
		return nil, 0, fmt.Errorf("chatserver: chat template: %v", err)
	}
	ids = tk.Encode(text, false)
	return ids, len(ids), nil
}

// sameMessage compares a message the client sent back with one the server returned.
func sameMessage(a, b task.Message) bool {
	if a.Role != b.Role || strings.TrimSpace(a.Content) != strings.TrimSpace(b.Content) ||
		a.ToolCallID != b.ToolCallID || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	for i := range a.ToolCalls {
		if a.ToolCalls[i].Name != b.ToolCalls[i].Name || !sameJSON(a.ToolCalls[i].Arguments, b.ToolCalls[i].Arguments) {
			return false
		}
	}
	return true
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ca, _ := json.Marshal(x)
	cb, _ := json.Marshal(y)
	return bytes.Equal(ca, cb)
}

func toTok(ms []task.Message) []tokenizer.Message {
	out := make([]tokenizer.Message, len(ms))
	for i, m := range ms {
		out[i] = tokenizer.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, tokenizer.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
	}
	return out
}

var toolCallRE = regexp.MustCompile(`(?s)<tool_call>.*?</tool_call>`)

// callID is the id of call k of choice i of request index: call_INDEX_I_K, or 9 letters and
// digits for the mistral format (Mistral's templates refuse other ids).
func callID(f tokenizer.ToolFormat, index, i, k int) string {
	if f == tokenizer.ToolFormatMistral {
		return fmt.Sprintf("c%03d%02d%03d", index%1000, i%100, k%1000)
	}
	return fmt.Sprintf("call_%d_%d_%d", index, i, k)
}

// stripSpecial removes the text of special tokens (<|python_tag|>, [TOOL_CALLS], end tokens).
func (s *Server) stripSpecial(text string) string {
	for _, t := range s.tk.SpecialTokens() {
		if t.Special && t.Content != "" {
			text = strings.ReplaceAll(text, t.Content, "")
		}
	}
	return text
}

// complete serves one request of the session.
func (ss *session) complete(ctx context.Context, req *chatRequest) (*chatResponse, int, error) {
	msgs, err := req.messages()
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	for i, t := range req.Tools {
		var v struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &v) != nil || v.Type != "function" || v.Function.Name == "" {
			return nil, http.StatusBadRequest, fmt.Errorf("chatserver: tools[%d]: not {\"type\": \"function\", \"function\": {\"name\": ...}}", i)
		}
	}
	stops, err := req.stops()
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	n := 1
	if req.N != nil {
		n = *req.N
	}
	if n < 1 || n > 16 {
		return nil, http.StatusBadRequest, fmt.Errorf("chatserver: n must be in [1, 16], got %d", n)
	}
	if err := ss.srv.checkTopLogprobs(req); err != nil {
		return nil, http.StatusBadRequest, err
	}
	sp := ss.sp
	if req.Temperature != nil {
		if *req.Temperature < 0 || *req.Temperature > 2 {
			return nil, http.StatusBadRequest, fmt.Errorf("chatserver: temperature must be in [0, 2], got %v", *req.Temperature)
		}
		sp.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		if *req.TopP <= 0 || *req.TopP > 1 {
			return nil, http.StatusBadRequest, fmt.Errorf("chatserver: top_p must be in (0, 1], got %v", *req.TopP)
		}
		sp.TopP = *req.TopP
	}
	mt := req.MaxTokens
	if mt == nil {
		mt = req.MaxCompletionTokens
	}
	if mt != nil {
		if *mt < 1 {
			return nil, http.StatusBadRequest, fmt.Errorf("chatserver: max_tokens must be at least 1, got %d", *mt)
		}
		if sp.MaxTokens <= 0 || *mt < sp.MaxTokens {
			sp.MaxTokens = *mt
		}
	}
	toolsKey := ""
	if len(req.Tools) > 0 {
		b, _ := json.Marshal(req.Tools)
		toolsKey = string(b)
	}
	prompt, rootLen, err := ss.prompt(msgs, req.Tools, toolsKey)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	if ss.sp.MaxTokens > 0 && len(prompt) > rootLen {
		// A continued conversation shares the trajectory's response budget.
		left := ss.sp.MaxTokens - (len(prompt) - rootLen)
		if left <= 0 {
			return nil, http.StatusBadRequest, fmt.Errorf("chatserver: the conversation has used the trajectory's response budget of %d tokens", ss.sp.MaxTokens)
		}
		sp.MaxTokens = min(sp.MaxTokens, left)
	}
	if mc := ss.srv.opts.MaxContext; mc > 0 {
		if len(prompt) >= mc {
			return nil, http.StatusBadRequest, fmt.Errorf("chatserver: the prompt has %d tokens; the context holds %d", len(prompt), mc)
		}
		if sp.MaxTokens <= 0 || sp.MaxTokens > mc-len(prompt) {
			sp.MaxTokens = mc - len(prompt)
		}
	}
	if sp.MaxTokens <= 0 {
		return nil, http.StatusBadRequest, errors.New("chatserver: no max_tokens and no session limit")
	}
	ss.mu.Lock()
	index := ss.next
	ss.next++
	ss.mu.Unlock()

	started := time.Now()
	gens := make([]rollout.Generation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := sp
			p.Seed = callSeed(ss.sp.Seed, index, i)
			gens[i], errs[i] = ss.srv.policy.Generate(ctx, prompt, p)
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, http.StatusInternalServerError, fmt.Errorf("chatserver: generate: %v", err)
	}
	dur := time.Since(started)
	resp := &chatResponse{ID: fmt.Sprintf("chatcmpl-%s-%d", ss.id, index), Object: "chat.completion", Created: started.Unix(),
		Model: ss.srv.opts.Model, PromptTokenIDs: prompt}
	completion := 0
	recs := make([]record, n)
	for i, g := range gens {
		tokens, lps, finish := ss.srv.cut(g, stops)
		raw := ss.srv.tk.Decode(tokens, false)
		text := ss.srv.tk.Decode(tokens, true)
		for _, st := range stops { // OpenAI leaves the stop string out of the content
			if k := strings.Index(text, st); st != "" && k >= 0 {
				text = text[:k]
			}
		}
		calls, content, _ := ss.srv.chat.ParseToolCalls(raw)
		reply := task.Message{Role: "assistant", Content: text}
		msg := outMessage{Role: "assistant"}
		if len(calls) > 0 {
			if ss.srv.chat.Format == tokenizer.ToolFormatHermes {
				reply.Content = strings.TrimSpace(toolCallRE.ReplaceAllString(text, ""))
			} else { // the parser's content, from the text with special tokens, without them
				reply.Content = strings.TrimSpace(ss.srv.stripSpecial(content))
			}
			finish = "tool_calls"
			for k, c := range calls {
				id := c.ID
				if !rollout.ValidToolCallID(ss.srv.chat.Format, id) {
					id = callID(ss.srv.chat.Format, index, i, k)
				}
				reply.ToolCalls = append(reply.ToolCalls, task.ToolCall{ID: id, Name: c.Name, Arguments: c.Arguments})
				var oc outToolCall
				oc.ID, oc.Type = id, "function"
				oc.Function.Name, oc.Function.Arguments = c.Name, string(c.Arguments)
				msg.ToolCalls = append(msg.ToolCalls, oc)
			}
		}
		if reply.Content != "" || len(calls) == 0 {
			c := reply.Content
			msg.Content = &c
		}
		ch := choice{Index: i, Message: msg, FinishReason: finish, TokenIDs: tokens}
		if req.Logprobs {
			content := make([]tokenLogprob, len(tokens))
			for k, id := range tokens {
				t := ss.srv.tk.Decode([]int{id}, false)
				bs := make([]int, len(t))
				for j := range len(t) {
					bs[j] = int(t[j])
				}
				content[k] = tokenLogprob{Token: t, Bytes: bs, TopLogprobs: []any{}}
				if k < len(lps) {
					content[k].Logprob = lps[k]
				}
			}
			if req.TopLogprobs > 0 {
				if err := ss.srv.addTopLogprobs(ctx, content, prompt, tokens, req.TopLogprobs, sp.Temperature); err != nil {
					return nil, http.StatusInternalServerError, err
				}
			}
			ch.Logprobs = map[string]any{"content": content}
		}
		resp.Choices = append(resp.Choices, ch)
		completion += len(tokens)
		recs[i] = record{tools: toolsKey, rootLen: rootLen, ChatCall: rollout.ChatCall{Index: index, Choice: i, PromptIDs: prompt,
			CompletionIDs: tokens, Logprobs: lps, FinishReason: finish, Messages: msgs, Reply: reply, Started: started, Duration: dur}}
	}
	resp.Usage = map[string]int{"prompt_tokens": len(prompt), "completion_tokens": completion, "total_tokens": len(prompt) + completion}
	ss.mu.Lock()
	ss.calls = append(ss.calls, recs...)
	ss.mu.Unlock()
	return resp, http.StatusOK, nil
}

// cut applies the stop strings: the completion ends with the token that completes the first
// stop string (the tokens after it are discarded; they were never shown to the client).
func (s *Server) cut(g rollout.Generation, stops []string) ([]int, []float32, string) {
	tokens, lps, finish := g.Tokens, g.Logprobs, g.FinishReason
	if len(stops) == 0 {
		return tokens, lps, finish
	}
	for k := 1; k <= len(tokens); k++ {
		text := s.tk.Decode(tokens[:k], true)
		for _, st := range stops {
			if st != "" && strings.Contains(text, st) {
				return tokens[:k], lps[:min(k, len(lps))], "stop"
			}
		}
	}
	return tokens, lps, finish
}

// callSeed derives the random stream of a call's choice from the session's.
func callSeed(base uint64, index, choice int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d", base, index, choice)
	return h.Sum64()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, format string, args ...any) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": fmt.Sprintf(format, args...), "type": typ,
		"param": nil, "code": typ}})
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
