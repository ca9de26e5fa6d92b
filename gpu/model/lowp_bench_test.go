package model

import (
	"fmt"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
)

// BenchmarkDecodeDtype is BenchmarkDecode (32-token prompt, 64 greedy
// tokens, batch 1 and 16, SmolLM2-135M shape) for each generation dtype.
func BenchmarkDecodeDtype(b *testing.B) {
	const prompt, gen = 32, 64
	m := randomModel(smolLM2)
	for _, dt := range []cpu.Dtype{cpu.Float32, cpu.BFloat16, cpu.Int8} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("%v/batch%d", dt, batch), func(b *testing.B) {
				g, err := m.NewGenerator(batch, prompt+gen+1)
				if err != nil {
					b.Fatal(err)
				}
				if err := g.SetDtype(dt); err != nil {
					b.Fatal(err)
				}
				runDecode(b, m, g, batch, prompt, gen)
			})
		}
	}
}

// BenchmarkLowpRebuild is the refresh of the whole SmolLM2-135M copy after
// an optimizer step (what the first Generate after a step pays).
func BenchmarkLowpRebuild(b *testing.B) {
	m := randomModel(smolLM2)
	for _, dt := range []cpu.Dtype{cpu.BFloat16, cpu.Int8} {
		b.Run(dt.String(), func(b *testing.B) {
			g, err := m.NewGenerator(1, 8)
			if err != nil {
				b.Fatal(err)
			}
			if err := g.SetDtype(dt); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(g.LowpBytes())/(1<<20), "MiB")
			for b.Loop() {
				m.Params.Changed()
				if err := g.syncLowp(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
