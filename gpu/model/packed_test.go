package model

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
)

// TestPackedMatchesPadded: sequences of different lengths packed end to end
// (Batch.Lengths) give the log-probs, entropies and parameter gradients that
// the same sequences give right-padded in a B x T batch, full and
// ScoredOnly, on every tiny model family (GQA included).
func TestPackedMatchesPadded(t *testing.T) {
	for _, name := range families {
		for _, scored := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s scored-only %v", name, scored), func(t *testing.T) {
				testPackedMatchesPadded(t, newTiny(t, name), scored)
			})
		}
	}
}

func testPackedMatchesPadded(t *testing.T, m *Model, scored bool) {
	lengths := []int{5, 9, 1, 7}
	B, T, V := len(lengths), 9, m.Config.V
	N := 0
	for _, n := range lengths {
		N += n
	}
	// padded: sequence b in row b, padding tokens 0 with target -1
	ptok, ptgt := make([]int32, B*T), make([]int32, B*T)
	pdl, pde := make([]float32, B*T), make([]float32, B*T)
	// packed: the same tokens end to end
	tok, tgt := make([]int32, N), make([]int32, N)
	dl, de := make([]float32, N), make([]float32, N)
	row := 0
	for b, n := range lengths {
		for t := 0; t < T; t++ {
			ptgt[b*T+t] = -1
		}
		for t := 0; t < n; t++ {
			id, target := int32((b*31+t*17+3)%V), int32(-1)
			if t >= 1 && t < n-1 {
				target = int32((b*13 + t*7 + 1) % V)
			}
			ptok[b*T+t], tok[row] = id, id
			ptgt[b*T+t], tgt[row] = target, target
			if target >= 0 {
				g, e := float32((b+t)%5)-2, float32(-0.1)
				pdl[b*T+t], dl[row] = g, g
				pde[b*T+t], de[row] = e, e
			}
			row++
		}
	}
	run := func(a *Acts, b Batch, dlogp, dent []float32) (logp, ent, grads []float32) {
		t.Helper()
		if err := m.Forward(a, b); err != nil {
			t.Fatal(err)
		}
		logp, ent = slices.Clone(a.Logp), slices.Clone(a.Entropy)
		m.ZeroGrads()
		if err := m.Backward(a, dlogp, dent); err != nil {
			t.Fatal(err)
		}
		return logp, ent, slices.Clone(m.Grads.Data)
	}
	pl, pe, pg := run(m.NewActs(B, T), Batch{B: B, T: T, Tokens: ptok, Targets: ptgt, ScoredOnly: scored}, pdl, pde)
	packed := m.NewPackedActs(N)
	for round := 0; round < 2; round++ { // the activations are reused
		l, e, g := run(packed, Batch{B: 1, T: N, Tokens: tok, Targets: tgt, ScoredOnly: scored, Lengths: lengths}, dl, de)
		// the packed rows against their padded rows
		wl, we := make([]float32, N), make([]float32, N)
		row := 0
		for b, n := range lengths {
			for t := 0; t < n; t++ {
				wl[row], we[row] = pl[b*T+t], pe[b*T+t]
				if scored && tgt[row] < 0 {
					we[row] = 0
				}
				row++
			}
		}
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"logp", l, wl}, {"entropy", e, we}, {"grads", g, pg}} {
			if err := maxRelErr(c.got, c.want); err > 1e-5 || math.IsNaN(err) {
				t.Errorf("round %d: packed %s differ from the padded batch's: max rel %.3g", round, c.what, err)
			}
		}
	}
}

// TestPackedBatchErrors: a packed batch and padded activations (or the
// reverse), and lengths that do not cover the rows, are refused.
func TestPackedBatchErrors(t *testing.T) {
	m := newTiny(t, families[0])
	tok, tgt := make([]int32, 6), make([]int32, 6)
	for _, tc := range []struct {
		packed bool
		b      Batch
		err    string
	}{
		{false, Batch{B: 1, T: 6, Tokens: tok, Targets: tgt, Lengths: []int{3, 3}}, "go together"},
		{true, Batch{B: 1, T: 6, Tokens: tok, Targets: tgt}, "go together"},
		{true, Batch{B: 1, T: 6, Tokens: tok, Targets: tgt, Lengths: []int{3, 2}}, "summing to 5"},
		{true, Batch{B: 1, T: 6, Tokens: tok, Targets: tgt, Lengths: []int{6, 0}}, "sequence 1 has length 0"},
	} {
		a := m.NewActs(1, 6)
		if tc.packed {
			a = m.NewPackedActs(6)
		}
		err := m.Forward(a, tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("packed acts %v, lengths %v: error %v, want %q", tc.packed, tc.b.Lengths, err, tc.err)
		}
	}
}

// fusedAttentionCPU is gpu/cpu asking for the fused attention ops only, as
// the CUDA backend does (gpu.FusedAttentionOnly).
type fusedAttentionCPU struct{ gpu.Backend }

func (fusedAttentionCPU) FusedAttentionOnly() bool { return true }

// TestFusedAttentionPadded: on a backend that asks for the fused attention
// ops only, right-padded batches run through AttentionVarlen* (every row one
// sequence of T tokens, no [NH,T,T] scratch allocated) and give the
// log-probs, entropies and gradients of the padded ops, full and
// ScoredOnly, with the activations reused for a smaller batch (the
// cumulative lengths re-uploaded).
func TestFusedAttentionPadded(t *testing.T) {
	for _, name := range families {
		for _, scored := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s scored-only %v", name, scored), func(t *testing.T) {
				ck := loadCheckpoint(t, filepath.Join("testdata", name))
				ref, err := New(cpu.New(), ck)
				if err != nil {
					t.Fatal(err)
				}
				fused, err := New(fusedAttentionCPU{cpu.New()}, ck)
				if err != nil {
					t.Fatal(err)
				}
				ra, fa := ref.NewActs(4, 9), fused.NewActs(4, 9)
				if fa.attBuf != nil || !fa.fused || fa.layers[0].lse == nil {
					t.Fatalf("fused activations: attention scratch %d floats, fused %v", len(fa.attBuf), fa.fused)
				}
				if ra.attBuf == nil || ra.fused {
					t.Fatalf("gpu/cpu activations: no attention scratch, or fused")
				}
				for _, shape := range [][2]int{{4, 9}, {3, 7}, {4, 9}} {
					B, T, V := shape[0], shape[1], ref.Config.V
					b := Batch{B: B, T: T, Tokens: make([]int32, B*T), Targets: make([]int32, B*T), ScoredOnly: scored}
					dl, de := make([]float32, B*T), make([]float32, B*T)
					for r := 0; r < B; r++ {
						n := T - 2*r // rows of different lengths, right padded
						for t := 0; t < T; t++ {
							b.Targets[r*T+t] = -1
							if t < n {
								b.Tokens[r*T+t] = int32((r*31 + t*17 + 3) % V)
							}
							if t >= 1 && t < n-1 {
								b.Targets[r*T+t] = int32((r*13 + t*7 + 1) % V)
								dl[r*T+t], de[r*T+t] = float32((r+t)%5)-2, -0.1
							}
						}
					}
					var got [2][3][]float32
					for i, mm := range []*Model{ref, fused} {
						a := []*Acts{ra, fa}[i]
						if err := mm.Forward(a, b); err != nil {
							t.Fatal(err)
						}
						logp, ent := slices.Clone(a.Logp[:B*T]), slices.Clone(a.Entropy[:B*T])
						mm.ZeroGrads()
						if err := mm.Backward(a, dl, de); err != nil {
							t.Fatal(err)
						}
						got[i] = [3][]float32{logp, ent, slices.Clone(mm.Grads.Data)}
					}
					for j, what := range []string{"logp", "entropy", "grads"} {
						if err := maxRelErr(got[1][j], got[0][j]); err > 1e-5 || math.IsNaN(err) {
							t.Errorf("%dx%d: fused attention %s differ from the padded ops': max rel %.3g", B, T, what, err)
						}
					}
				}
			})
		}
	}
}
