package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rlhost/rlhost/host/data"
	hostplugin "github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/progress"
	"github.com/rlhost/rlhost/sdk/task"
	"github.com/urfave/cli/v2"
)

func preprocessCommand() *cli.Command {
	return &cli.Command{
		Name:  "preprocess",
		Usage: "turn a task's raw data into veRL-schema parquet files (train.parquet, test.parquet, ...)",
		Description: "The task plugin says which files it reads (e.g. train.jsonl and test.jsonl) and turns each\n" +
			"record into a dataset row; rlhost writes one parquet file per split into --output-dir.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "task", Required: true, Usage: "task plugin name (rlhost-task-NAME) or path"},
			&cli.StringFlag{Name: "input", Usage: "directory with the raw files (default: ../shared/data/TASK)"},
			&cli.StringFlag{Name: "output-dir", Required: true, Usage: "where to write SPLIT.parquet"},
		},
		Action: func(c *cli.Context) error {
			input := c.String("input")
			if input == "" {
				input = filepath.Join("..", "shared", "data", filepath.Base(c.String("task")))
			}
			return preprocess(c.Context, c.String("task"), input, c.String("output-dir"), c.App.ErrWriter, hostplugin.Options{Logger: logger(c)})
		},
	}
}

// readJSONL reads a file of one JSON object per line (blank lines skipped) and returns the
// lines' text; a line that is not a JSON object is an error naming the file and line.
func readJSONL(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for line := 1; len(b) > 0; line++ {
		var text []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			text, b = b[:i], b[i+1:]
		} else {
			text, b = b, nil
		}
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			continue
		}
		if text[0] != '{' || !json.Valid(text) {
			_, derr := task.DecodeObject(string(text))
			return nil, fmt.Errorf("%s:%d: not a JSON object: %v", path, line, derr)
		}
		out = append(out, string(text))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no records (the file is empty)", path)
	}
	return out, nil
}

func preprocess(ctx context.Context, taskName, input, outDir string, progressOut io.Writer, opts hostplugin.Options) error {
	tk, err := hostplugin.OpenTask(ctx, taskName, nil, opts)
	if err != nil {
		return err
	}
	defer tk.Close()
	if st, err := os.Stat(input); err != nil || !st.IsDir() {
		return fmt.Errorf("preprocess: input directory %s not found: pass --input DIR with the task's raw files", input)
	}
	info := tk.CachedInfo()
	if !info.Has(task.FeaturePreprocess) {
		return fmt.Errorf("preprocess: task %s has no preprocessor; give its parquet files to train directly", info.Name)
	}
	if len(info.DefaultInputs) == 0 {
		return fmt.Errorf("preprocess: task %s does not say which input files it reads", info.Name)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	for _, in := range info.DefaultInputs {
		path := filepath.Join(input, in.Name)
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("preprocess: task %s reads %s for split %q, which is missing: %v", info.Name, path, in.Split, err)
		}
		start := time.Now()
		records, err := readJSONL(path)
		if err != nil {
			return fmt.Errorf("preprocess: %w", err)
		}
		bar := progress.New(progressOut, "preprocess "+in.Split, int64(len(records)), "rows")
		rows := make([]*data.Row, len(records))
		sftRows := make([]map[string]any, len(records))
		tools := toolsJSON(info)
		var skipped []string
		err = tk.PreprocessStream(ctx, func(yield func(task.Record) error) error {
			for i, r := range records {
				if err := yield(task.Record{Index: int64(i), Split: in.Split, Raw: r}); err != nil {
					return err
				}
			}
			return nil
		}, func(index int64, row task.Row, reason string) error {
			if index < 0 || index >= int64(len(rows)) || rows[index] != nil {
				return fmt.Errorf("the plugin answered for record %d, which was not sent or was answered already", index)
			}
			if reason != "" {
				skipped = append(skipped, fmt.Sprintf("line %d: %s", index+1, reason))
			} else {
				sftRows[index] = takeSFTRow(&row, tools)
				r := dataRow(row)
				rows[index] = &r
			}
			bar.Add(1)
			return nil
		})
		bar.Finish()
		if err != nil {
			return fmt.Errorf("preprocess %s: %w", path, err)
		}
		// Every row the plugin gave is checked as rlhost train's loader and the parquet
		// writer will take it (data.RowChecker), in record order; a bad one is skipped.
		byTask := len(skipped)
		var check data.RowChecker
		out := make([]data.Row, 0, len(rows))
		for i, r := range rows {
			if r == nil {
				continue
			}
			if err := check.Check(*r); err != nil {
				skipped = append(skipped, fmt.Sprintf("line %d: invalid row: %s", i+1, strings.TrimPrefix(err.Error(), "data: ")))
				sftRows[i] = nil
				continue
			}
			out = append(out, *r)
		}
		sort.SliceStable(skipped, func(a, b int) bool { return skippedLine(skipped[a]) < skippedLine(skipped[b]) })
		if len(out) == 0 {
			return fmt.Errorf("preprocess %s: all %d records were skipped (%d by the task, %d invalid rows); the first: %s",
				path, len(records), byTask, len(skipped)-byTask, skipped[0])
		}
		dst := filepath.Join(outDir, in.Split+".parquet")
		if err := data.WriteParquet(dst, out); err != nil {
			return fmt.Errorf("preprocess: %w", err)
		}
		fmt.Fprintf(progressOut, "%s: %d rows -> %s (%d skipped: %d by the task, %d invalid rows) in %s\n", in.Split, len(out), dst,
			len(skipped), byTask, len(skipped)-byTask, time.Since(start).Round(time.Millisecond))
		if err := writeSFTSplit(outDir, in.Split, sftRows, progressOut); err != nil {
			return err
		}
		for i, s := range skipped {
			if i == 5 {
				fmt.Fprintf(progressOut, "  ... and %d more skipped\n", len(skipped)-5)
				break
			}
			fmt.Fprintln(progressOut, "  skipped", s)
		}
	}
	return nil
}

// skippedLine is the record line of a skipped entry ("line N: why").
func skippedLine(s string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(s, ":", 2)[0], "line "))
	return n
}
