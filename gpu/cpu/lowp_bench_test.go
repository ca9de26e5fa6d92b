package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// BenchmarkLowpMatmul compares the fp32 product (MatmulForward) with the
// bfloat16 and int8 kernels on SmolLM2-135M's MLP and lm_head shapes at
// decode batch sizes and a prefill; it reports weight bytes streamed per
// second and GFLOPS. Where a dot-product kernel runs (avx512-dot), the
// AVX-512 kernel on the same copy is measured too (name suffix avx512).
func BenchmarkLowpMatmul(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct {
		name  string
		OC, K int
	}{{"gate-1536x576", 1536, 576}, {"down-576x1536", 576, 1536}, {"lmhead-49152x576", 49152, 576}} {
		w := randVec(r, sh.OC*sh.K)
		for _, N := range []int{1, 16, 256} {
			x := randVec(r, N*sh.K)
			out := make([]float32, N*sh.OC)
			for _, dt := range []Dtype{Float32, BFloat16, Int8} {
				isas := []LowpISA{BestLowpISA}
				if UsesDot(BestLowpISA, dt) {
					isas = append(isas, ISAAVX512)
				}
				for _, isa := range isas {
					name := fmt.Sprintf("%s/N%d/%v", sh.name, N, dt)
					if isa != BestLowpISA {
						name += "/" + isa.String()
					}
					b.Run(name, func(b *testing.B) {
						var q *LowpMatrix
						bytes := 4 * len(w)
						if dt != Float32 {
							q, _ = Quantize(dt, w, sh.OC, sh.K)
							bytes = q.productBytes()
						}
						b.SetBytes(int64(bytes))
						for b.Loop() {
							if q == nil {
								Backend{}.MatmulForward(out, x, w, nil, N, sh.K, sh.OC)
							} else {
								LowpMatmulISA(isa, out, x, q, nil, N)
							}
						}
						b.ReportMetric(2*float64(N*sh.OC*sh.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
					})
				}
			}
		}
	}
}

// BenchmarkQuantize is the cost of refreshing a copy after an optimizer step.
func BenchmarkQuantize(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	w := randVec(r, 1536*576)
	for _, dt := range []Dtype{BFloat16, Int8} {
		b.Run(dt.String(), func(b *testing.B) {
			q, _ := Quantize(dt, w, 1536, 576)
			b.SetBytes(int64(4 * len(w)))
			for b.Loop() {
				q.Requantize(w)
			}
		})
	}
}

// BenchmarkLowpMatmulStream is BenchmarkLowpMatmul with the weights streamed
// from memory, as in a decode step: the products cycle through copies of
// the matrix totalling 512 MB of the format (more than the L3 cache), so
// every product reads its weights from DRAM.
func BenchmarkLowpMatmulStream(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 9))
	const OC, K = 1536, 576
	w := randVec(r, OC*K)
	for _, N := range []int{1, 16} {
		x := randVec(r, N*K)
		out := make([]float32, N*OC)
		for _, dt := range []Dtype{Float32, BFloat16, Int8} {
			b.Run(fmt.Sprintf("gate-%dx%d/N%d/%v", OC, K, N, dt), func(b *testing.B) {
				var ws [][]float32
				var qs []*LowpMatrix
				bytes := 4 * OC * K
				if dt != Float32 {
					q, _ := Quantize(dt, w, OC, K)
					bytes = q.productBytes()
				}
				for n := 0; n*bytes < 512<<20; n++ {
					if dt == Float32 {
						ws = append(ws, slices.Clone(w))
					} else {
						q, _ := Quantize(dt, w, OC, K)
						qs = append(qs, q)
					}
				}
				b.SetBytes(int64(bytes))
				i := 0
				for b.Loop() {
					if dt == Float32 {
						Backend{}.MatmulForward(out, x, ws[i%len(ws)], nil, N, K, OC)
					} else {
						LowpMatmul(out, x, qs[i%len(qs)], nil, N)
					}
					i++
				}
				b.ReportMetric(2*float64(N*OC*K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}
