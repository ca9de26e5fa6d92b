package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlhost/rlhost/gpu"
)

// TestFirstK: firstK then a sort gives the first k of a full sort, on lists
// with many ties (order by id among them), for k from 1 to n.
func TestFirstK(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.IntN(300)
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.IntN(1 + r.IntN(40))) // few distinct values: ties
		}
		order := func(a, b int) int {
			if logits[a] != logits[b] {
				if logits[a] > logits[b] {
					return -1
				}
				return 1
			}
			return a - b
		}
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		r.Shuffle(n, func(i, j int) { all[i], all[j] = all[j], all[i] })
		want := slices.Clone(all)
		slices.SortFunc(want, order)
		k := 1 + r.IntN(n)
		got := firstK(slices.Clone(all), k, order)
		slices.SortFunc(got, order)
		if !slices.Equal(got, want[:k]) {
			t.Fatalf("n=%d k=%d: firstK %v, want %v", n, k, got, want[:k])
		}
	}
}

// TestSampleRowTopKFlat: with top-k on a flat row (every id a candidate)
// the token is the one the full sort gives: the draw walks the K first in
// order, so U just below j/K picks the j-th of them.
func TestSampleRowTopKFlat(t *testing.T) {
	const V, K = 5000, 7
	r := rand.New(rand.NewPCG(5, 6))
	row := make([]float32, V)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 1e-3)
	}
	ids := make([]int, V)
	for i := range ids {
		ids[i] = i
	}
	slices.SortFunc(ids, func(a, b int) int {
		if row[a] != row[b] {
			if row[a] > row[b] {
				return -1
			}
			return 1
		}
		return a - b
	})
	// the first K's shares of their mass (temperature 1)
	m := row[ids[0]]
	var e [K]float64
	var total float64
	for j := range e {
		e[j] = math.Exp(float64(row[ids[j]] - m))
		total += e[j]
	}
	cum := 0.0
	for j := 0; j < K; j++ {
		mid := (cum + e[j]/2) / total // a draw inside the j-th's share
		cum += e[j]
		tok, _ := SampleRow(row, gpu.SampleParams{Temperature: 1, TopK: K, U: mid})
		if int(tok) != ids[j] {
			t.Fatalf("U=%.4f: token %d, want %d (the %d-th by logit)", mid, tok, ids[j], j)
		}
	}
}
