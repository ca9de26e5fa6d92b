package model

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
)

// timedBackend wraps a backend and adds up the wall time of each op (the
// matmuls by output width, Sgemm alone being the attention's products).
type timedBackend struct {
	gpu.Backend
	t map[string]time.Duration
}

func (b *timedBackend) add(name string, s time.Time) { b.t[name] += time.Since(s) }

func (b *timedBackend) Sgemm(ta, tb bool, M, N, K int, alpha float32, A []float32, lda int, B []float32, ldb int, beta float32, C []float32, ldc int) {
	defer b.add("Sgemm(attn)", time.Now())
	b.Backend.Sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
}
func (b *timedBackend) EmbeddingForward(out []float32, tokens []int32, wte []float32, N, C int) {
	defer b.add("EmbeddingForward", time.Now())
	b.Backend.EmbeddingForward(out, tokens, wte, N, C)
}
func (b *timedBackend) EmbeddingBackward(dwte, dout []float32, tokens []int32, N, C int) {
	defer b.add("EmbeddingBackward", time.Now())
	b.Backend.EmbeddingBackward(dwte, dout, tokens, N, C)
}
func (b *timedBackend) RMSNormForward(out, rstd, inp, weight []float32, N, C int, eps float32) {
	defer b.add("RMSNormForward", time.Now())
	b.Backend.RMSNormForward(out, rstd, inp, weight, N, C, eps)
}
func (b *timedBackend) RMSNormBackward(dinp, dweight, dout, inp, weight, rstd []float32, N, C int) {
	defer b.add("RMSNormBackward", time.Now())
	b.Backend.RMSNormBackward(dinp, dweight, dout, inp, weight, rstd, N, C)
}
func (b *timedBackend) MatmulForward(out, inp, weight, bias []float32, N, C, OC int) {
	defer b.add(fmt.Sprintf("MatmulForward OC=%d", OC), time.Now())
	b.Backend.MatmulForward(out, inp, weight, bias, N, C, OC)
}
func (b *timedBackend) MatmulBackward(dinp, dweight, dbias, dout, inp, weight []float32, N, C, OC int, accumulate bool) {
	defer b.add(fmt.Sprintf("MatmulBackward OC=%d", OC), time.Now())
	b.Backend.MatmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate)
}
func (b *timedBackend) RopeForward(out, inp []float32, pos []int32, cos, sin []float32, N, H, HD int, l gpu.RopeLayout) {
	defer b.add("RopeForward", time.Now())
	b.Backend.RopeForward(out, inp, pos, cos, sin, N, H, HD, l)
}
func (b *timedBackend) RopeBackward(out, inp []float32, pos []int32, cos, sin []float32, N, H, HD int, l gpu.RopeLayout) {
	defer b.add("RopeBackward", time.Now())
	b.Backend.RopeBackward(out, inp, pos, cos, sin, N, H, HD, l)
}
func (b *timedBackend) RopeQKForward(q, k []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, l gpu.RopeLayout) {
	defer b.add("RopeQKForward", time.Now())
	b.Backend.RopeQKForward(q, k, pos, cos, sin, N, NH, NKV, HD, l)
}
func (b *timedBackend) RopeQKBackward(dq, dk []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, l gpu.RopeLayout) {
	defer b.add("RopeQKBackward", time.Now())
	b.Backend.RopeQKBackward(dq, dk, pos, cos, sin, N, NH, NKV, HD, l)
}
func (b *timedBackend) ResidualRMSNormForward(res, out, rstd, a, c, weight []float32, N, C int, eps float32) {
	defer b.add("ResidualRMSNormForward", time.Now())
	b.Backend.ResidualRMSNormForward(res, out, rstd, a, c, weight, N, C, eps)
}
func (b *timedBackend) ResidualRMSNormBackward(dres, dweight, dout, dout2, res, weight, rstd []float32, N, C int) {
	defer b.add("ResidualRMSNormBackward", time.Now())
	b.Backend.ResidualRMSNormBackward(dres, dweight, dout, dout2, res, weight, rstd, N, C)
}
func (b *timedBackend) AttentionForward(out, scratch, q, k, v []float32, B, T, NH, NKV, HD, window int) {
	defer b.add("AttentionForward", time.Now())
	b.Backend.AttentionForward(out, scratch, q, k, v, B, T, NH, NKV, HD, window)
}
func (b *timedBackend) AttentionBackward(dq, dk, dv, scratch, dout, q, k, v []float32, B, T, NH, NKV, HD, window int) {
	defer b.add("AttentionBackward", time.Now())
	b.Backend.AttentionBackward(dq, dk, dv, scratch, dout, q, k, v, B, T, NH, NKV, HD, window)
}
func (b *timedBackend) SwiGLUForward(out, gate, up []float32, n int) {
	defer b.add("SwiGLUForward", time.Now())
	b.Backend.SwiGLUForward(out, gate, up, n)
}
func (b *timedBackend) SwiGLUBackward(dgate, dup, dout, gate, up []float32, n int) {
	defer b.add("SwiGLUBackward", time.Now())
	b.Backend.SwiGLUBackward(dgate, dup, dout, gate, up, n)
}
func (b *timedBackend) SwiGLUBackwardH(dgate, dup, h, dout, gate, up []float32, n int) {
	defer b.add("SwiGLUBackwardH", time.Now())
	b.Backend.SwiGLUBackwardH(dgate, dup, h, dout, gate, up, n)
}
func (b *timedBackend) ResidualForward(out, a, c []float32, n int) {
	defer b.add("ResidualForward", time.Now())
	b.Backend.ResidualForward(out, a, c, n)
}
func (b *timedBackend) LogprobForward(logp, entropy, lse, logits []float32, targets []int32, N, V int) {
	defer b.add("LogprobForward", time.Now())
	b.Backend.LogprobForward(logp, entropy, lse, logits, targets, N, V)
}
func (b *timedBackend) LogprobBackward(dlogits, logits, lse, entropy []float32, targets []int32, dlogp, dentropy []float32, N, V int) {
	defer b.add("LogprobBackward", time.Now())
	b.Backend.LogprobBackward(dlogits, logits, lse, entropy, targets, dlogp, dentropy, N, V)
}
func (b *timedBackend) SumSquares(x []float32) float64 {
	defer b.add("SumSquares", time.Now())
	return b.Backend.SumSquares(x)
}
func (b *timedBackend) Scale(x []float32, s float32) {
	defer b.add("Scale", time.Now())
	b.Backend.Scale(x, s)
}
func (b *timedBackend) AdamW(params, grads, m, v []float32, step int, lr, beta1, beta2, eps, wd float32) {
	defer b.add("AdamW", time.Now())
	b.Backend.AdamW(params, grads, m, v, step, lr, beta1, beta2, eps, wd)
}

// BenchmarkTrainStepByOp is BenchmarkTrainStep (B=4, T=256) with the wall
// time of every backend op logged per step: where a step's time goes.
func BenchmarkTrainStepByOp(b *testing.B) {
	B, T := 4, 256
	tb := &timedBackend{Backend: cpu.New(), t: map[string]time.Duration{}}
	m0 := randomModel(smolLM2)
	m := NewZero(tb, smolLM2)
	copy(m.Params.Data, m0.Params.Data)
	c := m.Config
	N := B * T
	r := rand.New(rand.NewPCG(2, 2))
	batch := Batch{B: B, T: T, Tokens: make([]int32, N), Targets: make([]int32, N)}
	dlogp, dent := make([]float32, N), make([]float32, N)
	for n := range batch.Tokens {
		batch.Tokens[n] = int32(r.IntN(c.V))
	}
	for n := range batch.Targets {
		batch.Targets[n] = -1
		if n%T < T-1 {
			batch.Targets[n] = batch.Tokens[n+1]
			dlogp[n] = -float32(r.NormFloat64()) / float32(N)
		}
	}
	a := m.NewActs(B, T)
	opt := NewAdamW(m, AdamWConfig{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1})
	var zero time.Duration
	step := func() {
		if err := m.Forward(a, batch); err != nil {
			b.Fatal(err)
		}
		s := time.Now()
		m.ZeroGrads()
		zero += time.Since(s)
		if err := m.Backward(a, dlogp, dent); err != nil {
			b.Fatal(err)
		}
		if _, err := opt.Update(m); err != nil {
			b.Fatal(err)
		}
	}
	step()
	clear(tb.t)
	zero = 0
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	tot := b.Elapsed()
	tb.t["ZeroGrads"] = zero
	type kv struct {
		k string
		v time.Duration
	}
	var all []kv
	for k, v := range tb.t {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
	for _, e := range all {
		b.Logf("%-28s %8.3f s/step %5.1f%%", e.k, e.v.Seconds()/float64(b.N), 100*e.v.Seconds()/tot.Seconds())
	}
	b.ReportMetric(trainFLOPs(c, B, T)/(tot.Seconds()/float64(b.N))/1e9, "GFLOPS")
}
