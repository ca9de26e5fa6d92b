package model

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestActsServeSmallerBatches: activations allocated for a larger batch, and used by one
// first (so their buffers hold its values), give a smaller batch the log-probs, entropies
// and gradients that activations of its own size give: padded (fewer sequences, shorter T)
// and packed (fewer rows), full and ScoredOnly, with and without LoRA adapters, on every tiny
// family. A batch larger than the activations is refused.
func TestActsServeSmallerBatches(t *testing.T) {
	for _, name := range families {
		for _, scored := range []bool{false, true} {
			for _, lora := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s scored-only %v lora %v", name, scored, lora), func(t *testing.T) {
					m := newTiny(t, name)
					if lora {
						if err := m.EnableLoRA(LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"all-linear"}, Seed: 3}); err != nil {
							t.Fatal(err)
						}
						// B starts at zero: make the adapters' path non-zero
						for i := range m.LoRA().Data {
							m.LoRA().Data[i] += float32(i%7-3) * 0.01
						}
						m.LoRA().Changed()
					}
					testActsServeSmaller(t, m, scored)
				})
			}
		}
	}
}

func testActsServeSmaller(t *testing.T, m *Model, scored bool) {
	V := m.Config.V
	// batch fills a batch's tokens, targets and loss gradients from seed.
	batch := func(b Batch, seed int) (Batch, []float32, []float32) {
		N := b.B * b.T
		b.Tokens, b.Targets, b.ScoredOnly = make([]int32, N), make([]int32, N), scored
		dl, de := make([]float32, N), make([]float32, N)
		for n := range b.Tokens {
			b.Tokens[n] = int32((n*31 + seed*17 + 5) % V)
			b.Targets[n] = -1
			if n%3 != 0 {
				b.Targets[n] = int32((n*13 + seed*7 + 1) % V)
				dl[n], de[n] = float32(n%5)-2, -0.1
			}
		}
		return b, dl, de
	}
	run := func(a *Acts, b Batch, dl, de []float32) (logp, ent, grads []float32) {
		t.Helper()
		if err := m.Forward(a, b); err != nil {
			t.Fatal(err)
		}
		logp, ent = slices.Clone(a.Logp), slices.Clone(a.Entropy)
		m.ZeroGrads()
		if err := m.Backward(a, dl, de); err != nil {
			t.Fatal(err)
		}
		_, g := m.Trainable()
		return logp, ent, slices.Clone(g)
	}
	for _, tc := range []struct {
		what       string
		small, big Batch
		own, large func() *Acts
	}{
		{"padded", Batch{B: 2, T: 6}, Batch{B: 3, T: 9},
			func() *Acts { return m.NewActs(2, 6) }, func() *Acts { return m.NewActs(3, 9) }},
		{"packed", Batch{B: 1, T: 14, Lengths: []int{6, 1, 7}}, Batch{B: 1, T: 25, Lengths: []int{9, 10, 6}},
			func() *Acts { return m.NewPackedActs(14) }, func() *Acts { return m.NewPackedActs(25) }},
	} {
		sb, sdl, sde := batch(tc.small, 1)
		wl, we, wg := run(tc.own(), sb, sdl, sde)
		large := tc.large()
		bb, bdl, bde := batch(tc.big, 2)
		run(large, bb, bdl, bde)
		for round := 0; round < 2; round++ { // smaller then larger again then smaller
			l, e, g := run(large, sb, sdl, sde)
			if len(l) != len(wl) || len(e) != len(we) {
				t.Fatalf("%s: Logp %d, Entropy %d values, want %d", tc.what, len(l), len(e), len(wl))
			}
			for _, c := range []struct {
				name      string
				got, want []float32
			}{{"logp", l, wl}, {"entropy", e, we}, {"grads", g, wg}} {
				if err := maxRelErr(c.got, c.want); err > 1e-6 || math.IsNaN(err) {
					t.Errorf("%s round %d: %s through the larger activations differ: max rel %.3g", tc.what, round, c.name, err)
				}
			}
			run(large, bb, bdl, bde)
		}
	}
	// too large: more rows, or (padded) a longer T
	for _, tc := range []struct {
		a    *Acts
		b    Batch
		want string
	}{
		{m.NewActs(2, 6), Batch{B: 3, T: 6}, "at most 12 rows of at most 6 positions"},
		{m.NewActs(2, 6), Batch{B: 1, T: 8}, "at most 12 rows of at most 6 positions"},
		{m.NewPackedActs(14), Batch{B: 1, T: 15, Lengths: []int{15}}, "packed batch of 15 rows, activations are for at most 14"},
	} {
		b, _, _ := batch(tc.b, 3)
		if err := m.Forward(tc.a, b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%dx%d: error %v, want %q", b.B, b.T, err, tc.want)
		}
	}
}

// TestValuePackedMatchesPadded: the critic's values and gradients (decoder and head) of
// sequences packed end to end equal those of the same sequences right padded, through a
// ValueActsCache that serves both kinds.
func TestValuePackedMatchesPadded(t *testing.T) {
	for _, name := range families {
		t.Run(name, func(t *testing.T) {
			vm := newTinyValue(t, name)
			vm.Head[0], vm.Head[3] = 0.4, -0.3
			V := vm.Body.Config.V
			lengths := []int{5, 9, 1, 7}
			B, T, N := len(lengths), 9, 22
			ptok, pdv := make([]int32, B*T), make([]float32, B*T)
			tok, dv := make([]int32, N), make([]float32, N)
			row := 0
			for b, n := range lengths {
				for t := 0; t < n; t++ {
					id, g := int32((b*31+t*17+3)%V), float32((b+t)%5)-2
					ptok[b*T+t], tok[row] = id, id
					pdv[b*T+t], dv[row] = g, g
					row++
				}
			}
			cache := NewValueActsCache(vm, 4)
			run := func(b Batch, d []float32) (vals, grads []float32) {
				t.Helper()
				a := cache.For(b)
				if err := vm.Forward(a, b); err != nil {
					t.Fatal(err)
				}
				vals = slices.Clone(a.Values[:b.B*b.T])
				vm.ZeroGrads()
				if err := vm.Backward(a, d); err != nil {
					t.Fatal(err)
				}
				return vals, append(slices.Clone(vm.Body.Grads.Data), vm.HeadGrad...)
			}
			pv, pg := run(Batch{B: B, T: T, Tokens: ptok, Targets: make([]int32, B*T)}, pdv)
			for round := 0; round < 2; round++ {
				v, g := run(Batch{B: 1, T: N, Tokens: tok, Targets: make([]int32, N), Lengths: lengths}, dv)
				want := make([]float32, N)
				row := 0
				for b, n := range lengths {
					for t := 0; t < n; t++ {
						want[row] = pv[b*T+t]
						row++
					}
				}
				if err := maxRelErr(v, want); err > 1e-5 || math.IsNaN(err) {
					t.Errorf("round %d: packed values differ from padded: max rel %.3g", round, err)
				}
				if err := maxRelErr(g, pg); err > 1e-5 || math.IsNaN(err) {
					t.Errorf("round %d: packed gradients differ from padded: max rel %.3g", round, err)
				}
			}
		})
	}
}
