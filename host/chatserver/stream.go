package chatserver

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// chunk is one server-sent event of a streamed completion (OpenAI's chat.completion.chunk).
type chunk struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []chunkChoice  `json:"choices"`
	Usage   map[string]int `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
	TokenIDs     []int   `json:"token_ids,omitempty"`
}

type delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []deltaToolCall `json:"tool_calls,omitempty"`
}

type deltaToolCall struct {
	Index int `json:"index"`
	outToolCall
}

// writeStream sends a finished completion as server-sent events in OpenAI's shape: per choice
// a role chunk, a content chunk (with the tokens' log-probs when asked for), a tool-call chunk,
// a chunk with the finish reason; then the usage chunk when stream_options.include_usage is
// set, and "data: [DONE]". The policy generates a whole completion at once, so the chunks
// follow each other when the generation is done.
func writeStream(w http.ResponseWriter, resp *chatResponse, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(c chunk) {
		c.ID, c.Object, c.Created, c.Model = resp.ID, "chat.completion.chunk", resp.Created, resp.Model
		if c.Choices == nil {
			c.Choices = []chunkChoice{}
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	for _, ch := range resp.Choices {
		empty := ""
		send(chunk{Choices: []chunkChoice{{Index: ch.Index, Delta: delta{Role: "assistant", Content: &empty}}}})
		if ch.Message.Content != nil || ch.Logprobs != nil {
			send(chunk{Choices: []chunkChoice{{Index: ch.Index, Delta: delta{Content: ch.Message.Content}, Logprobs: ch.Logprobs, TokenIDs: ch.TokenIDs}}})
		}
		if len(ch.Message.ToolCalls) > 0 {
			d := delta{}
			for k, tc := range ch.Message.ToolCalls {
				d.ToolCalls = append(d.ToolCalls, deltaToolCall{Index: k, outToolCall: tc})
			}
			send(chunk{Choices: []chunkChoice{{Index: ch.Index, Delta: d}}})
		}
		fr := ch.FinishReason
		send(chunk{Choices: []chunkChoice{{Index: ch.Index, FinishReason: &fr}}})
	}
	if includeUsage {
		send(chunk{Usage: resp.Usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}
