//go:build cuda

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// BenchmarkSgemm is one [N,C] x [OC,C]^T product (a SmolLM2-135M MLP
// projection at N tokens) on the GPU, staged host slices vs resident tensors,
// with the CPU as the peer measured in the same run.
func BenchmarkSgemm(b *testing.B) {
	const N, C, OC = 1024, 576, 1536
	r := rand.New(rand.NewPCG(1, 1))
	inp, w := checkutil.Randn(r, N*C, 1), checkutil.Randn(r, OC*C, 1)
	run := func(b *testing.B, be gpu.Backend, inp, w, out []float32) {
		b.SetBytes(int64(2 * N * C * OC)) // flops, reported as bytes/s
		for b.Loop() {
			be.MatmulForward(out, inp, w, nil, N, C, OC)
		}
	}
	b.Run("cpu", func(b *testing.B) { run(b, cpu.New(), inp, w, make([]float32, N*OC)) })
	b.Run("cuda-staged", func(b *testing.B) { run(b, benchBackend(b), inp, w, make([]float32, N*OC)) })
	b.Run("cuda-resident", func(b *testing.B) {
		be := benchBackend(b)
		mi, mw, mo := resident(b, be, inp), resident(b, be, w), resident(b, be, make([]float32, N*OC))
		run(b, be, mi, mw, mo)
		be.Download(mo[:1:1], mo) // wait for the queued products
	})
	for _, p := range []cuda.Precision{cuda.TF32, cuda.BF16} {
		b.Run("cuda-resident-"+p.String(), func(b *testing.B) {
			be := benchBackend(b)
			defer be.SetPrecision(be.Precision())
			be.SetPrecision(p)
			mi, mw, mo := resident(b, be, inp), resident(b, be, w), resident(b, be, make([]float32, N*OC))
			run(b, be, mi, mw, mo)
			be.Download(mo[:1:1], mo)
		})
	}
}

// BenchmarkTrainStep is a forward, backward and AdamW step of a small
// Llama-shaped model (B=4, T=128) on the CPU and on the GPU (resident),
// the GPU's products in fp32, tf32 and bf16.
func BenchmarkTrainStep(b *testing.B) {
	c := model.Config{Family: "llama", V: 8192, C: 256, F: 768, L: 4, NH: 8, NKV: 4, HD: 32, MaxPos: 256,
		Eps: 1e-5, RopeTheta: 10000, BOS: 1, EOS: 2}
	const B, T = 4, 128
	for _, name := range []string{"cpu", "cuda", "cuda-tf32", "cuda-bfloat16"} {
		b.Run(fmt.Sprintf("%s-B%d-T%d", name, B, T), func(b *testing.B) {
			var be gpu.Backend = cpu.New()
			if name != "cpu" {
				cb := benchBackend(b)
				defer cb.SetPrecision(cb.Precision())
				switch name {
				case "cuda-tf32":
					cb.SetPrecision(cuda.TF32)
				case "cuda-bfloat16":
					cb.SetPrecision(cuda.BF16)
				default:
					cb.SetPrecision(cuda.FP32)
				}
				be = cb
			}
			m := model.NewZero(be, c)
			r := rand.New(rand.NewPCG(2, 2))
			m.Params.Upload(checkutil.Randn(r, len(m.Params.Data), 0.02))
			m.EnableGrads()
			batch := model.Batch{B: B, T: T, Tokens: make([]int32, B*T), Targets: make([]int32, B*T)}
			dlogp, dent := make([]float32, B*T), make([]float32, B*T)
			for n := range batch.Tokens {
				batch.Tokens[n] = int32(r.IntN(c.V))
				batch.Targets[n] = int32(r.IntN(c.V))
				dlogp[n] = -1 / float32(B*T)
			}
			a := m.NewActs(B, T)
			opt := model.NewAdamW(m, model.AdamWConfig{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MaxGradNorm: 1})
			for b.Loop() {
				m.ZeroGrads()
				if err := m.Forward(a, batch); err != nil {
					b.Fatal(err)
				}
				if err := m.Backward(a, dlogp, dent); err != nil {
					b.Fatal(err)
				}
				if _, err := opt.Update(m); err != nil {
					b.Fatal(err)
				}
				be.Download(dent[:1], m.Params.Data[:1]) // wait for the update
			}
		})
	}
}

func benchBackend(b *testing.B) *cuda.Backend {
	b.Helper()
	testOnce.Do(func() { testBackend, testErr = cuda.Open(0) })
	if testErr != nil {
		b.Skipf("no usable CUDA GPU: %v", testErr)
	}
	return testBackend
}

func resident(b *testing.B, be *cuda.Backend, x []float32) []float32 {
	m := be.Alloc("benchmark tensor", len(x))
	b.Cleanup(func() { be.Free(m) })
	be.Upload(m, x)
	return m
}
