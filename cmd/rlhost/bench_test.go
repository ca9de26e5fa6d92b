package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	hostplugin "github.com/rlhost/rlhost/host/plugin"
)

// BenchmarkPreprocessGSM8K is `rlhost preprocess --task gsm8k` on the full GSM8K splits
// (7,473 train + 1,319 test records), end to end: plugin start, JSONL reading, the Preprocess
// stream through the plugin, and the parquet writes. It needs ../shared/data/gsm8k (or
// RLHOST_GSM8K_DIR).
func BenchmarkPreprocessGSM8K(b *testing.B) {
	in := os.Getenv("RLHOST_GSM8K_DIR")
	if in == "" {
		in = filepath.Join("..", "..", "..", "shared", "data", "gsm8k")
	}
	if _, err := os.Stat(filepath.Join(in, "train.jsonl")); err != nil {
		b.Skipf("GSM8K not found at %s (set RLHOST_GSM8K_DIR)", in)
	}
	out := b.TempDir()
	for i := 0; i < b.N; i++ {
		if err := preprocess(context.Background(), "gsm8k", in, out, io.Discard, hostplugin.Options{}, hostplugin.Timeouts{}); err != nil {
			b.Fatal(err)
		}
	}
}
