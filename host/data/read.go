package data

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
)

// readBatchSize is the number of rows decoded from parquet at a time.
const readBatchSize = 4096

// goAlloc backs every arrow buffer the reader makes with Go memory. The strings in the
// rows it returns point into those buffers without copying, which is safe only because
// the garbage collector, not Release, frees them (memory.DefaultAllocator is C malloc
// under the mallocator build tag).
var goAlloc = memory.NewGoAllocator()

// ReadParquet loads every row of the parquet file at path.
func ReadParquet(path string) ([]Row, error) {
	var rows []Row
	err := ReadParquetFunc(path, func(i int, r Row) error {
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// ReadParquetFunc calls fn for every row of the parquet file at path, in order, holding
// only one batch of rows in memory. An error from fn stops the reading and is returned as is.
func ReadParquetFunc(path string, fn func(i int, r Row) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return readFrom(f, st.Size(), path, fn)
}

// ReadParquetBytes is ReadParquetFunc over a file's contents; name is used in errors.
func ReadParquetBytes(b []byte, name string, fn func(i int, r Row) error) error {
	return readFrom(bytes.NewReader(b), int64(len(b)), name, fn)
}

func readFrom(r parquet.ReaderAtSeeker, size int64, name string, fn func(i int, r Row) error) error {
	return readWith(r, size, name, func(sc *arrow.Schema) (func(arrow.Record, int) (Row, *Error), error) {
		cols, err := planColumns(sc, name)
		if err != nil {
			return nil, err
		}
		return cols.row, nil
	}, fn)
}

// readWith reads a parquet file record by record: plan turns the file's schema into the
// function that converts one row of a record, and fn is called with every converted row.
func readWith[R any](r parquet.ReaderAtSeeker, size int64, name string,
	plan func(*arrow.Schema) (func(arrow.Record, int) (R, *Error), error), fn func(i int, r R) error) (err error) {
	if size == 0 {
		return &Error{File: name, Row: -1, Msg: "empty file (0 bytes)", Err: ErrNotParquet}
	}
	if err := checkMagic(r, size); err != nil {
		return &Error{File: name, Row: -1, Msg: err.Error(), Err: ErrNotParquet}
	}
	// The parquet library panics on some corrupt inputs; report them as errors. A panic
	// in fn is the caller's and goes on.
	inFn := false
	defer func() {
		if p := recover(); p != nil {
			if inFn {
				panic(p)
			}
			err = &Error{File: name, Row: -1, Msg: fmt.Sprintf("corrupt parquet file: %v", p)}
		}
	}()
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return &Error{File: name, Row: -1, Msg: "corrupt parquet file", Err: err}
	}
	defer pf.Close()
	if pf.NumRows() == 0 {
		return &Error{File: name, Row: -1, Msg: "the file has no rows"}
	}
	if err := validateWithin(pf, name, timeoutFor(size)); err != nil {
		return err
	}
	// The arrow schema some writers store in the footer (key ARROW:schema) is decoded by
	// the arrow library without bounds: a damaged one can ask for terabytes and end the
	// process. The parquet schema says all this package needs, so the stored one is ignored.
	for _, kv := range pf.MetaData().KeyValueMetadata() {
		if kv != nil && kv.Key == "ARROW:schema" {
			kv.Key = "ARROW:schema (ignored)"
		}
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: readBatchSize}, goAlloc)
	if err != nil {
		return &Error{File: name, Row: -1, Msg: "reading the arrow schema", Err: err}
	}
	sc, err := fr.Schema()
	if err != nil {
		return &Error{File: name, Row: -1, Msg: "reading the arrow schema", Err: err}
	}
	rowOf, err := plan(sc)
	if err != nil {
		return err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return &Error{File: name, Row: -1, Msg: "opening the row groups", Err: err}
	}
	defer rr.Release()
	base := 0
	for rr.Next() {
		rec := rr.Record()
		n := int(rec.NumRows())
		for i := 0; i < n; i++ {
			row, err := rowOf(rec, i)
			if err != nil {
				err.File, err.Row = name, base+i
				return err
			}
			inFn = true
			ferr := fn(base+i, row)
			inFn = false
			if ferr != nil {
				return ferr
			}
		}
		base += n
	}
	if err := rr.Err(); err != nil && err != io.EOF {
		return &Error{File: name, Row: base, Msg: "decoding the row group holding this row", Err: err}
	}
	if int64(base) != pf.NumRows() {
		return &Error{File: name, Row: -1, Msg: fmt.Sprintf("read %d rows, the footer says %d", base, pf.NumRows())}
	}
	return nil
}

func checkMagic(r parquet.ReaderAtSeeker, size int64) error {
	if size < 12 {
		return fmt.Errorf("not a parquet file (%d bytes, too short)", size)
	}
	var head, tail [4]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return err
	}
	if _, err := r.ReadAt(tail[:], size-4); err != nil {
		return err
	}
	if string(head[:]) != "PAR1" || string(tail[:]) != "PAR1" {
		return fmt.Errorf("not a parquet file (no PAR1 magic at its start and end)")
	}
	return nil
}

// columns maps the file's columns to Row fields.
type columns struct {
	dataSource, prompt, ability, rewardModel, extraInfo, agentName int // -1: absent
	extra                                                          []int
	names                                                          []string
}

func planColumns(sc *arrow.Schema, name string) (*columns, error) {
	c := &columns{dataSource: -1, prompt: -1, ability: -1, rewardModel: -1, extraInfo: -1, agentName: -1}
	for i, f := range sc.Fields() {
		c.names = append(c.names, f.Name)
		var err error
		switch f.Name {
		case ColDataSource:
			c.dataSource, err = i, wantString(f.Type)
		case ColAbility:
			c.ability, err = i, wantString(f.Type)
		case ColAgentName:
			c.agentName, err = i, wantString(f.Type)
		case ColPrompt:
			c.prompt, err = i, wantPrompt(f.Type)
		case ColRewardModel:
			c.rewardModel, err = i, wantStruct(f.Type, "ground_truth")
		case ColExtraInfo:
			c.extraInfo, err = i, wantStruct(f.Type, "")
		default:
			c.extra = append(c.extra, i)
		}
		if err != nil {
			return nil, &Error{File: name, Row: -1, Column: f.Name, Msg: err.Error()}
		}
	}
	for _, req := range requiredColumns {
		if sc.FieldIndices(req) != nil {
			continue
		}
		msg := fmt.Sprintf("missing required column %q (the file has %s)", req, strings.Join(c.names, ", "))
		if sc.FieldIndices("messages") != nil || sc.FieldIndices("input_ids") != nil {
			msg += "; it is an SFT file (messages or input_ids): give it to rlhost sft, and to rlhost train only the RL files " +
				"(rlhost preprocess writes the SFT ones to OUT/sft/, apart from OUT/*.parquet)"
		} else if s := didYouMean(req, c.names); s != "" {
			msg += fmt.Sprintf("; did you mean %q? rename it", s)
		}
		return nil, &Error{File: name, Row: -1, Column: req, Msg: msg}
	}
	return c, nil
}

func isString(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	case arrow.DICTIONARY:
		return isString(t.(*arrow.DictionaryType).ValueType)
	}
	return false
}

func wantString(t arrow.DataType) error {
	if !isString(t) {
		return fmt.Errorf("has type %s, want string", t)
	}
	return nil
}

func listElem(t arrow.DataType) (arrow.DataType, bool) {
	switch lt := t.(type) {
	case *arrow.ListType:
		return lt.Elem(), true
	case *arrow.LargeListType:
		return lt.Elem(), true
	case *arrow.FixedSizeListType:
		return lt.Elem(), true
	}
	return nil, false
}

func wantPrompt(t arrow.DataType) error {
	elem, ok := listElem(t)
	if ok {
		if st, ok := elem.(*arrow.StructType); ok {
			for _, k := range []string{"role", "content"} {
				f, ok := st.FieldByName(k)
				if !ok {
					return fmt.Errorf("has type %s: its messages have no %q field", t, k)
				}
				if !isString(f.Type) && f.Type.ID() != arrow.NULL {
					return fmt.Errorf("has type %s: message field %q is %s, want string", t, k, f.Type)
				}
			}
			return nil
		}
	}
	return fmt.Errorf("has type %s, want list<struct<content: string, role: string>>", t)
}

func wantStruct(t arrow.DataType, field string) error {
	st, ok := t.(*arrow.StructType)
	if !ok {
		return fmt.Errorf("has type %s, want a struct", t)
	}
	if field != "" {
		if _, ok := st.FieldByName(field); !ok {
			return fmt.Errorf("has type %s: no %q field", t, field)
		}
	}
	return nil
}

func (c *columns) row(rec arrow.Record, i int) (Row, *Error) {
	var r Row
	fail := func(col, format string, args ...any) (Row, *Error) {
		return Row{}, &Error{Column: col, Msg: fmt.Sprintf(format, args...)}
	}
	// data_source
	col := rec.Column(c.dataSource)
	if col.IsNull(i) {
		return fail(ColDataSource, "is null")
	}
	r.DataSource = stringAt(col, i)
	// prompt
	col = rec.Column(c.prompt)
	if col.IsNull(i) {
		return fail(ColPrompt, "is null")
	}
	v, err := valueAt(col, i)
	if err != nil {
		return fail(ColPrompt, "%v", err)
	}
	for j, m := range v.([]any) {
		mm, _ := m.(map[string]any)
		if mm == nil {
			return fail(ColPrompt, "message %d is null", j)
		}
		role, ok := mm["role"].(string)
		if !ok {
			return fail(ColPrompt, "message %d has a null role", j)
		}
		content, _ := mm["content"].(string) // a null content is ""
		r.Prompt = append(r.Prompt, Message{Role: role, Content: content})
	}
	// reward_model
	col = rec.Column(c.rewardModel)
	if col.IsNull(i) {
		return fail(ColRewardModel, "is null")
	}
	if v, err = valueAt(col, i); err != nil {
		return fail(ColRewardModel, "%v", err)
	}
	rm := v.(map[string]any)
	r.RewardModel.GroundTruth = rm["ground_truth"]
	if s, ok := rm["style"]; ok && s != nil {
		style, ok := s.(string)
		if !ok {
			return fail(ColRewardModel, "style is %T, want a string", s)
		}
		r.RewardModel.Style = style
	}
	if c.ability >= 0 {
		r.Ability = stringAt(rec.Column(c.ability), i)
	}
	if c.agentName >= 0 {
		r.AgentName = stringAt(rec.Column(c.agentName), i)
	}
	if c.extraInfo >= 0 {
		if v, err = valueAt(rec.Column(c.extraInfo), i); err != nil {
			return fail(ColExtraInfo, "%v", err)
		}
		if v != nil {
			r.ExtraInfo = v.(map[string]any)
		}
	}
	if len(c.extra) > 0 {
		r.Extra = make(map[string]any, len(c.extra))
		for _, k := range c.extra {
			if v, err = valueAt(rec.Column(k), i); err != nil {
				return fail(c.names[k], "%v", err)
			}
			r.Extra[c.names[k]] = v
		}
	}
	return r, nil
}

// stringAt is the string at i of a column checked by wantString; null is "".
func stringAt(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return ""
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.StringView:
		return a.Value(i)
	case *array.Dictionary:
		return stringAt(a.Dictionary(), a.GetValueIndex(i))
	}
	return ""
}

// valueAt converts the value at i of a to string, bool, int64, float64, []any,
// map[string]any or nil.
func valueAt(a arrow.Array, i int) (any, error) {
	if a.IsNull(i) {
		return nil, nil
	}
	switch a := a.(type) {
	case *array.Null:
		return nil, nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.StringView:
		return a.Value(i), nil
	case *array.Binary:
		return string(a.Value(i)), nil
	case *array.LargeBinary:
		return string(a.Value(i)), nil
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Int8:
		return int64(a.Value(i)), nil
	case *array.Int16:
		return int64(a.Value(i)), nil
	case *array.Int32:
		return int64(a.Value(i)), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Uint8:
		return int64(a.Value(i)), nil
	case *array.Uint16:
		return int64(a.Value(i)), nil
	case *array.Uint32:
		return int64(a.Value(i)), nil
	case *array.Uint64:
		v := a.Value(i)
		if v > 1<<63-1 {
			return nil, fmt.Errorf("uint64 value %d does not fit an int64", v)
		}
		return int64(v), nil
	case *array.Float16:
		return float64(a.Value(i).Float32()), nil
	case *array.Float32:
		return float64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.Dictionary:
		return valueAt(a.Dictionary(), a.GetValueIndex(i))
	case *array.List:
		s, e := a.ValueOffsets(i)
		return listValues(a.ListValues(), int(s), int(e))
	case *array.LargeList:
		s, e := a.ValueOffsets(i)
		return listValues(a.ListValues(), int(s), int(e))
	case *array.FixedSizeList:
		n := int(a.DataType().(*arrow.FixedSizeListType).Len())
		off := (a.Data().Offset() + i) * n
		return listValues(a.ListValues(), off, off+n)
	case *array.Map:
		s, e := a.ValueOffsets(i)
		keys, items := a.Keys(), a.Items()
		m := make(map[string]any, e-s)
		for j := int(s); j < int(e); j++ {
			k, err := valueAt(keys, j)
			if err != nil {
				return nil, err
			}
			v, err := valueAt(items, j)
			if err != nil {
				return nil, err
			}
			m[fmt.Sprint(k)] = v
		}
		return m, nil
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		m := make(map[string]any, a.NumField())
		for j := 0; j < a.NumField(); j++ {
			v, err := valueAt(a.Field(j), i)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", st.Field(j).Name, err)
			}
			m[st.Field(j).Name] = v
		}
		return m, nil
	}
	switch a.DataType().ID() {
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64, arrow.DECIMAL128, arrow.DECIMAL256, arrow.DURATION:
		return a.ValueStr(i), nil // as text, e.g. "2024-01-02T03:04:05Z"
	}
	return nil, fmt.Errorf("unsupported type %s", a.DataType())
}

func listValues(vals arrow.Array, s, e int) (any, error) {
	if s < 0 || e < s || e > vals.Len() {
		return nil, fmt.Errorf("list offsets %d..%d out of range 0..%d", s, e, vals.Len())
	}
	out := make([]any, 0, e-s)
	for j := s; j < e; j++ {
		v, err := valueAt(vals, j)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
