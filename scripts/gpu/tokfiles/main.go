// Command tokfiles writes the tokenizer of a GGUF model file as Hugging Face
// tokenizer files (tokenizer.json, tokenizer_config.json with the special
// tokens and the chat template), for the GPU proof bundle (make
// gpu-proof-bundle): the proof builds checkpoints with random weights on the
// GPU machine and needs only the tokenizer of the real model.
//
//	go run ./scripts/gpu/tokfiles MODEL.gguf OUTDIR
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rlhost/rlhost/gpu/gguf"
	"github.com/rlhost/rlhost/gpu/tokenizer"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: tokfiles MODEL.gguf OUTDIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "tokfiles:", err)
		os.Exit(1)
	}
}

func run(model, out string) error {
	f, err := gguf.Open(model)
	if err != nil {
		return err
	}
	defer f.Close()
	tj, cfg, err := tokenizer.FromGGUF(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "tokenizer.json"), tj, 0o644); err != nil {
		return err
	}
	tc := map[string]string{"bos_token": cfg.BOS, "eos_token": cfg.EOS, "pad_token": cfg.Pad, "unk_token": cfg.Unk,
		"chat_template": cfg.ChatTemplate}
	for k, v := range tc {
		if v == "" {
			delete(tc, k)
		}
	}
	b, err := json.MarshalIndent(tc, "", "  ")
	if err != nil {
		return err
	}
	// the tokenizer must load back as it is
	if err := os.WriteFile(filepath.Join(out, "tokenizer_config.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if _, err := tokenizer.Load(out); err != nil {
		return fmt.Errorf("the files written to %s do not load: %w", out, err)
	}
	return nil
}
