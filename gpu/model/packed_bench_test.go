package model

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// BenchmarkUpdatePacking is one policy update of the 2 x 8 batch that
// scripts/bench/dynamic_bsz.sh pins (the demo's former shape): 16 trajectories (two prompts
// of 150-300 tokens, eight responses each of 30-256 tokens, the response rows scored) through
// forward, backward and one clipped AdamW step of SmolLM2-135M, cut into
// micro-batches as the trainer cuts them:
//
//	padded-micro2: two trajectories per micro-batch in group order, right padded to the
//	               longer one rounded up to 64 (ppo_micro_batch_size_per_gpu=2)
//	packed-1536:   longest first, packed end to end while the tokens rounded up to 64 stay
//	               within 1536 (use_dynamic_bsz, ppo_max_token_len_per_gpu=1536)
//
// Iteration i draws the lengths of set i (the same sets in both modes), and one ActsCache (at
// most 4 buffers) serves every iteration, as the trainer's does across steps. It reports the
// padding fraction of the rows computed and the real (unpadded) tokens per second.
func BenchmarkUpdatePacking(b *testing.B) {
	for _, mode := range []string{"padded-micro2", "packed-1536"} {
		b.Run(mode, func(b *testing.B) {
			m := randomModel(smolLM2)
			opt := NewAdamW(m, AdamWConfig{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1})
			cache := NewActsCache(m, 4)
			var real, rows int
			update := func(set int) {
				seqs := updateSeqs(uint64(set), m.Config.V)
				m.ZeroGrads()
				for _, mb := range updateMicroBatches(seqs, mode == "packed-1536") {
					a := cache.For(mb.Batch)
					if err := m.Forward(a, mb.Batch); err != nil {
						b.Fatal(err)
					}
					if err := m.Backward(a, mb.dlogp, make([]float32, len(mb.dlogp))); err != nil {
						b.Fatal(err)
					}
					real += mb.real
					rows += mb.B * mb.T
				}
				if _, err := opt.Update(m); err != nil {
					b.Fatal(err)
				}
			}
			update(1000) // warm-up: weights' gradients and moments allocated
			real, rows = 0, 0
			set := 0
			b.ResetTimer()
			for b.Loop() {
				update(set)
				set++
			}
			b.ReportMetric(1-float64(real)/float64(rows), "padding-frac")
			b.ReportMetric(float64(real)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// updateSeq is one trajectory of BenchmarkUpdatePacking: prompt then response tokens.
type updateSeq struct {
	tokens []int32
	prompt int
}

// updateSeqs draws set's 16 trajectories: 2 prompts of 150-300 tokens x 8 responses of
// 30-256 tokens, random tokens below V.
func updateSeqs(set uint64, V int) []updateSeq {
	r := rand.New(rand.NewPCG(7, set))
	var out []updateSeq
	for g := 0; g < 2; g++ {
		P := 150 + r.IntN(151)
		prompt := make([]int32, P)
		for i := range prompt {
			prompt[i] = int32(r.IntN(V))
		}
		for j := 0; j < 8; j++ {
			R := 30 + r.IntN(227)
			s := updateSeq{tokens: append([]int32(nil), prompt...), prompt: P}
			for i := 0; i < R; i++ {
				s.tokens = append(s.tokens, int32(r.IntN(V)))
			}
			out = append(out, s)
		}
	}
	return out
}

// updateMB is a micro-batch of BenchmarkUpdatePacking with its loss gradient per row and its
// real (unpadded) token count.
type updateMB struct {
	Batch
	dlogp []float32
	real  int
}

// updateMicroBatches cuts seqs as the trainer does (see BenchmarkUpdatePacking).
func updateMicroBatches(seqs []updateSeq, packed bool) []updateMB {
	roundUp := func(n int) int { return (n + 63) / 64 * 64 }
	var groups [][]updateSeq
	if !packed {
		for i := 0; i < len(seqs); i += 2 {
			groups = append(groups, seqs[i:min(i+2, len(seqs))])
		}
	} else {
		sorted := append([]updateSeq(nil), seqs...)
		sort.SliceStable(sorted, func(i, j int) bool { return len(sorted[i].tokens) > len(sorted[j].tokens) })
		for lo := 0; lo < len(sorted); {
			hi, n := lo, 0
			for hi < len(sorted) && roundUp(n+len(sorted[hi].tokens)) <= 1536 {
				n += len(sorted[hi].tokens)
				hi++
			}
			groups = append(groups, sorted[lo:hi])
			lo = hi
		}
	}
	var out []updateMB
	for _, g := range groups {
		var mb updateMB
		starts := make([]int, len(g))
		if packed {
			N := 0
			for i, s := range g {
				starts[i] = N
				N += len(s.tokens)
				mb.Lengths = append(mb.Lengths, len(s.tokens))
			}
			if T := roundUp(N); T > N {
				mb.Lengths = append(mb.Lengths, T-N)
			}
			mb.B, mb.T = 1, roundUp(N)
		} else {
			T := 0
			for _, s := range g {
				T = max(T, len(s.tokens))
			}
			mb.B, mb.T = len(g), roundUp(T)
			for i := range starts {
				starts[i] = i * mb.T
			}
		}
		N := mb.B * mb.T
		mb.Tokens, mb.Targets, mb.dlogp, mb.ScoredOnly = make([]int32, N), make([]int32, N), make([]float32, N), true
		for i := range mb.Targets {
			mb.Targets[i] = -1
		}
		r := rand.New(rand.NewPCG(3, uint64(len(out))))
		for i, s := range g {
			copy(mb.Tokens[starts[i]:], s.tokens)
			for t := s.prompt; t < len(s.tokens); t++ {
				mb.Targets[starts[i]+t-1] = s.tokens[t]
				mb.dlogp[starts[i]+t-1] = -float32(r.NormFloat64()) / 2000
			}
			mb.real += len(s.tokens)
		}
		out = append(out, mb)
	}
	return out
}
