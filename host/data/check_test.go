package data

import (
	"strings"
	"testing"
)

func TestCheckRow(t *testing.T) {
	good := func() Row {
		return Row{DataSource: "openai/gsm8k", Prompt: []Message{{Role: "system", Content: ""}, {Role: "user", Content: "1+1?"}},
			RewardModel: RewardModel{Style: "rule", GroundTruth: "2"}}
	}
	if err := CheckRow(good()); err != nil {
		t.Fatalf("a good row: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Row)
		want string
	}{
		{"no data_source", func(r *Row) { r.DataSource = "" }, "column data_source: is empty"},
		{"blank data_source", func(r *Row) { r.DataSource = "  " }, "column data_source: is empty"},
		{"no messages", func(r *Row) { r.Prompt = nil }, "column prompt: has no messages"},
		{"no text", func(r *Row) { r.Prompt[1].Content = " \n" }, "column prompt: has no text (2 messages, all empty)"},
		{"no role", func(r *Row) { r.Prompt[1].Role = "" }, "column prompt: message 1 has no role"},
	} {
		r := good()
		tc.edit(&r)
		if err := CheckRow(r); err == nil || !strings.HasPrefix(err.Error(), "data: "+tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, "data: "+tc.want)
		}
	}
}

// RowChecker refuses a row whose value types mix with the rows it accepted, and a refused row
// leaves it as it was: the rows it accepts are a file WriteParquet writes.
func TestRowChecker(t *testing.T) {
	row := func(gt any, ei map[string]any) Row {
		return Row{DataSource: "s", Prompt: []Message{{Role: "user", Content: "q"}}, RewardModel: RewardModel{GroundTruth: gt}, ExtraInfo: ei}
	}
	rows := []struct {
		r    Row
		want string // "" accepted
	}{
		{row("1", map[string]any{"index": int64(0), "a": map[string]any{"b": "x"}}), ""},
		{row(nil, map[string]any{"index": int64(1)}), ""},
		{row(int64(2), nil), "column reward_model: ground_truth mixes string and int64 values (earlier rows)"},
		{row("3", map[string]any{"index": "three"}), "column extra_info: field .index: mixes int64 and string values (earlier rows)"},
		{row("4", map[string]any{"a": map[string]any{"b": []any{int64(1)}}}), "column extra_info: field .a: .b: mixes string and list values (earlier rows)"},
		{row("5", map[string]any{"index": 5.5, "c": true}), ""}, // int and float make float
		{Row{DataSource: "s", Prompt: []Message{{Role: "user", Content: "q"}}, Extra: map[string]any{"x": int64(1)}}, ""},
		{Row{DataSource: "s", Prompt: []Message{{Role: "user", Content: "q"}}, Extra: map[string]any{"x": "one"}}, "column x: value mixes int64 and string values (earlier rows)"},
		{row("6", nil), ""},
		{Row{DataSource: "", Prompt: []Message{{Role: "user", Content: "q"}}}, "column data_source: is empty"},
	}
	var c RowChecker
	var kept []Row
	for i, x := range rows {
		err := c.Check(x.r)
		switch {
		case x.want == "" && err != nil:
			t.Errorf("row %d: %v", i, err)
		case x.want != "" && (err == nil || !strings.Contains(err.Error(), x.want)):
			t.Errorf("row %d: %v; want %q", i, err, x.want)
		case err == nil:
			kept = append(kept, x.r)
		}
	}
	if err := WriteParquet(t.TempDir()+"/kept.parquet", kept); err != nil {
		t.Errorf("the rows the checker accepted do not write: %v", err)
	}
	// and the refused ones would have failed the file
	for i, x := range rows {
		if x.want != "" && !strings.Contains(x.want, "data_source") {
			if err := WriteParquet(t.TempDir()+"/mixed.parquet", append(append([]Row{}, kept...), x.r)); err == nil {
				t.Errorf("row %d: refused by the checker, but WriteParquet writes it beside the kept rows", i)
			}
		}
	}
}
