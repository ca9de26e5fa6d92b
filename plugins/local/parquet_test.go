package local_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	"github.com/rlhost/rlhost/plugins/local"
	"github.com/rlhost/rlhost/plugins/local/localparquet"
)

func TestExportParquet(t *testing.T) {
	st, _ := local.TestStore(t)
	var buf bytes.Buffer
	n, err := localparquet.Export(context.Background(), st, &buf, local.Filter{})
	if err != nil || n != 12 {
		t.Fatalf("Export: %d, %v", n, err)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if tbl.NumRows() != 12 || tbl.Schema().NumFields() != localparquet.Schema.NumFields() {
		t.Fatalf("table: %d rows, schema %v", tbl.NumRows(), tbl.Schema())
	}
	for i, f := range localparquet.Schema.Fields() {
		if g := tbl.Schema().Field(i); g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) {
			t.Errorf("column %d: %s %s; want %s %s", i, g.Name, g.Type, f.Name, f.Type)
		}
	}
	resp := tbl.Column(16).Data().Chunk(0).(*array.String).Value(11)
	if resp != "<tool_call>calc</tool_call> the answer is 43 so #### 43" {
		t.Errorf("last row's response %q", resp)
	}
	// The last row (step 3, rollout 1) has reward 0, advantage -0.5.
	if adv := tbl.Column(19).Data().Chunk(0).(*array.Float64); adv.IsNull(11) || adv.Value(11) != -0.5 {
		t.Errorf("last row's advantage: null %v, %v", adv.IsNull(11), adv.Value(11))
	}
	// and its token ids beside the text: the prompt, the two turns and the observation between them
	for col, want := range map[int]string{20: "[1 2 3 4 5]", 21: "[6 7 8 9 10 11 12 13 3]", 22: "[1 1 1 0 0 1 1 1 1]"} {
		l := tbl.Column(col).Data().Chunk(0).(*array.List)
		start, end := l.ValueOffsets(11)
		vals := l.ListValues().(*array.Int64).Int64Values()[start:end]
		if got := fmt.Sprint(vals); l.IsNull(11) || got != want {
			t.Errorf("last row's %s: %s; want %s", localparquet.Schema.Field(col).Name, got, want)
		}
	}
}
