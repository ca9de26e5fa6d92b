package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultModelPath is the default actor_rollout_ref.model.path: SmolLM2-135M-Instruct as a
// Q4_1 GGUF, which `make model` installs. Like the default data files it is a relative path
// looked up in SearchRoots, so that rlhost finds it from any directory.
const DefaultModelPath = "models/SmolLM2-135M-Instruct.Q4_1.gguf"

// SearchRoots are the folders a default model or data path is looked up in, in order:
// $RLHOST_HOME when it is set, the cache folder ($XDG_CACHE_HOME/rlhost, else
// ~/.cache/rlhost, where `make model` installs the model), then the current directory.
func SearchRoots() []string {
	var roots []string
	if h := os.Getenv("RLHOST_HOME"); h != "" {
		roots = append(roots, h)
	}
	if c, err := os.UserCacheDir(); err == nil {
		roots = append(roots, filepath.Join(c, "rlhost"))
	}
	return append(roots, ".")
}

// Find returns the first of SearchRoots()/rel that exists, and the paths it tried. An
// absolute rel is returned as it is when it exists.
func Find(rel string) (string, []string, bool) {
	if filepath.IsAbs(rel) {
		_, err := os.Stat(rel)
		return rel, []string{rel}, err == nil
	}
	var tried []string
	for _, root := range SearchRoots() {
		p := filepath.Join(root, rel)
		if root == "." {
			p = "./" + filepath.ToSlash(filepath.Clean(rel))
		}
		tried = append(tried, p)
		if _, err := os.Stat(p); err == nil {
			return filepath.Join(root, rel), tried, true
		}
	}
	return "", tried, false
}

// DefaultModel finds DefaultModelPath in SearchRoots, or returns an error that names the
// paths it tried and `make model`.
func DefaultModel() (string, error) {
	p, tried, ok := Find(DefaultModelPath)
	if !ok {
		return "", &notFoundError{fmt.Sprintf("actor_rollout_ref.model.path: the default model %s is not installed (looked for %s): "+
			"run `make model` in the rlhost checkout, or set actor_rollout_ref.model.path (train, generate: --model) to a GGUF file or a model directory",
			filepath.Base(DefaultModelPath), strings.Join(tried, ", "))}
	}
	return p, nil
}

// ErrNotFound is returned (wrapped) by ResolvePaths for a model or data file that is not there.
var ErrNotFound = errors.New("config: file not found")

// ResolvePaths finds the model and the data files and sets their keys to the paths found, or
// returns an error that names the key, where it looked and the command that makes the file.
//
// A key left at its default (actor_rollout_ref.model.path = DefaultModelPath, data.train_files
// and data.val_files = data/gsm8k/...) is looked up in SearchRoots; a value set in a file, an
// override or a flag is a path relative to the current directory, used as it is.
func (c *Config) ResolvePaths() error {
	def := Default()
	mp := &c.ActorRolloutRef.Model.Path
	if *mp == DefaultModelPath {
		p, err := DefaultModel()
		if err != nil {
			return err
		}
		*mp = p
	} else if _, err := os.Stat(*mp); err != nil {
		return &notFoundError{fmt.Sprintf("actor_rollout_ref.model.path: %v (the default model, %s, is installed by `make model`)",
			pathErr(err), DefaultModelPath)}
	}
	for _, list := range []struct {
		key  string
		got  StringList
		def  StringList
		set  func(StringList)
		need bool
	}{
		{"data.train_files", c.Data.TrainFiles, def.Data.TrainFiles, func(l StringList) { c.Data.TrainFiles = l }, !c.Trainer.ValOnly},
		{"data.val_files", c.Data.ValFiles, def.Data.ValFiles, func(l StringList) { c.Data.ValFiles = l }, true},
	} {
		if !list.need {
			continue
		}
		out := make(StringList, len(list.got))
		for i, f := range list.got {
			out[i] = f
			if strings.ContainsAny(f, "*?[") {
				continue // a glob: host/data.ExpandFiles reports a pattern that matches nothing
			}
			isDefault := i < len(list.def) && f == list.def[i]
			if isDefault {
				if p, _, ok := Find(f); ok {
					out[i] = p
					continue
				}
			} else if _, err := os.Stat(f); err == nil {
				continue
			}
			where := f
			if isDefault {
				_, tried, _ := Find(f)
				where = strings.Join(tried, ", ")
			}
			return &notFoundError{fmt.Sprintf("%s: %s not found (looked for %s): %s", list.key, f, where, makeData(firstOr(c.TaskNames(), ""), f))}
		}
		list.set(out)
	}
	return nil
}

// makeData says how to make the dataset file f of a task.
func makeData(taskName, f string) string {
	if taskName == "" {
		taskName = "TASK"
	}
	return fmt.Sprintf("make it with `rlhost preprocess --task %s --input RAW_DIR --output-dir %s` "+
		"(RAW_DIR: the task's raw files; for gsm8k, `make data/gsm8k/train.parquet` in the rlhost checkout does it)",
		taskName, filepath.Dir(f))
}

func pathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return "config: " + e.msg }
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// firstOr is the first of xs, or def when there is none.
func firstOr(xs []string, def string) string {
	if len(xs) == 0 {
		return def
	}
	return xs[0]
}
