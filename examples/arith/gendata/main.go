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
	if err := generate(*out, *train, *test, *max, *seed); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// generate writes train.jsonl then test.jsonl into dir from one random stream: the
// splits are drawn in that fixed order, so a seed always gives the same files.
func generate(dir string, train, test, max int, seed uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(seed, 0))
	for _, s := range []struct {
		name string
		n    int
	}{{"train", train}, {"test", test}} {
		f, err := os.Create(filepath.Join(dir, s.name+".jsonl"))
		if err != nil {
			return err
		}
		enc := json.NewEncoder(f)
		for i := 0; i < s.n; i++ {
			op := []string{"+", "-", "*"}[r.IntN(3)]
			a, b := r.IntN(max), r.IntN(max)
			if op == "*" {
				a, b = r.IntN(13), r.IntN(13)
			}
			if err := enc.Encode(map[string]any{"a": a, "op": op, "b": b}); err != nil {
				f.Close()
				return err
			}
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
