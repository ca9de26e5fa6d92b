package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/rlhost/rlhost/sdk/trace"
)

// Tokens is a trajectory's exact token ids as the trainer trained on them: the first prompt,
// then the response — each turn's model tokens and the observations added to the prompt
// between turns — with ResponseMask 1 on the model's tokens and 0 on the observations'
// (veRL's prompts, responses and response_mask).
type Tokens struct {
	PromptIDs    []int `json:"prompt_ids"`
	ResponseIDs  []int `json:"response_ids"`
	ResponseMask []int `json:"response_mask"`
}

var (
	// ErrNoTokenIDs is matched (errors.Is) by the error of TrajectoryTokens for generate spans
	// without token ids: a store written, with token2text on, by an rlhost that kept only the
	// decoded text.
	ErrNoTokenIDs = errors.New("local: the generate spans hold decoded text but no token ids (traced before rlhost kept the ids beside the text)")
	// ErrNotOneSequence is matched by the error of TrajectoryTokens for a trajectory whose
	// turns cannot be laid out as one sequence: no generate turn, a turn whose prompt does not
	// continue the tokens before it, or no model token.
	ErrNotOneSequence = errors.New("local: the trajectory is not laid out as one sequence")
)

// turn is one generate span: the prompt it was given (the whole prompt, Offset 0, or the
// part after Offset tokens of the context) and the tokens the model drew.
type turn struct {
	Offset   int
	Prompt   []int
	Response []int
}

// TrajectoryTokens lays out the generate spans of a trajectory (spans in start order, as
// Store.Get and Store.Spans give them) as one token sequence. A later turn's prompt is the
// trajectory so far plus the observation; the trace stores only the new part
// (prompt_delta_ids after prompt_offset tokens), or, where it did not extend the context, the
// whole prompt, which must then start with the tokens before it.
func TrajectoryTokens(spans []trace.Span) (*Tokens, error) {
	turns, err := generateTurns(spans)
	if err != nil {
		return nil, err
	}
	if len(turns) == 0 {
		return nil, fmt.Errorf("%w: no generate turns", ErrNotOneSequence)
	}
	tk := &Tokens{PromptIDs: slices.Clone(turns[0].Prompt)}
	if turns[0].Offset != 0 {
		return nil, fmt.Errorf("%w: the first generate turn has a prompt offset (%d)", ErrNotOneSequence, turns[0].Offset)
	}
	add := func(ids []int, model int) {
		tk.ResponseIDs = append(tk.ResponseIDs, ids...)
		for range ids {
			tk.ResponseMask = append(tk.ResponseMask, model)
		}
	}
	model := 0
	for k, t := range turns {
		if k > 0 {
			n := len(tk.PromptIDs) + len(tk.ResponseIDs)
			switch {
			case t.Offset == n:
				add(t.Prompt, 0)
			case t.Offset == 0 && len(t.Prompt) >= n && slices.Equal(t.Prompt[:len(tk.PromptIDs)], tk.PromptIDs) &&
				slices.Equal(t.Prompt[len(tk.PromptIDs):n], tk.ResponseIDs):
				add(t.Prompt[n:], 0)
			default:
				return nil, fmt.Errorf("%w: generate turn %d: its prompt (offset %d, %d tokens) does not continue the %d tokens before it",
					ErrNotOneSequence, k, t.Offset, len(t.Prompt), n)
			}
		}
		add(t.Response, 1)
		model += len(t.Response)
	}
	if model == 0 {
		return nil, fmt.Errorf("%w: no model tokens", ErrNotOneSequence)
	}
	if tk.ResponseIDs == nil {
		tk.ResponseIDs, tk.ResponseMask = []int{}, []int{}
	}
	return tk, nil
}

// generateTurns reads the token ids of the generate spans of a trajectory, in order.
func generateTurns(spans []trace.Span) ([]turn, error) {
	var turns []turn
	for _, s := range spans {
		if s.Name != "generate" {
			continue
		}
		var in struct {
			Prompt     *[]int  `json:"prompt_ids"`
			Delta      *[]int  `json:"prompt_delta_ids"`
			PromptText *string `json:"prompt"`
			DeltaText  *string `json:"prompt_delta"`
		}
		var out struct {
			Response *[]int `json:"response_ids"`
		}
		if err := json.Unmarshal([]byte(s.Inputs), &in); err != nil {
			return nil, fmt.Errorf("local: generate span %s: inputs: %v", s.SpanID, err)
		}
		if in.Prompt == nil && in.Delta == nil && (in.PromptText != nil || in.DeltaText != nil) {
			return nil, fmt.Errorf("generate span %s: %w", s.SpanID, ErrNoTokenIDs)
		}
		if err := json.Unmarshal([]byte(s.Outputs), &out); err != nil || out.Response == nil {
			return nil, fmt.Errorf("local: generate span %s: no response_ids in its outputs", s.SpanID)
		}
		t := turn{Response: *out.Response}
		switch {
		case in.Delta != nil:
			t.Prompt = *in.Delta
			off, ok := s.Attributes["prompt_offset"]
			if f := attrNumber(off); !ok || f != math.Trunc(f) || f < 1 {
				return nil, fmt.Errorf("local: generate span %s: prompt_delta_ids without a valid prompt_offset attribute (%v)", s.SpanID, off)
			}
			t.Offset = int(attrNumber(off))
		case in.Prompt != nil:
			t.Prompt = *in.Prompt
		default:
			return nil, fmt.Errorf("local: generate span %s: no prompt_ids in its inputs", s.SpanID)
		}
		turns = append(turns, t)
	}
	return turns, nil
}

// attrNumber is a numeric attribute as stored (int64 from the host, float64 or json.Number
// read back from the store); NaN for anything else.
func attrNumber(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case json.Number:
		f, err := x.Float64()
		if err == nil {
			return f
		}
	}
	return math.NaN()
}
