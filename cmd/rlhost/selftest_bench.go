package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/urfave/cli/v2"
)

// benchFlags time a training step and a decode step of a checkpoint
// (`selftest --bench DIR`), for scripts/gpu/proof.sh.
var benchFlags = []cli.Flag{
	&cli.StringFlag{Name: "bench", Usage: "time a training step and a decode step of the checkpoint in this directory (one JSON line each)"},
	&cli.IntFlag{Name: "batch", Value: 4, Usage: "--bench: sequences per step"},
	&cli.IntFlag{Name: "seq", Value: 256, Usage: "--bench: tokens per training sequence; the decode prompt is seq/2 tokens"},
	&cli.IntFlag{Name: "new-tokens", Value: 64, Usage: "--bench: tokens each sequence decodes"},
	&cli.StringFlag{Name: "dtype", Value: "bfloat16", Usage: "--bench with --device cuda: how the products compute: bfloat16, tf32 or float32 (as actor_rollout_ref.actor.dtype)"},
	&cli.IntFlag{Name: "steps", Value: 5, Usage: "--bench: timed training steps (after one warm-up step); the median is reported"},
}

// benchResult is one measurement, as proof.sh reads it.
type benchResult struct {
	Kind         string  `json:"kind"` // "train" or "decode"
	Device       string  `json:"device"`
	Params       int     `json:"params"`
	B            int     `json:"batch"`
	T            int     `json:"seq"`
	Seconds      float64 `json:"seconds"` // median step (train) or whole generation (decode)
	Tokens       int     `json:"tokens"`  // tokens the step trained or generated
	TokensPerSec float64 `json:"tokens_per_s"`
	FLOP         float64 `json:"flop"` // 6 x params x tokens (train), 2 x params x tokens (decode)
	PeakBytes    int64   `json:"peak_device_bytes,omitempty"`
	UpBytes      int64   `json:"host_to_device_bytes_per_step,omitempty"`
	DownBytes    int64   `json:"device_to_host_bytes_per_step,omitempty"`
	Syncs        int64   `json:"syncs_per_step,omitempty"`
	Dtype        string  `json:"dtype"`              // the products' precision (float32 on the CPU)
	Products     string  `json:"products,omitempty"` // how they run (cuda: cuda.Precision.Path)
}

func selftestBench(w io.Writer, device, dir, dtype string, B, T, newTokens, steps int) error {
	var be gpu.Backend = cpu.New()
	prec, err := cuda.ParsePrecision(dtype)
	if err != nil {
		return cli.Exit("selftest: --dtype: "+err.Error(), 2)
	}
	if device == "cuda" {
		if be, err = cuda.New(); err != nil {
			return cli.Exit("selftest: "+err.Error(), 1)
		}
	}
	cb, _ := be.(*cuda.Backend)
	label, products := be.Name(), ""
	if cb != nil {
		cb.SetPrecision(prec)
		label, products = be.Name()+"/"+prec.String(), prec.Path()
	} else {
		prec = cuda.FP32
	}
	var free0 int64
	if cb != nil {
		free0, _, _ = cb.MemInfo()
	}
	peak := func() int64 {
		if cb == nil {
			return 0
		}
		free, _, _ := cb.MemInfo()
		return free0 - free
	}
	ck, err := weights.Load(dir)
	if err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	m, err := model.New(be, ck)
	if err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	c := m.Config
	params := c.NumParams()
	r := rand.New(rand.NewPCG(1, 2))
	batch := model.Batch{B: B, T: T, Tokens: make([]int32, B*T), Targets: make([]int32, B*T)}
	dlogp, dent := make([]float32, B*T), make([]float32, B*T)
	for n := range batch.Tokens {
		batch.Tokens[n] = int32(r.IntN(c.V))
	}
	for n := range batch.Targets {
		batch.Targets[n] = -1
		if n%T < T-1 {
			batch.Targets[n] = batch.Tokens[n+1]
			dlogp[n] = -1 / float32(B*T)
		}
	}
	m.EnableGrads()
	a := m.NewActs(B, T)
	opt := model.NewAdamW(m, model.AdamWConfig{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1})
	one := make([]float32, 1)
	step := func() error {
		m.ZeroGrads()
		if err := m.Forward(a, batch); err != nil {
			return err
		}
		if err := m.Backward(a, dlogp, dent); err != nil {
			return err
		}
		if _, err := opt.Update(m); err != nil {
			return err
		}
		be.Download(one, m.Params.Data[:1]) // wait for the update
		return nil
	}
	if err := step(); err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	var c0 cuda.Counters
	if cb != nil {
		c0 = cb.Counters()
	}
	var times []float64
	for range max(1, steps) {
		start := time.Now()
		if err := step(); err != nil {
			return cli.Exit("selftest: "+err.Error(), 1)
		}
		times = append(times, time.Since(start).Seconds())
	}
	sort.Float64s(times)
	res := benchResult{Kind: "train", Device: label, Params: params, B: B, T: T, Seconds: times[len(times)/2],
		Tokens: B * T, FLOP: 6 * float64(params) * float64(B*T), PeakBytes: peak(), Dtype: prec.String(), Products: products}
	res.TokensPerSec = float64(res.Tokens) / res.Seconds
	if cb != nil {
		c1 := cb.Counters()
		n := int64(len(times))
		res.UpBytes, res.DownBytes = (c1.HostToDevice-c0.HostToDevice)/n, (c1.DeviceToHost-c0.DeviceToHost)/n
		res.Syncs = (c1.Syncs - c0.Syncs) / n
	}
	if err := json.NewEncoder(w).Encode(res); err != nil {
		return err
	}
	a.Free()

	// decode: B greedy sequences, prompts of T/2 tokens, newTokens each
	P := max(1, T/2)
	g, err := m.NewGenerator(B, P+newTokens)
	if err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	reqs := make([]model.Request, B)
	for i := range reqs {
		prompt := make([]int32, P)
		for j := range prompt {
			prompt[j] = int32(r.IntN(c.V))
		}
		reqs[i] = model.Request{Prompt: prompt, Sample: model.SampleConfig{MaxTokens: newTokens, IgnoreEOS: true}}
	}
	g.NoPrefixSharing = true
	if _, err := g.Generate(reqs[:1]); err != nil { // warm-up
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	if cb != nil {
		c0 = cb.Counters()
	}
	start := time.Now()
	out, err := g.Generate(reqs)
	if err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	secs := time.Since(start).Seconds()
	toks := 0
	for _, o := range out {
		toks += len(o.Tokens)
	}
	res = benchResult{Kind: "decode", Device: label, Params: params, B: B, T: P + newTokens, Seconds: secs,
		Tokens: toks, TokensPerSec: float64(toks) / secs, FLOP: 2 * float64(params) * float64(toks), PeakBytes: peak(),
		Dtype: prec.String(), Products: products}
	if cb != nil {
		c1 := cb.Counters()
		steps := int64(newTokens)
		res.UpBytes, res.DownBytes = (c1.HostToDevice-c0.HostToDevice)/steps, (c1.DeviceToHost-c0.DeviceToHost)/steps
		res.Syncs = (c1.Syncs - c0.Syncs) / steps
	}
	return json.NewEncoder(w).Encode(res)
}

// benchArgs returns the --bench settings, or dir "" when not benchmarking.
func benchArgs(c *cli.Context) (dir string, B, T, newTokens, steps int, err error) {
	dir = c.String("bench")
	B, T, newTokens, steps = c.Int("batch"), c.Int("seq"), c.Int("new-tokens"), c.Int("steps")
	if dir != "" && (B <= 0 || T <= 1 || newTokens <= 0) {
		err = cli.Exit(fmt.Sprintf("selftest: --bench needs --batch > 0, --seq > 1 and --new-tokens > 0 (got %d, %d, %d)", B, T, newTokens), 2)
	}
	return
}
