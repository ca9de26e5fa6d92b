package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
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

// benchFlags time a training step and decoding of a checkpoint
// (`selftest --bench DIR`), for scripts/gpu/proof.sh.
var benchFlags = []cli.Flag{
	&cli.StringFlag{Name: "bench", Usage: "time a training step and decoding of the checkpoint in this directory (one JSON line each)"},
	&cli.IntFlag{Name: "batch", Value: 4, Usage: "--bench: sequences per training step"},
	&cli.IntFlag{Name: "seq", Value: 256, Usage: "--bench: tokens per training sequence"},
	&cli.BoolFlag{Name: "packed", Value: true, Usage: "--bench: the training batch is packed (the sequences end to end, attention through AttentionVarlen: no T x T scores); false: a padded B x T batch"},
	&cli.IntFlag{Name: "decode-batch", Usage: "--bench: sequences decoded at once (0: --batch); a decode at batch 1 follows for the per-token latency"},
	&cli.IntFlag{Name: "prompt", Usage: "--bench: prompt tokens of each decoded sequence (0: seq/2)"},
	&cli.IntFlag{Name: "new-tokens", Value: 64, Usage: "--bench: tokens each sequence decodes"},
	&cli.StringFlag{Name: "dtype", Value: "bfloat16", Usage: "--bench with --device cuda: how the products compute: bfloat16, tf32 or float32 (as actor_rollout_ref.actor.dtype)"},
	&cli.IntFlag{Name: "steps", Value: 5, Usage: "--bench: timed training steps (after one warm-up step); the median is reported"},
	&cli.BoolFlag{Name: "profile", Usage: "--bench with --device cuda: after the timed lines, one JSON line (kind \"profile\") per phase, train, decode (--decode-batch) and decode-grpo, with the device time by kernel, cuBLAS call and copy of one more step run with profiling on (cuda.Backend.EnableProfile); the timed lines are unaffected"},
}

// openCUDA opens the CUDA backend of --device cuda (the emulator's tests
// replace it).
var openCUDA = cuda.New

// benchConfig is what --bench measures.
type benchConfig struct {
	Dir, Dtype       string
	B, T             int  // training batch
	Packed           bool // training batch packed (Batch.Lengths)
	DecodeB, Prompt  int  // decoding batch and prompt length
	NewTokens, Steps int
	Profile          bool // profile one more step of each phase (cuda)
}

// benchResult is one measurement, as proof.sh (proof_torch.py table) reads it.
type benchResult struct {
	// "train"; "decode" (greedy, no prefix sharing; batch 1 gives the
	// per-token latency); "decode-grpo" (groups of 8 samples of a prompt,
	// temperature 1, top-k 50, top-p 0.95, prefix sharing on)
	Kind         string  `json:"kind"`
	Device       string  `json:"device"`
	Params       int     `json:"params"`
	B            int     `json:"batch"`
	T            int     `json:"seq"`              // tokens per sequence (decode: prompt + new tokens)
	Prompt       int     `json:"prompt,omitempty"` // decode: prompt tokens per sequence
	Seconds      float64 `json:"seconds"`          // median step (train) or whole generation (decode)
	Tokens       int     `json:"tokens"`           // tokens the step trained or generated
	TokensPerSec float64 `json:"tokens_per_s"`
	// decode: seconds / new tokens per sequence, the time per token one
	// sequence sees (its prefill included)
	LatencyPerToken float64 `json:"per_token_latency_s,omitempty"`
	// model FLOPs: train 6 x params x tokens + 6 x L x NH x HD x T x tokens
	// (causal attention, forward and backward); decode 2 x params x tokens
	FLOP float64 `json:"flop"`
	// cuda: device memory taken from the driver since the backend opened
	// (cuMemGetInfo), after the step; the backend keeps freed tensors for
	// reuse, so this is its peak. Decode lines include the training state.
	PeakBytes int64 `json:"peak_device_bytes,omitempty"`
	// cuda, per training step or per decode forward (new tokens)
	UpBytes   int64 `json:"host_to_device_bytes_per_step,omitempty"`
	DownBytes int64 `json:"device_to_host_bytes_per_step,omitempty"`
	Syncs     int64 `json:"syncs_per_step,omitempty"`
	// cuda, decoding: the waits for a forward's samples alone per step
	// (overlap scheduling: docs/gpu.md, "Overlapping the host's work with
	// the device's"), in place of a synchronisation
	DownloadWaits float64 `json:"download_waits_per_step,omitempty"`
	// cuda: decode graphs launched per step (docs/gpu.md "Decode graphs";
	// absent with RLHOST_CUDA_GRAPHS=0), and the kernel launches the host
	// queued itself per step (those the graphs ran not counted)
	GraphLaunches  float64 `json:"graph_launches_per_step,omitempty"`
	QueuedLaunches float64 `json:"host_launches_per_step,omitempty"`
	// cuda: 1 - the host's time blocked on the device / wall time
	// (Counters.SyncWait): the share in which the host was not waiting on
	// the device, an upper bound on the device's idle share.
	HostFrac  *float64 `json:"host_frac,omitempty"`
	Dtype     string   `json:"dtype"`               // the products' precision (float32 on the CPU)
	Products  string   `json:"products,omitempty"`  // how they run (cuda: cuda.Precision.Path)
	Attention string   `json:"attention,omitempty"` // train: the attention ops the step ran
	Vocab     int      `json:"vocab"`
	// decode-grpo: prompt tokens run and copied from a slot with the same
	// prompt (model.Generator.PrefillTokens, SharedTokens)
	PrefillTokens *int `json:"prefill_tokens,omitempty"`
	SharedTokens  *int `json:"shared_tokens,omitempty"`
}

// benchArgs returns the --bench settings, or Dir "" when not benchmarking.
func benchArgs(c *cli.Context) (bc benchConfig, err error) {
	bc = benchConfig{Dir: c.String("bench"), Dtype: c.String("dtype"), B: c.Int("batch"), T: c.Int("seq"),
		Packed: c.Bool("packed"), DecodeB: c.Int("decode-batch"), Prompt: c.Int("prompt"),
		NewTokens: c.Int("new-tokens"), Steps: c.Int("steps"), Profile: c.Bool("profile")}
	if bc.DecodeB == 0 {
		bc.DecodeB = bc.B
	}
	if bc.Prompt == 0 {
		bc.Prompt = max(1, bc.T/2)
	}
	if bc.Dir != "" && (bc.B <= 0 || bc.T <= 1 || bc.NewTokens <= 0 || bc.DecodeB <= 0 || bc.Prompt <= 0) {
		err = cli.Exit(fmt.Sprintf("selftest: --bench needs --batch > 0, --seq > 1, --new-tokens > 0, --decode-batch >= 0 and --prompt >= 0 (got %d, %d, %d, %d, %d)",
			bc.B, bc.T, bc.NewTokens, bc.DecodeB, bc.Prompt), 2)
	}
	return
}

// bencher holds the model and backend of one --bench run.
type bencher struct {
	w      io.Writer
	be     gpu.Backend
	cb     *cuda.Backend // nil on the CPU
	m      *model.Model
	r      *rand.Rand
	label  string
	prec   cuda.Precision
	free0  int64
	params int
	// profile: one more step of each phase is profiled; the lines are
	// printed after the timed ones
	profile  bool
	profiles []profileLine
}

// profileLine is the device time by op of one profiled step of a phase
// (--profile), as proof.sh (proof_torch.py paths) reads it.
type profileLine struct {
	Kind   string `json:"kind"`  // "profile"
	Phase  string `json:"phase"` // "train", "decode" or "decode-grpo"
	Device string `json:"device"`
	B      int    `json:"batch"`
	T      int    `json:"seq"`
	// the profiled step's wall time (two event records per op included)
	// and the device time of its ops together
	WallMS   float64     `json:"wall_ms"`
	DeviceMS float64     `json:"device_ms"`
	Entries  []profileOp `json:"entries"`         // the most time first
	Error    string      `json:"error,omitempty"` // the profiled step failed (no entries)
}

// profileOp is one op of a profile: a kernel (kind "kernel"), a cuBLAS
// routine with operand types, transposes and column-major m x n x k
// ("cublas"), or a copy ("copy").
type profileOp struct {
	Op     string  `json:"op"`
	Kind   string  `json:"kind"`
	Calls  int64   `json:"calls"`
	MS     float64 `json:"ms"`      // device time of all calls
	MeanUS float64 `json:"mean_us"` // of one call
	Share  float64 `json:"share"`   // of the step's device time
}

// profileStep runs f once with the device's profiling on and keeps its
// line for the end. A failure is reported in the line ("error"), never
// fails the bench: the timed lines matter more than the profile.
func (b *bencher) profileStep(phase string, B, T int, f func() error) {
	if !b.profile || b.cb == nil {
		return
	}
	line := profileLine{Kind: "profile", Phase: phase, Device: b.label, B: B, T: T, Entries: []profileOp{}}
	if err := b.profileRun(&line, f); err != nil {
		line.Error = err.Error()
	}
	b.profiles = append(b.profiles, line)
}

func (b *bencher) profileRun(line *profileLine, f func() error) (err error) {
	if err := b.cb.EnableProfile(); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil { // a failed op of the backend panics
			err = errors.Join(err, fmt.Errorf("%v", r))
		}
		err = errors.Join(err, b.cb.DisableProfile())
	}()
	if err := b.cb.ResetProfile(); err != nil {
		return err
	}
	start := time.Now()
	if err := f(); err != nil {
		return err
	}
	wall := time.Since(start)
	p, err := b.cb.Profile()
	if err != nil {
		return err
	}
	line.WallMS, line.DeviceMS = round(wall.Seconds()*1e3, 1e3), round(p.Total.Seconds()*1e3, 1e4)
	for _, e := range p.Entries {
		line.Entries = append(line.Entries, profileOp{Op: e.Op, Kind: e.Kind, Calls: e.Calls,
			MS: round(e.Time.Seconds()*1e3, 1e4), MeanUS: round(e.Mean().Seconds()*1e6, 1e2), Share: round(e.Share, 1e5)})
	}
	return nil
}

// round is x to 1/per.
func round(x, per float64) float64 { return math.Round(x*per) / per }

func selftestBench(w io.Writer, device string, bc benchConfig) error {
	prec, err := cuda.ParsePrecision(bc.Dtype)
	if err != nil {
		return cli.Exit("selftest: --dtype: "+err.Error(), 2)
	}
	b := &bencher{w: w, be: cpu.New(), r: rand.New(rand.NewPCG(1, 2)), profile: bc.Profile}
	if bc.Profile && device != "cuda" {
		return cli.Exit("selftest: --profile needs --device cuda (it times the CUDA backend's kernels)", 2)
	}
	if device == "cuda" {
		if b.be, err = openCUDA(); err != nil {
			return cli.Exit("selftest: "+err.Error(), 1)
		}
	}
	b.cb, _ = b.be.(*cuda.Backend)
	b.label, b.prec = b.be.Name(), cuda.FP32
	if b.cb != nil {
		b.cb.SetPrecision(prec)
		b.label, b.prec = b.be.Name()+"/"+prec.String(), prec
		b.free0, _, _ = b.cb.MemInfo()
	}
	ck, err := weights.Load(bc.Dir)
	if err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	if b.m, err = model.New(b.be, ck); err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	b.params = b.m.Config.NumParams()
	if err := b.train(bc); err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	for _, B := range decodeBatches(bc.DecodeB) {
		if err := b.decode(B, bc.Prompt, bc.NewTokens, false, B == bc.DecodeB); err != nil {
			return cli.Exit("selftest: "+err.Error(), 1)
		}
	}
	if err := b.decode(bc.DecodeB, bc.Prompt, bc.NewTokens, true, true); err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	for _, l := range b.profiles {
		if err := json.NewEncoder(b.w).Encode(l); err != nil {
			return err
		}
	}
	return nil
}

// decodeBatches are the greedy decodes: the batch, then batch 1 for the latency.
func decodeBatches(B int) []int {
	if B == 1 {
		return []int{1}
	}
	return []int{B, 1}
}

func (b *bencher) peak() int64 {
	if b.cb == nil {
		return 0
	}
	free, _, _ := b.cb.MemInfo()
	return b.free0 - free
}

func (b *bencher) counters() cuda.Counters {
	if b.cb == nil {
		return cuda.Counters{}
	}
	return b.cb.Counters()
}

// perStep fills res's per-step counts from the counters between c0 and c1
// over n steps of wall seconds in all.
func (b *bencher) perStep(res *benchResult, c0, c1 cuda.Counters, n int64, wall float64) {
	if b.cb == nil || n <= 0 {
		return
	}
	d := c1.Sub(c0)
	res.UpBytes, res.DownBytes, res.Syncs = d.HostToDevice/n, d.DeviceToHost/n, d.Syncs/n
	res.DownloadWaits = float64(d.DownloadWaits) / float64(n)
	res.GraphLaunches = float64(d.GraphLaunches) / float64(n)
	res.QueuedLaunches = float64(d.Launches-d.GraphKernels) / float64(n)
	if wall > 0 {
		f := d.HostFrac(wall)
		res.HostFrac = &f
	}
}

func (b *bencher) result(kind string, B, T int) benchResult {
	res := benchResult{Kind: kind, Device: b.label, Params: b.params, B: B, T: T, Dtype: b.prec.String(), Vocab: b.m.Config.V}
	if b.cb != nil {
		res.Products = b.prec.Path()
	}
	return res
}

// train times forward, backward of a weighted log-prob loss, clip and AdamW
// on B random sequences of T tokens.
func (b *bencher) train(bc benchConfig) error {
	m, c, B, T := b.m, b.m.Config, bc.B, bc.T
	batch := model.Batch{B: B, T: T, Tokens: make([]int32, B*T), Targets: make([]int32, B*T)}
	dlogp, dent := make([]float32, B*T), make([]float32, B*T)
	for n := range batch.Tokens {
		batch.Tokens[n] = int32(b.r.IntN(c.V))
	}
	for n := range batch.Targets {
		batch.Targets[n] = -1
		if n%T < T-1 {
			batch.Targets[n] = batch.Tokens[n+1]
			dlogp[n] = -1 / float32(B*T)
		}
	}
	m.EnableGrads()
	var a *model.Acts
	attention := "AttentionForward/Backward (padded B x T, T x T scores)"
	if bc.Packed {
		batch.B, batch.T, batch.Lengths = 1, B*T, make([]int, B)
		for i := range batch.Lengths {
			batch.Lengths[i] = T
		}
		a = m.NewPackedActs(B * T)
		attention = fmt.Sprintf("AttentionVarlenForward/Backward (%d packed sequences of %d, no T x T scores)", B, T)
	} else {
		a = m.NewActs(B, T)
	}
	defer a.Free()
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
		b.be.Download(one, m.Params.Data[:1]) // wait for the update
		return nil
	}
	if err := step(); err != nil { // warm-up
		return err
	}
	c0 := b.counters()
	var times []float64
	total := 0.0
	for range max(1, bc.Steps) {
		start := time.Now()
		if err := step(); err != nil {
			return err
		}
		times = append(times, time.Since(start).Seconds())
		total += times[len(times)-1]
	}
	sort.Float64s(times)
	res := b.result("train", B, T)
	res.Seconds, res.Tokens, res.Attention = times[len(times)/2], B*T, attention
	res.TokensPerSec = float64(res.Tokens) / res.Seconds
	res.FLOP = 6*float64(b.params)*float64(B*T) + 6*float64(c.L*c.NH*c.HD)*float64(T)*float64(B*T)
	res.PeakBytes = b.peak()
	b.perStep(&res, c0, b.counters(), int64(len(times)), total)
	if err := json.NewEncoder(b.w).Encode(res); err != nil {
		return err
	}
	b.profileStep("train", B, T, step) // after the timed steps: they are unaffected
	return nil
}

// decode generates newTokens after random prompts of P tokens for B
// sequences: greedy without prefix sharing, or (grpo) groups of up to 8
// samples of a prompt at temperature 1 with prefix sharing, as a GRPO
// rollout does; sampling runs on the device where the backend has it.
// With --profile, profile runs the same generation once more, profiled.
func (b *bencher) decode(B, P, newTokens int, grpo, profile bool) error {
	c := b.m.Config
	g, err := b.m.NewGenerator(B, P+newTokens)
	if err != nil {
		return err
	}
	n := min(B, 8) // samples per prompt (grpo)
	reqs := make([]model.Request, B)
	var prompt []int32
	for i := range reqs {
		if !grpo || i%n == 0 {
			prompt = make([]int32, P)
			for j := range prompt {
				prompt[j] = int32(b.r.IntN(c.V))
			}
		}
		sc := model.SampleConfig{MaxTokens: newTokens, IgnoreEOS: true}
		if grpo {
			sc.Temperature, sc.TopK, sc.TopP, sc.Seed = 1, 50, 0.95, uint64(i+1)
		}
		reqs[i] = model.Request{Prompt: prompt, Sample: sc}
	}
	g.NoPrefixSharing = !grpo
	warm := []model.Request{{Prompt: []int32{1, 2, 3}, Sample: model.SampleConfig{MaxTokens: 4, IgnoreEOS: true}}}
	if _, err := g.Generate(warm); err != nil {
		return err
	}
	g.PrefillTokens, g.SharedTokens = 0, 0
	c0 := b.counters()
	start := time.Now()
	out, err := g.Generate(reqs)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	toks := 0
	for _, o := range out {
		toks += len(o.Tokens)
	}
	kind := "decode"
	if grpo {
		kind = "decode-grpo"
	}
	res := b.result(kind, B, P+newTokens)
	res.Prompt, res.Seconds, res.Tokens = P, secs, toks
	res.TokensPerSec, res.LatencyPerToken = float64(toks)/secs, secs/float64(newTokens)
	res.FLOP = 2 * float64(b.params) * float64(toks)
	res.PeakBytes = b.peak()
	b.perStep(&res, c0, b.counters(), int64(newTokens), secs)
	if grpo {
		pre, sh := g.PrefillTokens, g.SharedTokens
		res.PrefillTokens, res.SharedTokens = &pre, &sh
	}
	if err := json.NewEncoder(b.w).Encode(res); err != nil {
		return err
	}
	if !profile {
		return nil
	}
	b.profileStep(kind, B, P+newTokens, func() error { _, err := g.Generate(reqs); return err })
	return nil
}
