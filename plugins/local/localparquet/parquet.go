// Package localparquet exports the local trace store (plugins/local) as parquet, for
// `rlhost traces export --format parquet`. It is a package of its own so that the
// rlhost-trace-local plugin, which never exports, does not link the parquet library
// (its binary is 17 MB instead of 37 MB, stripped).
package localparquet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	"github.com/rlhost/rlhost/plugins/local"
	"github.com/rlhost/rlhost/sdk/trace"
)

// Schema is the schema of Export: a row per trajectory; spans as JSON text.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "trace_id", Type: arrow.BinaryTypes.String},
	{Name: "step", Type: arrow.PrimitiveTypes.Int64},
	{Name: "sample_index", Type: arrow.PrimitiveTypes.Int64},
	{Name: "rollout_n", Type: arrow.PrimitiveTypes.Int64},
	{Name: "validate", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float64},
	{Name: "experiment_name", Type: arrow.BinaryTypes.String},
	{Name: "agent_name", Type: arrow.BinaryTypes.String},
	{Name: "task", Type: arrow.BinaryTypes.String},
	{Name: "data_source", Type: arrow.BinaryTypes.String},
	{Name: "start_unix_nano", Type: arrow.PrimitiveTypes.Int64},
	{Name: "end_unix_nano", Type: arrow.PrimitiveTypes.Int64},
	{Name: "prompt_tokens", Type: arrow.PrimitiveTypes.Int64},
	{Name: "response_tokens", Type: arrow.PrimitiveTypes.Int64},
	{Name: "turns", Type: arrow.PrimitiveTypes.Int64},
	{Name: "prompt", Type: arrow.BinaryTypes.String},
	{Name: "response", Type: arrow.BinaryTypes.String},
	{Name: "error", Type: arrow.BinaryTypes.String},
	{Name: "spans_json", Type: arrow.BinaryTypes.String},
	{Name: "advantage", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, // training trajectories only
	// The exact token ids (local.TrajectoryTokens); null when the trajectory has none.
	{Name: "prompt_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	{Name: "response_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	{Name: "response_mask", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
}, nil)

// Export writes the trajectories of st matching flt as a parquet file (Schema), for
// pandas.read_parquet. It returns the number of rows.
func Export(ctx context.Context, st *local.Store, w io.Writer, flt local.Filter) (int, error) {
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithCreatedBy("rlhost traces export"))
	// The writer's Close would close w too (it is an io.Closer): hide that.
	fw, err := pqarrow.NewFileWriter(Schema, struct{ io.Writer }{w}, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return 0, fmt.Errorf("local: parquet: %w", err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema)
	defer b.Release()
	n, pending := 0, 0
	flush := func() error {
		if pending == 0 {
			return nil
		}
		rec := b.NewRecord()
		defer rec.Release()
		pending = 0
		return fw.WriteBuffered(rec)
	}
	err = st.Each(ctx, flt, func(t local.Trajectory, spans []trace.Span) error {
		sj, err := json.Marshal(local.ExportSpansOf(spans))
		if err != nil {
			return err
		}
		str := func(i int, v string) { b.Field(i).(*array.StringBuilder).Append(v) }
		i64 := func(i int, v int64) { b.Field(i).(*array.Int64Builder).Append(v) }
		str(0, t.TraceID)
		i64(1, t.Step)
		i64(2, t.SampleIndex)
		i64(3, t.RolloutN)
		b.Field(4).(*array.BooleanBuilder).Append(t.Validate)
		b.Field(5).(*array.Float64Builder).Append(t.Reward)
		str(6, t.ExperimentName)
		str(7, t.AgentName)
		str(8, t.Task)
		str(9, t.DataSource)
		i64(10, t.Start)
		i64(11, t.End)
		i64(12, t.PromptTokens)
		i64(13, t.ResponseTokens)
		i64(14, t.Turns)
		str(15, t.Prompt)
		str(16, t.Response)
		str(17, t.Error)
		str(18, string(sj))
		if t.Advantage != nil {
			b.Field(19).(*array.Float64Builder).Append(*t.Advantage)
		} else {
			b.Field(19).AppendNull()
		}
		ints := func(i int, v []int) {
			lb := b.Field(i).(*array.ListBuilder)
			if v == nil {
				lb.AppendNull()
				return
			}
			lb.Append(true)
			vb := lb.ValueBuilder().(*array.Int64Builder)
			for _, x := range v {
				vb.Append(int64(x))
			}
		}
		tk, _ := local.TrajectoryTokens(spans)
		if tk == nil {
			tk = &local.Tokens{}
		}
		ints(20, tk.PromptIDs)
		ints(21, tk.ResponseIDs)
		ints(22, tk.ResponseMask)
		n++
		if pending++; pending >= 1000 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if cerr := fw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("local: parquet: %w", err)
	}
	return n, nil
}
