package data

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
)

// A table is a parquet file of any schema, read and written as rows of JSON-like values
// (string, bool, int64, float64, []any, map[string]any, nil): the SFT datasets
// (messages, tools, input_ids, loss_mask columns) are tables, not veRL RL rows.

// ReadTableFunc calls fn for every row of the parquet file at path, in order, with the
// row's columns by name. It has the same checks as [ReadParquetFunc] (corrupt files,
// bounded validation) but requires no column. An error from fn is returned as is.
func ReadTableFunc(path string, fn func(i int, row map[string]any) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return readWith(f, st.Size(), path, func(sc *arrow.Schema) (func(arrow.Record, int) (map[string]any, *Error), error) {
		names := make([]string, sc.NumFields())
		for i, fl := range sc.Fields() {
			names[i] = fl.Name
		}
		return func(rec arrow.Record, i int) (map[string]any, *Error) {
			row := make(map[string]any, len(names))
			for c, name := range names {
				v, err := valueAt(rec.Column(c), i)
				if err != nil {
					return nil, &Error{Column: name, Msg: err.Error()}
				}
				row[name] = v
			}
			return row, nil
		}, nil
	}, fn)
}

// WriteTable writes rows to a parquet file at path with the given columns, in that order;
// a row's keys outside columns are an error. The columns' types are inferred from all rows
// as [WriteParquet] infers extra_info's. The file is written next to path and renamed over
// it.
func WriteTable(path string, columns []string, rows []map[string]any) error {
	if len(rows) == 0 {
		return &Error{File: path, Row: -1, Msg: "no rows to write"}
	}
	known := map[string]bool{}
	types := make([]*inferred, len(columns))
	for c, name := range columns {
		known[name] = true
		types[c] = &inferred{}
	}
	for i, r := range rows {
		for k := range r {
			if !known[k] {
				return &Error{File: path, Row: i, Column: k, Msg: "is not one of the table's columns"}
			}
		}
		for c, name := range columns {
			if err := types[c].merge(r[name]); err != nil {
				return &Error{File: path, Row: i, Column: name, Msg: "value " + err.Error()}
			}
		}
	}
	fields := make([]arrow.Field, len(columns))
	for c, name := range columns {
		t, err := types[c].arrowType()
		if err != nil {
			return &Error{File: path, Row: -1, Column: name, Msg: err.Error()}
		}
		fields[c] = arrow.Field{Name: name, Type: t, Nullable: true}
	}
	sc := arrow.NewSchema(fields, nil)
	plan := &writePlan{fieldNames: map[*array.StructBuilder][]string{}}
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(writeBatchRows*8),
		parquet.WithCreatedBy("rlhost host/data"),
		parquet.WithDictionaryDefault(false),
	)
	return writeFile(path, func(f *os.File) error {
		fw, err := pqarrow.NewFileWriter(sc, f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			return &Error{File: path, Row: -1, Msg: "starting the parquet writer", Err: err}
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		defer b.Release()
		for start := 0; start < len(rows); start += writeBatchRows {
			end := min(start+writeBatchRows, len(rows))
			for i := start; i < end; i++ {
				for c, name := range columns {
					if err := plan.appendValue(b.Field(c), rows[i][name]); err != nil {
						return &Error{File: path, Row: i, Column: name, Msg: "value", Err: err}
					}
				}
			}
			rec := b.NewRecord()
			err := fw.WriteBuffered(rec)
			rec.Release()
			if err != nil {
				return &Error{File: path, Row: -1, Msg: "writing rows", Err: err}
			}
		}
		if err := fw.Close(); err != nil {
			return &Error{File: path, Row: -1, Msg: "finishing the parquet file", Err: err}
		}
		return nil
	})
}

// writeFile runs write on a temporary file next to path (write closes it) and renames it
// over path; on an error the temporary file is removed.
func writeFile(path string, write func(f *os.File) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if err := write(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("data: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("data: %w", err)
	}
	return nil
}
