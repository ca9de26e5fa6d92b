package sft

import (
	"fmt"
	"slices"
)

// Turn is one traced generate call of a trajectory (host/tracing records them): the prompt
// it was given and the tokens the model drew. A later turn's prompt is the trajectory so far
// plus the observation: the trace stores only that new part (Delta, after Offset tokens of
// the context), or, where it did not extend the context, the whole prompt (Offset 0).
type Turn struct {
	Offset   int
	Prompt   []int // the whole prompt (Offset 0) or the part after Offset tokens
	Response []int
}

// TrajectoryExample lays out a traced trajectory's exact token ids as the trainer trained on
// them: the first prompt and every observation with loss mask 0, the model's tokens with 1.
// It fails when a turn's prompt does not continue the trajectory (a trace that cannot be
// laid out as one sequence).
func TrajectoryExample(turns []Turn) (*Example, error) {
	if len(turns) == 0 {
		return nil, fmt.Errorf("no generate turns")
	}
	ex := &Example{}
	add := func(ids []int, model bool) {
		for _, id := range ids {
			ex.IDs = append(ex.IDs, int32(id))
			ex.Mask = append(ex.Mask, model)
		}
	}
	for k, t := range turns {
		switch {
		case k == 0 && t.Offset == 0:
			add(t.Prompt, false)
		case t.Offset == len(ex.IDs) && k > 0:
			add(t.Prompt, false)
		case t.Offset == 0 && k > 0 && len(t.Prompt) >= len(ex.IDs) && slices.Equal(i32s64(t.Prompt[:len(ex.IDs)]), ex.IDs):
			add(t.Prompt[len(ex.IDs):], false)
		default:
			return nil, fmt.Errorf("generate turn %d: its prompt (offset %d, %d tokens) does not continue the %d tokens before it", k, t.Offset, len(t.Prompt), len(ex.IDs))
		}
		add(t.Response, true)
	}
	if ex.LossTokens() == 0 {
		return nil, fmt.Errorf("no model tokens")
	}
	return ex, nil
}

func i32s64(x []int) []int32 {
	out := make([]int32, len(x))
	for i, v := range x {
		out[i] = int32(v)
	}
	return out
}

// TokenRow is the table row of an example (input_ids, loss_mask) with the given extra
// columns, for data.WriteTable.
func TokenRow(ex *Example, extra map[string]any) map[string]any {
	ids := make([]any, len(ex.IDs))
	mask := make([]any, len(ex.IDs))
	for i, id := range ex.IDs {
		ids[i] = int64(id)
		if ex.Mask[i] {
			mask[i] = int64(1)
		} else {
			mask[i] = int64(0)
		}
	}
	row := map[string]any{ColInputIDs: ids, ColLossMask: mask}
	for k, v := range extra {
		row[k] = v
	}
	return row
}
