package model

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkValueTrainStep is one critic step (forward, backward of a weighted value loss,
// clipped AdamW over decoder and head) of SmolLM2-135M's shape on a B x T batch: the extra
// cost of PPO with GAE beside the actor's BenchmarkTrainStep (the critic has no lm_head).
// scripts/goldens/model/bench_value_torch.py measures the PyTorch peer on the same batch.
func BenchmarkValueTrainStep(b *testing.B) {
	for _, bt := range [][2]int{{4, 256}} {
		B, T := bt[0], bt[1]
		b.Run(fmt.Sprintf("smollm2-135m-B%d-T%d", B, T), func(b *testing.B) {
			vm := &ValueModel{Body: randomModel(smolLM2)}
			c := vm.Body.Config
			vm.Head, vm.HeadGrad = make([]float32, c.C+1), make([]float32, c.C+1)
			r := rand.New(rand.NewPCG(3, 3))
			for i := range vm.Head {
				vm.Head[i] = float32(r.NormFloat64() * 0.02)
			}
			N := B * T
			batch := Batch{B: B, T: T, Tokens: make([]int32, N)}
			dv := make([]float32, N)
			for n := range batch.Tokens {
				batch.Tokens[n] = int32(r.IntN(c.V))
				dv[n] = float32(r.NormFloat64()) / float32(N)
			}
			a := vm.NewActs(B, T)
			opt := NewValueAdamW(vm, AdamWConfig{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1})
			step := func() {
				if err := vm.Forward(a, batch); err != nil {
					b.Fatal(err)
				}
				vm.ZeroGrads()
				if err := vm.Backward(a, dv); err != nil {
					b.Fatal(err)
				}
				if _, err := opt.Update(vm); err != nil {
					b.Fatal(err)
				}
			}
			step() // warm-up
			b.ResetTimer()
			for b.Loop() {
				step()
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(N)/sec, "tokens/s")
			fl := trainFLOPs(c, B, T) - 6*float64(c.V*c.C)*float64(N) + 6*float64(c.C)*float64(N)
			b.ReportMetric(fl/sec/1e9, "GFLOPS")
		})
	}
}
