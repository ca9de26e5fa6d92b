package data

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
)

var update = flag.Bool("update", false, "rewrite testdata/gsm8k_go.parquet")

// Files written by pyarrow and by HF datasets' to_parquet (scripts/goldens/data) read back
// to exactly the rows the Go preprocessing builds from the same records.
func TestReadPythonWritten(t *testing.T) {
	want, err := gsm8kRows("testdata/gsm8k_train_head.jsonl", "train")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gsm8k_pyarrow.parquet", "gsm8k_hf.parquet"} {
		got, err := ReadParquet(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", name, len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("%s row %d:\n got %#v\nwant %#v", name, i, got[i], want[i])
			}
		}
		ei := got[3].ExtraInfo
		if gt := ei["tools_kwargs"].(map[string]any)["calc_gsm8k_reward"].(map[string]any)["create_kwargs"].(map[string]any)["ground_truth"]; gt != got[3].RewardModel.GroundTruth {
			t.Errorf("%s: tools_kwargs ground truth %v", name, gt)
		}
	}
}

func TestReadTypes(t *testing.T) {
	got, err := ReadParquet("testdata/types_pyarrow.parquet")
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{
			DataSource:  "src",
			Prompt:      []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: ""}},
			Ability:     "math",
			RewardModel: RewardModel{GroundTruth: int64(7)},
			ExtraInfo: map[string]any{
				"f32": 0.5, "u8": int64(255), "i16": int64(-3),
				"nested": []any{[]any{int64(1), int64(2)}, []any{}, nil},
				"m":      map[string]any{"a": int64(1), "b": int64(2)},
				"fixed":  []any{1.5, -2.0}, "bin": "\x00ab", "nothing": nil,
			},
			Extra: map[string]any{"score": nil},
		},
		{
			DataSource:  "src2",
			Prompt:      nil,
			RewardModel: RewardModel{Style: "rule"},
			Extra:       map[string]any{"score": 1.25},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
}

// The file Go writes for the GSM8K head is byte-for-byte the one pyarrow and HF datasets
// were checked against (testdata/pyarrow_check.txt, by scripts/goldens/data check).
func TestWriteGolden(t *testing.T) {
	rows, err := gsm8kRows("testdata/gsm8k_train_head.jsonl", "train")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gsm8k.parquet")
	if err := WriteParquet(path, rows); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/gsm8k_go.parquet"
	if *update {
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("WriteParquet output differs from %s; if intended, run go test -update and "+
			"python3 scripts/goldens/data/make_goldens.py check", golden)
	}
	check, err := os.ReadFile("testdata/pyarrow_check.txt")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(check), "False") || !strings.Contains(string(check), "equal to the Python-built rows: True") {
		t.Errorf("testdata/pyarrow_check.txt records a failure:\n%s", check)
	}
	got, err := ReadParquet(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Error("Go-written GSM8K rows do not read back equal")
	}
}

// writeTable writes an arbitrary arrow table, for files WriteParquet would never produce.
func writeTable(t *testing.T, sc *arrow.Schema, build func(b *array.RecordBuilder)) string {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	build(b)
	rec := b.NewRecord()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "x.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(sc, f, nil, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	strT   = arrow.BinaryTypes.String
	msgT   = arrow.StructOf(arrow.Field{Name: "role", Type: strT, Nullable: true}, arrow.Field{Name: "content", Type: strT, Nullable: true})
	rmT    = arrow.StructOf(arrow.Field{Name: "ground_truth", Type: strT, Nullable: true}, arrow.Field{Name: "style", Type: strT, Nullable: true})
	fieldF = func(name string, t arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: true}
	}
)

// appendGood appends a valid row to the first three columns data_source, prompt, reward_model.
func appendGood(b *array.RecordBuilder, nullPrompt, nullRole bool) {
	b.Field(0).(*array.StringBuilder).Append("s")
	lb := b.Field(1).(*array.ListBuilder)
	if nullPrompt {
		lb.AppendNull()
	} else {
		lb.Append(true)
		sb := lb.ValueBuilder().(*array.StructBuilder)
		sb.Append(true)
		if nullRole {
			sb.FieldBuilder(0).AppendNull()
		} else {
			sb.FieldBuilder(0).(*array.StringBuilder).Append("user")
		}
		sb.FieldBuilder(1).(*array.StringBuilder).Append("hi")
	}
	rm := b.Field(2).(*array.StructBuilder)
	rm.Append(true)
	rm.FieldBuilder(0).(*array.StringBuilder).Append("1")
	rm.FieldBuilder(1).(*array.StringBuilder).Append("rule")
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, err := os.ReadFile("testdata/gsm8k_pyarrow.parquet")
	if err != nil {
		t.Fatal(err)
	}
	base := []arrow.Field{fieldF("data_source", strT), fieldF("prompt", arrow.ListOf(msgT)), fieldF("reward_model", rmT)}
	tests := []struct {
		name  string
		path  string
		wants []string // substrings of the error
		isNP  bool     // errors.Is(err, ErrNotParquet)
	}{
		{"empty", write("empty.parquet", nil), []string{"empty.parquet", "empty file"}, true},
		{"text", write("notes.parquet", []byte("question,answer\n1,2\n")), []string{"notes.parquet", "not a parquet file"}, true},
		{"truncated", write("trunc.parquet", good[:len(good)/2]), []string{"trunc.parquet", "not a parquet file"}, true},
		{"bad footer", write("footer.parquet", append(append([]byte("PAR1"), make([]byte, 64)...), []byte("\x10\x00\x00\x00PAR1")...)), []string{"footer.parquet", "corrupt"}, false},
		{"missing", filepath.Join(dir, "nope.parquet"), []string{"nope.parquet", "no such file"}, false},
		{"renamed column", writeTable(t, arrow.NewSchema([]arrow.Field{fieldF("data_source", strT), fieldF("prompts", arrow.ListOf(msgT)), fieldF("reward_model", rmT)}, nil),
			func(b *array.RecordBuilder) { appendGood(b, false, false) }),
			[]string{"x.parquet", `column prompt`, `missing required column "prompt"`, `did you mean "prompts"`}, false},
		{"an SFT file", writeTable(t, arrow.NewSchema([]arrow.Field{fieldF("data_source", strT), fieldF("messages", arrow.ListOf(msgT)), fieldF("reward_model", rmT)}, nil),
			func(b *array.RecordBuilder) { appendGood(b, false, false) }),
			[]string{`missing required column "prompt"`, "it is an SFT file (messages or input_ids): give it to rlhost sft"}, false},
		{"missing column", writeTable(t, arrow.NewSchema([]arrow.Field{fieldF("data_source", strT), fieldF("prompt", arrow.ListOf(msgT)), fieldF("ability", strT)}, nil),
			func(b *array.RecordBuilder) {
				b.Field(0).(*array.StringBuilder).Append("s")
				b.Field(1).AppendNull()
				b.Field(2).(*array.StringBuilder).Append("math")
			}),
			[]string{`missing required column "reward_model"`, "the file has data_source, prompt, ability"}, false},
		{"wrong type", writeTable(t, arrow.NewSchema(append(append([]arrow.Field{}, base...), fieldF("ability", arrow.PrimitiveTypes.Int64)), nil),
			func(b *array.RecordBuilder) { appendGood(b, false, false); b.Field(3).(*array.Int64Builder).Append(1) }),
			[]string{"column ability", "has type int64, want string"}, false},
		{"prompt not a list", writeTable(t, arrow.NewSchema([]arrow.Field{fieldF("data_source", strT), fieldF("prompt", strT), fieldF("reward_model", rmT)}, nil),
			func(b *array.RecordBuilder) {
				b.Field(0).(*array.StringBuilder).Append("s")
				b.Field(1).(*array.StringBuilder).Append("hi")
				b.Field(2).AppendNull()
			}),
			[]string{"column prompt", "want list<struct<content: string, role: string>>"}, false},
		{"null prompt", writeTable(t, arrow.NewSchema(base, nil),
			func(b *array.RecordBuilder) { appendGood(b, false, false); appendGood(b, true, false) }),
			[]string{"x.parquet: row 1: column prompt: is null"}, false},
		{"null role", writeTable(t, arrow.NewSchema(base, nil),
			func(b *array.RecordBuilder) {
				appendGood(b, false, false)
				appendGood(b, false, false)
				appendGood(b, false, true)
			}),
			[]string{"row 2: column prompt: message 0 has a null role"}, false},
		{"no rows", writeTable(t, arrow.NewSchema(base, nil), func(b *array.RecordBuilder) {}),
			[]string{"has no rows"}, false},
	}
	for _, tt := range tests {
		_, err := ReadParquet(tt.path)
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, w)
			}
		}
		if !strings.HasPrefix(err.Error(), "data: ") {
			t.Errorf("%s: error %q lacks the package prefix", tt.name, err)
		}
		if got := errors.Is(err, ErrNotParquet); got != tt.isNP {
			t.Errorf("%s: errors.Is(err, ErrNotParquet) = %v", tt.name, got)
		}
	}
}

func TestReadParquetFuncStops(t *testing.T) {
	stop := errors.New("enough")
	n := 0
	err := ReadParquetFunc("testdata/gsm8k_pyarrow.parquet", func(i int, r Row) error {
		if i != n {
			t.Errorf("row index %d, want %d", i, n)
		}
		n++
		if i == 4 { // in the second row group
			return stop
		}
		return nil
	})
	if err != stop {
		t.Errorf("got %v, want the callback's error as is", err)
	}
	if n != 5 {
		t.Errorf("called %d times", n)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		rows []Row
		want string
	}{
		{"no rows", nil, "no rows to write"},
		{"mixed types", []Row{{ExtraInfo: map[string]any{"a": "x"}}, {ExtraInfo: map[string]any{"a": int64(1)}}},
			"row 1: column extra_info: field .a: mixes string and int64 values"},
		{"mixed list", []Row{{ExtraInfo: map[string]any{"a": []any{true, "x"}}}}, "row 0: column extra_info: field .a: [1]: mixes bool and string"},
		{"bad go type", []Row{{RewardModel: RewardModel{GroundTruth: struct{}{}}}}, "row 0: column reward_model: ground_truth unsupported Go type struct {}"},
		{"empty struct", []Row{{Extra: map[string]any{"meta": map[string]any{}}}}, "column meta: is an empty struct"},
		{"extra shadows", []Row{{Extra: map[string]any{"prompt": "x"}}}, "row 0: column prompt: is a column of Row"},
		{"huge uint", []Row{{Extra: map[string]any{"n": uint64(math.MaxUint64)}}}, "does not fit an int64"},
		{"big int as float", []Row{{Extra: map[string]any{"n": []any{int64(1) << 60, 0.5}}}}, "column n: mixes float64 values with the int 1152921504606846976"},
		{"bad utf-8", []Row{{DataSource: "a"}, {DataSource: "b\xff"}}, `row 1: column data_source: is not valid UTF-8: "b\xff"`},
		{"bad utf-8 prompt", []Row{{Prompt: []Message{{Role: "user", Content: "\xc3"}}}}, "row 0: column prompt: message 0 is not valid UTF-8"},
		{"bad utf-8 nested", []Row{{ExtraInfo: map[string]any{"a": []any{"ok", "\xe2\x82"}}}}, `row 0: column extra_info: value: string "\xe2\x82" is not valid UTF-8`},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, "out.parquet")
		if err := os.WriteFile(path, []byte("previous"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := WriteParquet(path, tt.rows)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "out.parquet") {
			t.Errorf("%s: error %v, want one naming the file and containing %q", tt.name, err, tt.want)
		}
		if b, _ := os.ReadFile(path); string(b) != "previous" {
			t.Errorf("%s: a failed write changed the file", tt.name)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("%s: a failed write left %d files", tt.name, len(ents))
		}
	}
}

// A damaged copy of types_pyarrow.parquet on which the arrow library's decoder loops
// forever; the reader gives up with an error. (The stuck goroutine spins until the test
// binary exits.)
func TestReadStalledDecoding(t *testing.T) {
	b, err := os.ReadFile("testdata/stall_corrupt_levels.parquet")
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	err = validateWithin(pf, "stall.parquet", 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "stall.parquet: corrupt parquet file: decoding made no progress") {
		t.Errorf("got %v", err)
	}
}

func TestReadParquetFuncPanicPropagates(t *testing.T) {
	defer func() {
		if p := recover(); p != "boom" {
			t.Errorf("recovered %v, want the callback's panic", p)
		}
	}()
	ReadParquetFunc("testdata/gsm8k_pyarrow.parquet", func(i int, r Row) error { panic("boom") })
	t.Error("no panic")
}
