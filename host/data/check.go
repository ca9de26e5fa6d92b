package data

import (
	"fmt"
	"strings"
)

// CheckRow checks what a row must hold beyond its columns' types: a data_source (rows are
// routed to their task and scored by it), and a prompt of at least one message, every message
// with a role, some message with text. The reader refuses a file with such a row (naming the
// file and the row); `rlhost preprocess` skips the row and counts it ([RowChecker]). The
// error names the column.
func CheckRow(r Row) error {
	if e := checkRow(&r); e != nil {
		return e
	}
	return nil
}

func checkRow(r *Row) *Error {
	if strings.TrimSpace(r.DataSource) == "" {
		return &Error{Row: -1, Column: ColDataSource, Msg: "is empty (a row goes to the task that serves its data_source, and is scored by it)"}
	}
	if len(r.Prompt) == 0 {
		return &Error{Row: -1, Column: ColPrompt, Msg: "has no messages"}
	}
	text := false
	for i, m := range r.Prompt {
		if strings.TrimSpace(m.Role) == "" {
			return &Error{Row: -1, Column: ColPrompt, Msg: fmt.Sprintf("message %d has no role", i)}
		}
		text = text || strings.TrimSpace(m.Content) != ""
	}
	if !text {
		return &Error{Row: -1, Column: ColPrompt, Msg: fmt.Sprintf("has no text (%d messages, all empty)", len(r.Prompt))}
	}
	return nil
}

// RowChecker checks rows one at a time as WriteParquet and the reader will take them:
// CheckRow, and the types of reward_model.ground_truth, extra_info and the other columns,
// merged with those of the rows it accepted before (WriteParquet infers one type per column
// from all rows, so a value whose type mixes with the earlier rows' would fail the whole
// file). A refused row leaves the checker as it was. The zero value is ready to use.
type RowChecker struct {
	gt, ei inferred
	extra  map[string]*inferred
}

// Check returns why r cannot be written beside the rows accepted so far (the error names the
// column and, for a type, the key path), or nil, and then r is accepted.
func (c *RowChecker) Check(r Row) error {
	if e := checkRow(&r); e != nil {
		return e
	}
	gt := c.gt.clone()
	if err := gt.merge(r.RewardModel.GroundTruth); err != nil {
		return &Error{Row: -1, Column: ColRewardModel, Msg: "ground_truth " + err.Error() + " (earlier rows)"}
	}
	ei := c.ei.clone()
	if r.ExtraInfo != nil {
		if err := ei.merge(r.ExtraInfo); err != nil {
			return &Error{Row: -1, Column: ColExtraInfo, Msg: "field " + err.Error() + " (earlier rows)"}
		}
	}
	extra := map[string]*inferred{}
	for k, v := range r.Extra {
		if knownColumns[k] {
			return &Error{Row: -1, Column: k, Msg: "is a column of Row; set the field, not Extra"}
		}
		t := &inferred{}
		if old := c.extra[k]; old != nil {
			t = old.clone()
		}
		if err := t.merge(v); err != nil {
			return &Error{Row: -1, Column: k, Msg: "value " + err.Error() + " (earlier rows)"}
		}
		extra[k] = t
	}
	c.gt, c.ei = *gt, *ei
	if c.extra == nil {
		c.extra = map[string]*inferred{}
	}
	for k, t := range extra {
		c.extra[k] = t
	}
	return nil
}

// clone is a deep copy of t.
func (t *inferred) clone() *inferred {
	c := *t
	if t.elem != nil {
		c.elem = t.elem.clone()
	}
	if t.fields != nil {
		c.fields = make(map[string]*inferred, len(t.fields))
		for k, f := range t.fields {
			c.fields[k] = f.clone()
		}
	}
	return &c
}
