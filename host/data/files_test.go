package data

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExpandFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b/train.parquet", "a/train.parquet", "a/test.parquet", "c/x.txt"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "d.parquet"), 0o755) // a directory is never a match
	j := func(s string) string { return filepath.Join(dir, s) }
	got, err := ExpandFiles("data.train_files", []string{j("*/train.parquet"), j("a/test.parquet"), j("a/train.parquet"), "plain.parquet"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{j("a/train.parquet"), j("b/train.parquet"), j("a/test.parquet"), "plain.parquet"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ExpandFiles = %q, want %q", got, want)
	}
	for _, tc := range []struct{ entry, want string }{
		{j("*.parquet"), `data.val_files[1] "` + j("*.parquet") + `" matches no file`},
		{j("[a.parquet"), "bad glob pattern"},
	} {
		_, err := ExpandFiles("data.val_files", []string{j("a/test.parquet"), tc.entry})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.entry, err, tc.want)
		}
	}
}
