package model

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
)

// smolLM2 is SmolLM2-135M's shape (HuggingFaceTB/SmolLM2-135M-Instruct).
var smolLM2 = Config{Family: "llama", V: 49152, C: 576, F: 1536, L: 30, NH: 9, NKV: 3, HD: 64,
	MaxPos: 8192, Eps: 1e-5, RopeTheta: 100000, Tied: true, BOS: 1, EOS: 2}

// benchShapes are the shapes the training-step and decode benchmarks run, chosen by
// RLHOST_BENCH_SHAPE (default smollm2-135m); scripts/goldens/model/bench_torch.py --shape
// builds the same ones in transformers. The qwen3-0.6b variants measure what QK-norm and
// a sliding window cost on the same dimensions (scripts/bench/families.sh).
var benchShapes = map[string]Config{
	"smollm2-135m": smolLM2,
	// Qwen/Qwen3-0.6B: head_dim 128 != 1024/16, QK-norm, tied
	"qwen3-0.6b": {Family: "qwen3", V: 151936, C: 1024, F: 3072, L: 28, NH: 16, NKV: 8, HD: 128,
		MaxPos: 40960, Eps: 1e-6, RopeTheta: 1000000, Tied: true, BOS: 151643, EOS: 151645, QKNorm: true},
	// the same dimensions as a Llama/Qwen2-style decoder: no QK-norm
	"qwen3-0.6b-noqknorm": {Family: "llama", V: 151936, C: 1024, F: 3072, L: 28, NH: 16, NKV: 8, HD: 128,
		MaxPos: 40960, Eps: 1e-6, RopeTheta: 1000000, Tied: true, BOS: 151643, EOS: 151645},
	// Qwen3-0.6B with a sliding window of 64 on every layer (Mistral's attention)
	"qwen3-0.6b-window64": {Family: "qwen3", V: 151936, C: 1024, F: 3072, L: 28, NH: 16, NKV: 8, HD: 128,
		MaxPos: 40960, Eps: 1e-6, RopeTheta: 1000000, Tied: true, BOS: 151643, EOS: 151645, QKNorm: true,
		Windows: slices.Repeat([]int{64}, 28)},
}

// benchShape is the shape RLHOST_BENCH_SHAPE names, and its name.
func benchShape(b *testing.B) (string, Config) {
	name := os.Getenv("RLHOST_BENCH_SHAPE")
	if name == "" {
		name = "smollm2-135m"
	}
	c, ok := benchShapes[name]
	if !ok {
		b.Fatalf("RLHOST_BENCH_SHAPE=%s: not one of the benchmark shapes", name)
	}
	return name, c
}

// randomModel fills a model of shape c with N(0, 0.02) weights and unit norms,
// as transformers initialises one.
func randomModel(c Config) *Model {
	m := NewZero(cpu.New(), c)
	r := rand.New(rand.NewPCG(1, 1))
	for _, p := range m.Params.Names {
		if strings.HasSuffix(p.Name, "norm.weight") {
			for i := range p.Data {
				p.Data[i] = 1
			}
			continue
		}
		for i := range p.Data {
			p.Data[i] = float32(r.NormFloat64() * 0.02)
		}
	}
	return m
}

// BenchmarkTrainStep is one training step (forward, backward of a weighted
// log-prob loss, clipped AdamW) of SmolLM2-135M on a B x T batch.
// scripts/goldens/model/bench_torch.py measures PyTorch on the same batch.
func BenchmarkTrainStep(b *testing.B) { benchTrainStep(b, nil) }

// benchLoRA is the LoRA setting of the LoRA benchmarks (rank 16, all linear layers).
var benchLoRA = &LoRAConfig{Rank: 16, Alpha: 32, Targets: []string{"all-linear"}, Seed: 1}

// BenchmarkTrainStepLoRA is BenchmarkTrainStep with rank-16 adapters on every
// linear layer and the base frozen (no base gradients or AdamW moments).
func BenchmarkTrainStepLoRA(b *testing.B) { benchTrainStep(b, benchLoRA) }

func benchTrainStep(b *testing.B, lora *LoRAConfig) {
	// {B, T, prompt}: with a prompt, its rows have no target and the batch
	// is ScoredOnly (the lm_head runs on the T-prompt-1 scored rows).
	shape, sc := benchShape(b)
	for _, bt := range [][3]int{{4, 256, 0}, {4, 256, 128}} {
		B, T, prompt := bt[0], bt[1], bt[2]
		name := fmt.Sprintf("%s-B%d-T%d", shape, B, T)
		if prompt > 0 {
			name += fmt.Sprintf("-prompt%d-scored", prompt)
		}
		b.Run(name, func(b *testing.B) {
			m := randomModel(sc)
			if lora != nil {
				if err := m.EnableLoRA(*lora); err != nil {
					b.Fatal(err)
				}
			}
			c := m.Config
			N := B * T
			r := rand.New(rand.NewPCG(2, 2))
			batch := Batch{B: B, T: T, Tokens: make([]int32, N), Targets: make([]int32, N), ScoredOnly: prompt > 0}
			dlogp, dent := make([]float32, N), make([]float32, N)
			for n := range batch.Tokens {
				batch.Tokens[n] = int32(r.IntN(c.V))
			}
			scored := 0
			for n := range batch.Targets {
				batch.Targets[n] = -1
				if t := n % T; t >= prompt && t < T-1 {
					scored++
					batch.Targets[n] = batch.Tokens[n+1]
					dlogp[n] = -float32(r.NormFloat64()) / float32(N)
				}
			}
			a := m.NewActs(B, T)
			opt := NewAdamW(m, AdamWConfig{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1})
			step := func() {
				if err := m.Forward(a, batch); err != nil {
					b.Fatal(err)
				}
				m.ZeroGrads()
				if err := m.Backward(a, dlogp, dent); err != nil {
					b.Fatal(err)
				}
				if _, err := opt.Update(m); err != nil {
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
			if lora == nil { // (with LoRA the base's weight gradients are skipped: not the same count)
				fl := trainFLOPs(c, B, T)
				if batch.ScoredOnly { // the lm_head ran on the scored rows only
					fl -= 6 * float64(c.V*c.C) * float64(N-scored)
				}
				b.ReportMetric(fl/sec/1e9, "GFLOPS")
			}
		})
	}
}

// trainFLOPs counts the matmul FLOPs of one training step: 6 per parameter
// per token for the linear layers (lm_head included, embedding gather not),
// plus the attention products (QK^T and PV) counted at the full T x T, the
// usual model-FLOPs convention (the causal blocks compute 3/4 of it at T=256).
func trainFLOPs(c Config, B, T int) float64 {
	N := float64(B * T)
	lin := float64(c.L) * float64(c.C*c.NH*c.HD*2+c.C*c.NKV*c.HD*2+3*c.C*c.F)
	lin += float64(c.V * c.C) // lm_head
	att := float64(c.L) * float64(B) * float64(c.NH) * float64(T) * float64(T) * float64(c.HD) * 2 * 2
	return 6*lin*N + 3*att
}

// BenchmarkDecode generates 64 tokens after a 32-token prompt for batches of
// 1 and 16 sequences (greedy, eos ignored) and reports generated tokens/s.
func BenchmarkDecode(b *testing.B) { benchDecode(b, nil) }

// BenchmarkDecodeLoRA is BenchmarkDecode with rank-16 adapters on every
// linear layer, applied as an extra low-rank product (not merged).
func BenchmarkDecodeLoRA(b *testing.B) { benchDecode(b, benchLoRA) }

func benchDecode(b *testing.B, lora *LoRAConfig) {
	const prompt, gen = 32, 64
	shape, sc := benchShape(b)
	m := randomModel(sc)
	if lora != nil {
		if err := m.EnableLoRA(*lora); err != nil {
			b.Fatal(err)
		}
	}
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("%s-batch%d", shape, batch), func(b *testing.B) {
			g, err := m.NewGenerator(batch, prompt+gen+1)
			if err != nil {
				b.Fatal(err)
			}
			runDecode(b, m, g, batch, prompt, gen)
		})
	}
}

// runDecode times g generating gen greedy tokens (EOS ignored) for batch random prompts of
// prompt tokens, and reports new tokens/s.
func runDecode(b *testing.B, m *Model, g *Generator, batch, prompt, gen int) {
	r := rand.New(rand.NewPCG(3, 3))
	reqs := make([]Request, batch)
	for i := range reqs {
		p := make([]int32, prompt)
		for j := range p {
			p[j] = int32(r.IntN(m.Config.V))
		}
		reqs[i] = Request{Prompt: p, Sample: SampleConfig{MaxTokens: gen, IgnoreEOS: true}}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := g.Generate(reqs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch*gen*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkGRPOStep is a GRPO-sized update of SmolLM2-135M: 16 sequences of
// 512 tokens in micro-batches of 4 (gradients accumulated), then one clipped
// AdamW step. It reports tokens/s and the process's peak resident memory
// (VmHWM), so run it alone: -bench GRPOStep.
func BenchmarkGRPOStep(b *testing.B) {
	const seqs, T, micro = 16, 512, 4
	m := randomModel(smolLM2)
	c := m.Config
	r := rand.New(rand.NewPCG(4, 4))
	N := micro * T
	batches := make([]Batch, seqs/micro)
	dlogp, dent := make([]float32, N), make([]float32, N)
	for i := range batches {
		bt := Batch{B: micro, T: T, Tokens: make([]int32, N), Targets: make([]int32, N)}
		for n := range bt.Tokens {
			bt.Tokens[n] = int32(r.IntN(c.V))
		}
		for n := range bt.Targets {
			bt.Targets[n] = -1
			if n%T < T-1 {
				bt.Targets[n] = bt.Tokens[n+1]
			}
		}
		batches[i] = bt
	}
	for n := range dlogp {
		if n%T < T-1 {
			dlogp[n] = -float32(r.NormFloat64()) / float32(seqs*T)
		}
	}
	a := m.NewActs(micro, T)
	opt := NewAdamW(m, AdamWConfig{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1})
	for b.Loop() {
		m.ZeroGrads()
		for _, bt := range batches {
			if err := m.Forward(a, bt); err != nil {
				b.Fatal(err)
			}
			if err := m.Backward(a, dlogp, dent); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := opt.Update(m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seqs*T*b.N)/b.Elapsed().Seconds(), "tokens/s")
	if hwm := peakRSS(); hwm > 0 {
		b.ReportMetric(float64(hwm)/(1<<20), "peak-MiB")
	}
}

// peakRSS is the process's peak resident set size in bytes (Linux VmHWM).
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}
