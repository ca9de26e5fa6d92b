package model

import (
	"math"
	"slices"
	"testing"
)

// TestGoldenScoredOnly runs the golden batch with Batch.ScoredOnly: the
// packed logits, the log-probs and entropies of the scored rows, the loss and
// every parameter gradient must match transformers as the full forward does,
// and the unscored rows must read 0.
func TestGoldenScoredOnly(t *testing.T) {
	for _, name := range families {
		t.Run(name, func(t *testing.T) {
			m := newTiny(t, name)
			g := loadGolden(t, name)
			B, T := g.B, g.T
			N := B * T
			V := m.Config.V
			a := m.NewActs(B, T)
			batch := Batch{B: B, T: T, Tokens: flat(g.Tokens), Targets: flat(g.Targets), ScoredOnly: true}
			if err := m.Forward(a, batch); err != nil {
				t.Fatal(err)
			}
			var rows []int32
			for n, tg := range batch.Targets {
				if tg >= 0 {
					rows = append(rows, int32(n))
				}
			}
			if len(rows) == 0 || len(rows) == N {
				t.Fatalf("golden batch has %d scored rows of %d: the test needs some of each", len(rows), N)
			}
			if !slices.Equal(a.Scored, rows) {
				t.Fatalf("Scored = %v, want %v", a.Scored, rows)
			}
			wantLogits, wantLogp, wantEnt := g.Get(t, "logits"), g.Get(t, "logp"), g.Get(t, "entropy")
			var packed, logp, ent []float32
			for _, n := range rows {
				packed = append(packed, wantLogits[int(n)*V:int(n+1)*V]...)
			}
			for n := 0; n < N; n++ {
				if batch.Targets[n] >= 0 {
					logp = append(logp, wantLogp[n])
					ent = append(ent, wantEnt[n])
					continue
				}
				if a.Logp[n] != 0 || a.Entropy[n] != 0 {
					t.Errorf("unscored row %d: logp %v entropy %v, want 0", n, a.Logp[n], a.Entropy[n])
				}
			}
			checkClose(t, "packed logits", a.Logits[:len(rows)*V], packed, 1e-4)
			var gotLogp, gotEnt []float32
			for _, n := range rows {
				gotLogp = append(gotLogp, a.Logp[n])
				gotEnt = append(gotEnt, a.Entropy[n])
			}
			checkClose(t, "logp", gotLogp, logp, 1e-4)
			checkClose(t, "entropy", gotEnt, ent, 1e-4)

			w := flat(g.Weights)
			dlogp, dent := make([]float32, N), make([]float32, N)
			var loss float64
			for n := 0; n < N; n++ {
				dlogp[n] = -w[n]
				if batch.Targets[n] >= 0 {
					dent[n] = -g.EntCoef
				}
				loss += float64(dlogp[n])*float64(a.Logp[n]) + float64(dent[n])*float64(a.Entropy[n])
			}
			checkClose(t, "loss", []float32{float32(loss)}, g.Get(t, "loss"), 1e-4)
			m.ZeroGrads()
			if err := m.Backward(a, dlogp, dent); err != nil {
				t.Fatal(err)
			}
			for _, p := range m.Grads.Names {
				checkClose(t, "grad "+p.Name, p.Data, g.Get(t, "grad."+p.Name), 1e-3)
			}
		})
	}
}

// TestScoredOnlyMatchesFull checks ScoredOnly against the full forward on the
// same Acts, alternating modes (so no state of one leaks into the other), and
// a batch without any scored row.
func TestScoredOnlyMatchesFull(t *testing.T) {
	m := newTiny(t, "tiny-llama")
	B, T := 2, 7
	N := B * T
	V := m.Config.V
	tokens := make([]int32, N)
	targets := make([]int32, N)
	dlogp, dent := make([]float32, N), make([]float32, N)
	for n := range tokens {
		tokens[n] = int32((n*37 + 11) % V)
		targets[n] = -1
		if t := n % T; t >= 3 && t < T-1 { // a 3-token prompt, the last token unscored
			targets[n] = int32((n*53 + 5) % V)
			dlogp[n] = float32(n%5) - 2
			dent[n] = -0.1
		}
	}
	a := m.NewActs(B, T)
	run := func(scored bool) (logp, ent, grads []float32) {
		t.Helper()
		if err := m.Forward(a, Batch{B: B, T: T, Tokens: tokens, Targets: targets, ScoredOnly: scored}); err != nil {
			t.Fatal(err)
		}
		logp, ent = slices.Clone(a.Logp), slices.Clone(a.Entropy)
		for n := range targets {
			if targets[n] < 0 {
				ent[n] = 0 // the full forward fills entropy everywhere
			}
		}
		m.ZeroGrads()
		if err := m.Backward(a, dlogp, dent); err != nil {
			t.Fatal(err)
		}
		return logp, ent, slices.Clone(m.Grads.Data)
	}
	for i := 0; i < 2; i++ {
		fl, fe, fg := run(false)
		sl, se, sg := run(true)
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"logp", sl, fl}, {"entropy", se, fe}, {"grads", sg, fg}} {
			if e := maxRelErr(c.got, c.want); e > 1e-5 || math.IsNaN(e) {
				t.Errorf("round %d: ScoredOnly %s differ from the full forward's: max rel %.3g", i, c.what, e)
			}
		}
	}

	none := make([]int32, N)
	for n := range none {
		none[n] = -1
	}
	if err := m.Forward(a, Batch{B: B, T: T, Tokens: tokens, Targets: none, ScoredOnly: true}); err != nil {
		t.Fatal(err)
	}
	if len(a.Scored) != 0 || slices.ContainsFunc(a.Logp, func(x float32) bool { return x != 0 }) {
		t.Errorf("no scored row: Scored %v, Logp %v", a.Scored, a.Logp)
	}
	m.ZeroGrads()
	if err := m.Backward(a, dlogp, dent); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(m.Grads.Data, func(x float32) bool { return x != 0 }) {
		t.Error("no scored row: the backward produced a non-zero gradient")
	}
}
