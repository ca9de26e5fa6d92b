package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/plugins/local"
)

// runModelPath returns the model path in the configuration of the last run recorded in st
// (actor_rollout_ref.model.path), "" when the store has none.
func runModelPath(ctx context.Context, st *local.Store) string {
	runs, err := st.Runs(ctx)
	if err != nil {
		return ""
	}
	for i := len(runs) - 1; i >= 0; i-- {
		var cfg struct {
			ActorRolloutRef struct {
				Model struct {
					Path string `json:"path"`
				} `json:"model"`
			} `json:"actor_rollout_ref"`
		}
		if json.Unmarshal([]byte(runs[i].Config), &cfg) == nil && cfg.ActorRolloutRef.Model.Path != "" {
			return cfg.ActorRolloutRef.Model.Path
		}
	}
	return ""
}

// setRunDecoder gives st a decoder of turns stored as token ids (runs with token2text off):
// the tokenizer of path (the --tokenizer flag), else of the run's own model. The tokenizer
// is loaded on the first turn that needs it; when it cannot be, warn says why once and the
// turns show their ids.
func setRunDecoder(ctx context.Context, st *local.Store, path string, warn io.Writer) {
	from := "--tokenizer"
	if path == "" {
		path, from = runModelPath(ctx, st), "the run's actor_rollout_ref.model.path"
	}
	var once sync.Once
	var tk *tokenizer.Tokenizer
	st.SetDecoder(func(ids []int) string {
		once.Do(func() {
			var err error
			switch {
			case path == "":
				err = fmt.Errorf("the store records no model path")
			default:
				if _, err = os.Stat(path); err == nil {
					tk, err = tokenizer.Load(path)
				}
			}
			if err != nil {
				fmt.Fprintf(warn, "traces: turns stored as token ids are shown as ids: cannot load the tokenizer of %s (%s): %v; "+
					"pass --tokenizer MODEL_PATH\n", orNone(path), from, err)
			}
		})
		if tk == nil {
			b, _ := json.Marshal(ids)
			return string(b)
		}
		return tk.Decode(ids, false)
	})
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
