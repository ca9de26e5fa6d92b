package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/rlhost/rlhost/gpu"
)

// BenchmarkSgemm reports GFLOPS of row-major sgemm on square sizes and on the
// shapes of a SmolLM2-135M training step (N tokens x C=576, F=1536, V=49152).
func BenchmarkSgemm(b *testing.B) {
	shapes := []struct {
		name    string
		ta, tb  bool
		M, N, K int
	}{
		{"square-576", false, true, 576, 576, 576},
		{"square-1536", false, true, 1536, 1536, 1536},
		{"fwd-NxFxC", false, true, 2048, 1536, 576},
		{"bwd-dW-FxCxN", true, false, 1536, 576, 2048},
		{"bwd-dX-NxCxF", false, false, 2048, 576, 1536},
		{"lmhead-NxVxC", false, true, 512, 49152, 576},
		{"gemv-lmhead-1xVxC", false, true, 1, 49152, 576},
		{"gemm-lmhead-2xVxC", false, true, 2, 49152, 576},
		{"gemm-lmhead-16xVxC", false, true, 16, 49152, 576},
		{"gemm-qproj-16xCxC", false, true, 16, 576, 576},
		{"gemv-qproj-1xCxC", false, true, 1, 576, 576},
	}
	r := rand.New(rand.NewPCG(1, 1))
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			lda, ldb := s.K, s.N
			if s.ta {
				lda = s.M
			}
			if s.tb {
				ldb = s.K
			}
			A := randSlice(r, s.M*s.K, 1)
			B := randSlice(r, s.K*s.N, 1)
			C := make([]float32, s.M*s.N)
			Sgemm(s.ta, s.tb, s.M, s.N, s.K, 1, A, lda, B, ldb, 0, C, s.N)
			b.ResetTimer()
			for b.Loop() {
				Sgemm(s.ta, s.tb, s.M, s.N, s.K, 1, A, lda, B, ldb, 0, C, s.N)
			}
			flops := 2 * float64(s.M) * float64(s.N) * float64(s.K) * float64(b.N)
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
	}
}

// BenchmarkSampleRow: one row of a 49152-token vocabulary (SmolLM2's) with
// logits of a peaked and of a nearly flat distribution, under top-k alone,
// top-p alone and both (the sampler of every rollout).
func BenchmarkSampleRow(b *testing.B) {
	const V = 49152
	r := rand.New(rand.NewPCG(1, 2))
	for _, spread := range []struct {
		name  string
		scale float64
	}{{"peaked", 4}, {"flat", 0.05}} {
		row := make([]float32, V)
		for i := range row {
			row[i] = float32(r.NormFloat64() * spread.scale)
		}
		for _, p := range []struct {
			name string
			p    gpu.SampleParams
		}{
			{"topk50", gpu.SampleParams{Temperature: 1, TopK: 50}},
			{"topp0.9", gpu.SampleParams{Temperature: 1, TopP: 0.9}},
			{"topk50-topp0.95", gpu.SampleParams{Temperature: 1, TopK: 50, TopP: 0.95}},
		} {
			b.Run(spread.name+"/"+p.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					p.p.U = float64(i%97) / 97
					SampleRow(row, p.p)
				}
			})
		}
	}
}

// BenchmarkSwiGLUBackward: the training step's SwiGLU work in the backward
// of one MLP layer at a SmolLM2-135M step's shape (4 x 256 tokens, F 1536):
// h recomputed by SwiGLUForward then SwiGLUBackward (the sequence before
// SwiGLUBackwardH), and SwiGLUBackwardH alone (one pass over gate and up).
func BenchmarkSwiGLUBackward(b *testing.B) {
	const n = 4 * 256 * 1536
	r := rand.New(rand.NewPCG(1, 3))
	gate, up, dout := randSlice(r, n, 3), randSlice(r, n, 1), randSlice(r, n, 1)
	h, dg, du := make([]float32, n), make([]float32, n), make([]float32, n)
	var be Backend
	for _, s := range []struct {
		name string
		run  func()
	}{
		{"recompute", func() { be.SwiGLUForward(h, gate, up, n); be.SwiGLUBackward(dg, du, dout, gate, up, n) }},
		{"fused", func() { be.SwiGLUBackwardH(dg, du, h, dout, gate, up, n) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			s.run()
			for b.Loop() {
				s.run()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gfloat/s")
		})
	}
}
