package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// roots makes $RLHOST_HOME, the cache folder and a working directory, each empty, and enters
// the working directory.
func roots(t *testing.T) (home, cache, cwd string) {
	home, xdg, cwd := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("RLHOST_HOME", home)
	t.Setenv("XDG_CACHE_HOME", xdg)
	t.Chdir(cwd)
	return home, filepath.Join(xdg, "rlhost"), cwd
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The default model is looked up in $RLHOST_HOME, then the cache folder, then the current
// directory; the first that has it wins.
func TestResolveDefaultModelSearchOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string // roots that hold the model: home, cache, cwd
		want string   // the root it is found in
	}{
		{"cwd only", []string{"cwd"}, "cwd"},
		{"cache only", []string{"cache"}, "cache"},
		{"cache and cwd", []string{"cache", "cwd"}, "cache"},
		{"everywhere", []string{"home", "cache", "cwd"}, "home"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, cache, cwd := roots(t)
			dir := map[string]string{"home": home, "cache": cache, "cwd": cwd}
			for _, r := range tc.in {
				touch(t, filepath.Join(dir[r], DefaultModelPath))
				touch(t, filepath.Join(dir[r], "data", "gsm8k", "train.parquet"))
				touch(t, filepath.Join(dir[r], "data", "gsm8k", "test.parquet"))
			}
			c := Default()
			if err := c.ResolvePaths(); err != nil {
				t.Fatal(err)
			}
			root := dir[tc.want]
			if tc.want == "cwd" {
				root = "" // found as the relative path it is
			}
			if got, want := c.ActorRolloutRef.Model.Path, filepath.Join(root, DefaultModelPath); got != want {
				t.Errorf("model %s, want %s", got, want)
			}
			if got, want := c.Data.TrainFiles[0], filepath.Join(root, "data", "gsm8k", "train.parquet"); got != want {
				t.Errorf("train file %s, want %s", got, want)
			}
			if got, want := c.Data.ValFiles[0], filepath.Join(root, "data", "gsm8k", "test.parquet"); got != want {
				t.Errorf("val file %s, want %s", got, want)
			}
		})
	}
}

// Nothing installed: the error names the key, every folder searched and `make model`; a
// missing dataset names the preprocess command that makes it.
func TestResolveMissingModelAndData(t *testing.T) {
	home, cache, _ := roots(t)
	c := Default()
	c.Task.Name = StringList{"gsm8k"}
	err := c.ResolvePaths()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
	for _, want := range []string{"actor_rollout_ref.model.path", "make model", filepath.Join(home, DefaultModelPath),
		filepath.Join(cache, DefaultModelPath), "./" + DefaultModelPath} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing model: %q lacks %q", err, want)
		}
	}
	touch(t, filepath.Join(cache, DefaultModelPath))
	err = c.ResolvePaths()
	for _, want := range []string{"data.train_files", "rlhost preprocess --task gsm8k --input RAW_DIR --output-dir data/gsm8k",
		filepath.Join(home, "data", "gsm8k", "train.parquet")} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing data: %v lacks %q", err, want)
		}
	}
	// A path the user set is taken as it is, relative to the current directory.
	c = Default()
	c.Task.Name = StringList{"arith"}
	c.ActorRolloutRef.Model.Path = "mine.gguf"
	if err := c.ResolvePaths(); err == nil || !strings.Contains(err.Error(), "mine.gguf: no such file") {
		t.Errorf("missing model path that was set: %v", err)
	}
	touch(t, "mine.gguf")
	touch(t, filepath.Join("d", "train.parquet"))
	c.Data.TrainFiles, c.Data.ValFiles = StringList{"d/train.parquet"}, StringList{"d/test.parquet"}
	err = c.ResolvePaths()
	if err == nil || !strings.Contains(err.Error(), "data.val_files: d/test.parquet not found") ||
		!strings.Contains(err.Error(), "rlhost preprocess --task arith --input RAW_DIR --output-dir d") {
		t.Errorf("missing val file: %v", err)
	}
	touch(t, filepath.Join("d", "test.parquet"))
	c.Data.TrainFiles = StringList{"d/train.parquet", "d/*.parquet"} // globs are host/data's to expand
	if err := c.ResolvePaths(); err != nil || c.ActorRolloutRef.Model.Path != "mine.gguf" || c.Data.TrainFiles[0] != "d/train.parquet" {
		t.Errorf("paths that exist: %v, %s %v", err, c.ActorRolloutRef.Model.Path, c.Data.TrainFiles)
	}
}
