// Package cudacheck compares every op of the CUDA backend (gpu/cuda), its
// cuBLAS products, training steps and generation with the CPU reference
// gpu/cpu on seeded random inputs, in llm.c's dev/cuda manner: `rlhost
// selftest --device cuda` runs Checks on a GPU, `make cuda-emu-test` on the
// kernel emulator, and the package's own tests on gpu/cpu itself, with and
// without an error planted in one op. It sits above gpu/cuda, as gpu/model
// does, so the backend imports neither gpu/model nor gpu/cpu.
package cudacheck

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// Check compares one op (or a training step) of a Device with the CPU
// reference gpu/cpu on seeded random inputs, in llm.c's dev/cuda manner. Run
// returns an error naming the tensor and the worst element when the two
// disagree beyond the tolerance.
type Check struct {
	Name string
	Run  func(d Device) error
}

// Do runs the check, turning a device failure (ops panic with an *Error)
// into its error.
func (c Check) Do(d Device) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*cuda.Error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	return c.Run(d)
}

// Device is what the checks exercise: the op set, the cuBLAS products gpu.Backend
// lacks, and resident tensors (gpu.Memory). *Backend implements it (with -tags cuda); the
// package tests also run the checks on a CPU implementation, so that the
// Checks themselves are tested where there is no GPU.
type Device interface {
	gpu.Backend
	// SgemmStridedBatched is Sgemm over count products whose operands start
	// strideA, strideB, strideC floats apart.
	SgemmStridedBatched(transA, transB bool, M, N, K int, alpha float32, A []float32, lda, strideA int,
		B []float32, ldb, strideB int, beta float32, C []float32, ldc, strideC, count int)
	// GemmEx is Sgemm on fp32 operands with the given compute type.
	GemmEx(transA, transB bool, M, N, K int, alpha float32, A []float32, lda int,
		B []float32, ldb int, beta float32, C []float32, ldc int, compute cuda.ComputeType)
	// SetPrecision and Precision: how MatmulForward and MatmulBackward compute.
	SetPrecision(p cuda.Precision)
	Precision() cuda.Precision
	// ToBF16 rounds x to bfloat16 (out gets the bits) on the device.
	ToBF16(out []uint16, x []float32)
	// GemmBF16 is Sgemm with A and B rounded to bfloat16 on the device and
	// fp32 accumulation (cublasGemmEx).
	GemmBF16(transA, transB bool, M, N, K int, alpha float32, A []float32, lda int,
		B []float32, ldb int, beta float32, C []float32, ldc int)
	// GemmStridedBatchedBF16 is GemmBF16 over count products
	// (cublasGemmStridedBatchedEx).
	GemmStridedBatchedBF16(transA, transB bool, M, N, K int, alpha float32, A []float32, lda, strideA int,
		B []float32, ldb, strideB int, beta float32, C []float32, ldc, strideC, count int)
}

// Checks lists a comparison for every op of gpu.Backend, the cuBLAS
// wrappers and a tiny training step; the package tests and
// `rlhost selftest --device cuda` run them.
var Checks = []Check{
	{"Sgemm", checkSgemm},
	{"SgemmStridedBatched", checkSgemmStridedBatched},
	{"GemmExTF32", checkGemmEx},
	{"ToBF16", CheckToBF16},
	{"GemmBF16", CheckGemmBF16},
	{"GemmStridedBatchedBF16", CheckGemmStridedBatchedBF16},
	{"Embedding", checkEmbedding},
	{"RMSNorm", checkRMSNorm},
	{"ResidualRMSNorm", CheckResidualRMSNorm},
	{"Matmul", CheckMatmul},
	{"MatmulBF16", CheckMatmulBF16},
	{"MatmulTF32", CheckMatmulTF32},
	{"Rope", checkRope},
	{"RopeQK", CheckRopeQK},
	{"DecodeQKV", CheckDecodeQKV},
	{"SwiGLURows", CheckSwiGLURows},
	{"DecodeProducts", checkDecodeProducts},
	{"Attention", checkAttention},
	{"AttentionCached", CheckAttentionCached},
	{"AttentionVarlen", CheckAttentionVarlen},
	{"MMAFragments", CheckMMAFragments},
	{"AttentionVarlenMMA", CheckAttentionVarlenMMA},
	{"AttentionWindow", checkAttentionWindow},
	{"AttentionVarlenWindow", checkAttentionVarlenWindow},
	{"AttentionVarlenWindowMMA", checkAttentionVarlenWindowMMA},
	{"AttentionCachedWindow", checkAttentionCachedWindow},
	{"SwiGLU", checkSwiGLU},
	{"SwiGLUBackwardH", CheckSwiGLUBackwardH},
	{"GeGLU", checkGeGLU},
	{"Softcap", checkSoftcap},
	{"Residual", checkResidual},
	{"Logprob", CheckLogprob},
	{"LogprobRows", checkLogprobRows},
	{"SumSquaresScale", checkSumSquaresScale},
	{"AdamW", CheckAdamW},
	{"ClipAdamW", CheckClipAdamW},
	{"Sample", checkSample},
	{"SampleShapes", CheckSampleShapes},
	{"SampleSplit", func(b Device) error { return CheckSampleSplit(b, SampleSplit{Takes: cuda.SampleSplits}) }},
	{"ResidentTensors", checkResident},
	{"TrainStep", CheckTrainStep},
	{"TrainStepPacked", checkTrainStepPacked},
	{"TrainStepBF16", CheckTrainStepBF16},
	{"TrainStepTF32", CheckTrainStepTF32},
	{"Generate", CheckGenerate},
	{"GenerateSampled", CheckGenerateSampled},
	{"GenerateSampleSplit", CheckGenerateSampleSplit},
	{"GenerateGroups", CheckGenerateGroups},
	{"GenerateQwen", checkGenerateQwen},
	{"DecodeGraph", CheckDecodeGraph},
	{"TrainStepWindow", checkTrainStepWindow},
	{"TrainStepWindowBF16", checkTrainStepWindowBF16},
	{"GenerateWindow", checkGenerateWindow},
}

// ---------------------------------------------------------------------------
// helpers

// ---------------------------------------------------------------------------
// matrix products

// ---------------------------------------------------------------------------
// ops

// checkResident runs ops on tensors from Alloc (uploaded, used in place,
// downloaded): Upload, an op, GatherRows, ScatterRows, Copy, Zero and
// Download must give what the CPU gives.
func checkResident(b Device) error {
	r := rand.New(rand.NewPCG(15, 15))
	const n, C = 10000, 100
	xs := checkutil.Randn(r, n, 1)
	x, y := b.Alloc("check x", n), b.Alloc("check y", n)
	defer b.Free(x)
	defer b.Free(y)
	b.Upload(x, xs)
	b.SwiGLUForward(y, x, x, n)
	want := make([]float32, n)
	checkutil.Ref.SwiGLUForward(want, xs, xs, n)
	if err := checkutil.Compare("resident swiglu", checkutil.Host(b, y), want, 1e-5); err != nil {
		return err
	}
	rows := []int32{7, 3, 99, 0, 42}
	idx := b.AllocInt32("check rows", len(rows))
	defer b.Free(idx)
	b.UploadInt32(idx, rows)
	g := b.Alloc("check gather", len(rows)*C)
	defer b.Free(g)
	b.GatherRows(g, x, idx, len(rows), C)
	wantG := make([]float32, len(rows)*C)
	checkutil.Ref.GatherRows(wantG, xs, rows, len(rows), C)
	if err := checkutil.Compare("gather rows", checkutil.Host(b, g), wantG, 0); err != nil {
		return err
	}
	b.Copy(y, x)
	b.ScatterRows(y, g, idx[1:], len(rows)-1, C) // rows 3, 99, 0, 42 get gathered rows 7, 3, 99, 0
	wantS := slices.Clone(xs)
	checkutil.Ref.ScatterRows(wantS, wantG, rows[1:], len(rows)-1, C)
	if err := checkutil.Compare("scatter rows", checkutil.Host(b, y), wantS, 0); err != nil {
		return err
	}
	b.Zero(y[C : 2*C])
	clear(wantS[C : 2*C])
	return checkutil.Compare("zero", checkutil.Host(b, y), wantS, 0)
}

// CheckTrainStep: a two-layer GQA model, forward, backward and one clipped
// AdamW step on both backends from the same weights; logits, log-probs,
// every gradient and the updated parameters are compared.
func CheckTrainStep(b Device) error { return trainStepCheck(b, nil) }

// checkTrainStepPacked is checkTrainStep on a packed batch (model.Batch
// Lengths: the attention over packed sequences inside the model).
func checkTrainStepPacked(b Device) error { return trainStepCheck(b, []int{7, 12, 5}) }

// trainStepCheck runs the step on a 2 x 12 batch, or packed sequences of
// the given lengths.
func trainStepCheck(b Device, lengths []int) error {
	c := model.Config{Family: "qwen2", V: 97, C: 64, F: 160, L: 2, NH: 4, NKV: 2, HD: 16, MaxPos: 64,
		Eps: 1e-6, RopeTheta: 10000, QKVBias: true, BOS: 1, EOS: 2}
	return trainStepCheckConfig(b, c, lengths)
}

// trainStepCheckConfig is trainStepCheck of the model c.
func trainStepCheckConfig(b Device, c model.Config, lengths []int) error {
	r := rand.New(rand.NewPCG(16, 16))
	init := checkutil.Randn(r, c.NumParams(), 0.05)
	mc, mg := model.NewZero(checkutil.Ref, c), model.NewZero(b, c)
	mc.Params.Upload(init)
	mg.Params.Upload(init)
	B, T := 2, 12
	if lengths != nil {
		B, T = 1, 0
		for _, n := range lengths {
			T += n
		}
	}
	batch := model.Batch{B: B, T: T, Tokens: make([]int32, B*T), Targets: make([]int32, B*T), Lengths: lengths}
	last := make([]bool, B*T) // the last token of a sequence: no target
	for n := range last {
		last[n] = n%T == T-1
	}
	for s, n := 0, 0; s < len(lengths); s++ {
		n += lengths[s]
		last[n-1] = true
	}
	dlogp, dent := make([]float32, B*T), make([]float32, B*T)
	for n := range batch.Tokens {
		batch.Tokens[n] = int32(r.IntN(c.V))
	}
	for n := range batch.Targets {
		batch.Targets[n] = -1
		if !last[n] {
			batch.Targets[n] = batch.Tokens[n+1]
			dlogp[n] = -1 / float32(B*T)
			dent[n] = 0.01
		}
	}
	cfg := model.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, MaxGradNorm: 1}
	var logits [2][]float32
	var logp [2][]float32
	var norms [2]float64
	var grads [2][][]float32 // each parameter's gradient, before the update (clipping may scale them in place)
	for i, m := range []*model.Model{mc, mg} {
		m.EnableGrads()
		a := m.NewActs(B, T)
		if lengths != nil {
			a = m.NewPackedActs(T)
		}
		if err := m.Forward(a, batch); err != nil {
			return fmt.Errorf("forward on %s: %w", m.Backend().Name(), err)
		}
		logits[i], logp[i] = checkutil.Host(m.Backend(), a.Logits), checkutil.Clone(a.Logp)
		if err := m.Backward(a, dlogp, dent); err != nil {
			return fmt.Errorf("backward on %s: %w", m.Backend().Name(), err)
		}
		for _, g := range m.Grads.Names {
			grads[i] = append(grads[i], checkutil.Host(m.Backend(), g.Data))
		}
		opt := model.NewAdamW(m, cfg)
		var err error
		if norms[i], err = opt.Update(m); err != nil {
			return err
		}
	}
	if err := checkutil.CompareAll(1e-4, "logits", logits[1], logits[0], "logp", logp[1], logp[0]); err != nil {
		return err
	}
	for i, info := range mc.Grads.Names {
		if err := checkutil.Compare("grad "+info.Name, grads[1][i], grads[0][i], 1e-4); err != nil {
			return err
		}
	}
	if math.Abs(norms[0]-norms[1]) > 1e-4*norms[0] {
		return fmt.Errorf("gradient norm %.8g on cuda, %.8g on cpu", norms[1], norms[0])
	}
	// The first AdamW step moves a parameter by lr*u(g) and its decay, u(g) =
	// g/(|g|+eps) of the clipped gradient: about sign(g), but steep where |g|
	// is within a few hundred eps of 0. There a gradient that differs by fp32
	// rounding (an H200 gave 4e-7 on a weight whose tensor's largest gradient
	// is 0.195) moves the step by up to 2*lr. So each parameter may differ by
	// lr times the largest change of u within gradNoise of the tensor's largest
	// gradient around the CPU's gradient, and by 1e-5 more; a gradient
	// further off than that (a broken backward, or the soft-cap's derivative
	// 1e-4 off) still shows, and checkAdamW checks the update itself.
	gotParams := checkutil.Host(b, mg.Params.Data)
	clip := 1.0
	if c := float64(cfg.MaxGradNorm) / (norms[0] + 1e-6); cfg.MaxGradNorm > 0 && c < 1 {
		clip = c
	}
	unit := func(g float64) float64 { return g / (math.Abs(g) + float64(cfg.Eps)) }
	i := 0
	for t, info := range mc.Grads.Names {
		top := 0.0
		for _, g := range grads[0][t] {
			top = max(top, math.Abs(float64(g)))
		}
		noise := gradNoise * top * clip
		for j, g32 := range grads[0][t] {
			if i >= len(mc.Params.Data) {
				return fmt.Errorf("the gradients' views hold more floats than the %d parameters", len(mc.Params.Data))
			}
			got, want, g := gotParams[i], mc.Params.Data[i], float64(g32)*clip
			tol := 1e-5 + float64(cfg.LR)*max(math.Abs(unit(g+noise)-unit(g)), math.Abs(unit(g-noise)-unit(g)))
			if d := math.Abs(float64(got - want)); d > tol || math.IsNaN(d) {
				return fmt.Errorf("params after AdamW %s [%d] = %g on cuda, %g on cpu (grad %g on cpu, %g on cuda; |diff| %.3g > %.3g)",
					info.Name, i, got, want, g32, grads[1][t][j], d, tol)
			}
			i++
		}
	}
	if i != len(mc.Params.Data) {
		return fmt.Errorf("the gradients' views hold %d floats, the parameters %d", i, len(mc.Params.Data))
	}
	return nil
}

// gradNoise bounds the difference of a gradient on the device from the CPU's
// in the training-step checks, relative to the largest gradient of its tensor
// (an H200 showed 2e-6 in fp32).
const gradNoise = 1e-5

// CheckGenerate: greedy generation with the KV cache (AttentionCachedForward
// for every new token), three requests over two slots so that a slot and its
// stale cache are reused; tokens must be equal and their log-probabilities
// close. Large weights (std 0.3) make a near tie in the argmax unlikely.
func CheckGenerate(b Device) error {
	c := model.Config{Family: "llama", V: 97, C: 64, F: 128, L: 2, NH: 4, NKV: 1, HD: 16, MaxPos: 64,
		Eps: 1e-5, RopeTheta: 10000, Tied: true, BOS: 1, EOS: 2}
	r := rand.New(rand.NewPCG(17, 17))
	init := checkutil.Randn(r, c.NumParams(), 0.3)
	return generateBoth(checkutil.Ref, b, c, init, greedyRequests(r, c.V, 3, 3, 4, 12), 2, "tokens")
}

// greedyRequests returns n greedy requests of maxTokens new tokens each (EOS
// ignored), request i's prompt first+step*i tokens below V drawn from r.
func greedyRequests(r *rand.Rand, V, n, first, step, maxTokens int) []model.Request {
	reqs := make([]model.Request, 0, n)
	for i := range n {
		prompt := make([]int32, first+step*i)
		for j := range prompt {
			prompt[j] = int32(r.IntN(V))
		}
		reqs = append(reqs, model.Request{Prompt: prompt, Sample: model.SampleConfig{MaxTokens: maxTokens, IgnoreEOS: true}})
	}
	return reqs
}

// generateBoth generates reqs with the same weights init on the reference backend and on b
// (slots sequences at a time, 32 positions) and requires the same tokens (what names them in
// the error) and log-probs within 1e-4.
func generateBoth(ref, b gpu.Backend, c model.Config, init []float32, reqs []model.Request, slots int, what string) error {
	var res [2][]model.Result
	for i, be := range []gpu.Backend{ref, b} {
		m := model.NewZero(be, c)
		m.Params.Upload(init)
		g, err := m.NewGenerator(slots, 32)
		if err != nil {
			return err
		}
		if res[i], err = g.Generate(reqs); err != nil {
			return fmt.Errorf("generate on %s: %w", be.Name(), err)
		}
	}
	for i := range reqs {
		want, got := res[0][i], res[1][i]
		if !slices.Equal(got.Tokens, want.Tokens) {
			return fmt.Errorf("request %d: %s %v on cuda, %v on cpu", i, what, got.Tokens, want.Tokens)
		}
		if err := checkutil.Compare(fmt.Sprintf("request %d logprobs", i), got.Logprobs, want.Logprobs, 1e-4); err != nil {
			return err
		}
	}
	return nil
}
