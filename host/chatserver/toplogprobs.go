package chatserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlhost/rlhost/host/rollout"
)

// checkTopLogprobs validates top_logprobs: 0-20, with logprobs true, and a policy that can
// list alternatives (the built-in one; an external engine's answers carry none).
func (s *Server) checkTopLogprobs(req *chatRequest) error {
	k := req.TopLogprobs
	switch {
	case k == 0:
		return nil
	case k < 0 || k > 20:
		return fmt.Errorf("chatserver: top_logprobs must be in [0, 20], got %d", k)
	case !req.Logprobs:
		return errors.New("chatserver: top_logprobs needs logprobs: true")
	}
	if _, ok := s.policy.(rollout.TopLogprober); !ok {
		return errors.New("chatserver: top_logprobs is not available: the policy cannot list alternative tokens")
	}
	return nil
}

// topEntry is one alternative of OpenAI's top_logprobs.
type topEntry struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// addTopLogprobs fills the top_logprobs of each completion token's entry: the k most likely
// tokens at its position under the distribution its logprob refers to.
func (s *Server) addTopLogprobs(ctx context.Context, content []tokenLogprob, prompt, tokens []int, k int, temperature float64) error {
	tl := s.policy.(rollout.TopLogprober)
	tops, err := tl.TopLogprobs(ctx, prompt, tokens, k, temperature)
	if err != nil {
		return fmt.Errorf("chatserver: top_logprobs: %v", err)
	}
	for j := range content {
		if j >= len(tops) {
			break
		}
		list := make([]any, len(tops[j]))
		for q, t := range tops[j] {
			text := s.tk.Decode([]int{t.ID}, false)
			bs := make([]int, len(text))
			for i := range len(text) {
				bs[i] = int(text[i])
			}
			list[q] = topEntry{Token: text, Logprob: t.Logprob, Bytes: bs}
		}
		content[j].TopLogprobs = list
	}
	return nil
}
