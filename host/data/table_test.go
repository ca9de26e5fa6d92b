package data

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestTableRoundTrip writes SFT-shaped rows (messages with tool calls, a tools string,
// token ids) and reads them back unchanged.
func TestTableRoundTrip(t *testing.T) {
	rows := []map[string]any{
		{"messages": []any{
			map[string]any{"role": "user", "content": "2+3?"},
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
				map[string]any{"type": "function", "function": map[string]any{"name": "calc", "arguments": `{"x": "2+3"}`}}}},
			map[string]any{"role": "tool", "content": "5"},
			map[string]any{"role": "assistant", "content": "5"},
		}, "tools": `[{"type": "function"}]`, "input_ids": []any{int64(1), int64(2)}},
		{"messages": []any{map[string]any{"role": "user", "content": "hi"}, map[string]any{"role": "assistant", "content": "hello"}},
			"tools": nil, "input_ids": nil},
	}
	path := filepath.Join(t.TempDir(), "sft.parquet")
	if err := WriteTable(path, []string{"messages", "tools", "input_ids"}, rows); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := ReadTableFunc(path, func(i int, r map[string]any) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("read %d rows, want 2", len(got))
	}
	// Struct fields missing from a row come back as nulls: compare through the fields set.
	msgs := got[0]["messages"].([]any)
	call := msgs[1].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	if fn := call["function"].(map[string]any); fn["name"] != "calc" || fn["arguments"] != `{"x": "2+3"}` {
		t.Errorf("tool call read back as %v", call)
	}
	if msgs[2].(map[string]any)["tool_calls"] != nil || msgs[3].(map[string]any)["content"] != "5" {
		t.Errorf("messages read back as %v", msgs)
	}
	if !reflect.DeepEqual(got[0]["input_ids"], []any{int64(1), int64(2)}) || got[1]["input_ids"] != nil || got[1]["tools"] != nil {
		t.Errorf("rows read back as %v", got)
	}
	b, _ := json.Marshal(got[1]["messages"])
	if !strings.Contains(string(b), `"content":"hello"`) {
		t.Errorf("second row's messages: %s", b)
	}
}

func TestWriteTableErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.parquet")
	for _, c := range []struct {
		rows []map[string]any
		want string
	}{
		{nil, "no rows"},
		{[]map[string]any{{"a": int64(1), "b": 2}}, "row 0: column b: is not one of the table's columns"},
		{[]map[string]any{{"a": int64(1)}, {"a": "x"}}, "row 1: column a: value mixes int64 and string"},
	} {
		err := WriteTable(path, []string{"a"}, c.rows)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WriteTable(%v) = %v, want an error with %q", c.rows, err, c.want)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a failed write left %s", path)
	}
	if err := ReadTableFunc(filepath.Join(t.TempDir(), "none.parquet"), func(int, map[string]any) error { return nil }); err == nil {
		t.Error("reading a missing file gave no error")
	}
}
