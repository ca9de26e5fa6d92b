// Command gendata writes the arith task's raw data: train.jsonl and test.jsonl with
// two-operand problems {"a": 7, "op": "+", "b": 12}, drawn with a fixed seed.
//
//	go run ./gendata -out data/arith
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "data/arith", "output directory")
	train := flag.Int("train", 2000, "training problems")
	test := flag.Int("test", 200, "test problems")
	max := flag.Int("max", 20, "operands of + and - are in [0, max); of * in [0, 13)")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r := rand.New(rand.NewPCG(*seed, 0))
	for split, n := range map[string]int{"train": *train, "test": *test} {
		f, err := os.Create(filepath.Join(*out, split+".jsonl"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		enc := json.NewEncoder(f)
		for i := 0; i < n; i++ {
			op := []string{"+", "-", "*"}[r.IntN(3)]
			a, b := r.IntN(*max), r.IntN(*max)
			if op == "*" {
				a, b = r.IntN(13), r.IntN(13)
			}
			if err := enc.Encode(map[string]any{"a": a, "op": op, "b": b}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
