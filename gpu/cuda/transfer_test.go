//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// The transfer tests run whole steps on the emulator and bound what the
// device's counters saw: tensors stay resident, only per-token inputs go up
// and per-token results and scalars come down, and the host waits a fixed
// number of times per step whatever the depth of the model.

func transferConfig(L int) model.Config {
	return model.Config{Family: "qwen2", V: 97, C: 64, F: 160, L: L, NH: 4, NKV: 2, HD: 16, MaxPos: 64,
		Eps: 1e-6, RopeTheta: 10000, QKVBias: true, BOS: 1, EOS: 2}
}

const transferB, transferT = 2, 8

func transferBatch(r *rand.Rand, c model.Config, scoredOnly bool) (model.Batch, []float32, []float32) {
	B, T := transferB, transferT
	b := model.Batch{B: B, T: T, Tokens: make([]int32, B*T), Targets: make([]int32, B*T), ScoredOnly: scoredOnly}
	dlogp, dent := make([]float32, B*T), make([]float32, B*T)
	for n := range b.Tokens {
		b.Tokens[n] = int32(r.IntN(c.V))
	}
	for n := range b.Targets {
		b.Targets[n] = -1
		if n%T >= 3 && n%T < T-1 { // a prompt of 3 tokens is not scored
			b.Targets[n] = b.Tokens[n+1]
			dlogp[n] = -1 / float32(B*T)
			dent[n] = 0.01
		}
	}
	return b, dlogp, dent
}

// policyStep is one training step of the policy: zero the gradients,
// forward, backward, clipped AdamW.
type policyStep struct {
	M     *model.Model
	a     *model.Acts
	Opt   *model.AdamW
	batch model.Batch
	dlogp []float32
	dent  []float32
}

func NewPolicyStep(t *testing.T, be *Backend, L int, scoredOnly bool) *policyStep {
	return newStep(t, be, L, scoredOnly, false)
}

// transferLoRA are the adapters of the LoRA transfer tests: every linear
// layer, rank 4.
var transferLoRA = model.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}, Seed: 5}

// withLoRA enables adapters on m, with B random too (a fresh B is 0), uploaded once.
func withLoRA(t *testing.T, m *model.Model, r *rand.Rand) {
	t.Helper()
	if err := m.EnableLoRA(transferLoRA); err != nil {
		t.Fatal(err)
	}
	lo := m.LoRA()
	m.Backend().Upload(lo.Data, checkutil.Randn(r, len(lo.Data), 0.05))
	lo.Changed()
}

func newStep(t *testing.T, be *Backend, L int, scoredOnly, lora bool) *policyStep {
	c := transferConfig(L)
	r := rand.New(rand.NewPCG(21, uint64(L)))
	m := model.NewZero(be, c)
	m.Params.Upload(checkutil.Randn(r, c.NumParams(), 0.05))
	if lora {
		withLoRA(t, m, r)
	} else {
		m.EnableGrads()
	}
	s := &policyStep{M: m, a: m.NewActs(transferB, transferT)}
	s.Opt = model.NewAdamW(m, model.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, MaxGradNorm: 1})
	s.batch, s.dlogp, s.dent = transferBatch(r, c, scoredOnly)
	return s
}

func (s *policyStep) Run(t *testing.T) {
	s.M.ZeroGrads()
	if err := s.M.Forward(s.a, s.batch); err != nil {
		t.Fatal(err)
	}
	if err := s.M.Backward(s.a, s.dlogp, s.dent); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Opt.Update(s.M); err != nil {
		t.Fatal(err)
	}
}

// Counted runs f after a warm-up call (the staging arena settles) and
// returns the counts of the second call.
func Counted(be *Backend, f func()) Counters {
	f()
	be.ResetCounters()
	f()
	return be.Counters()
}

// policyIO is what a policy step must move: tokens and targets up, dlogp
// and dentropy up, log-probs and entropies down (4 bytes each per token),
// and the gradient norm (8 bytes).
func policyIO(N int) int64 { return int64(N)*6*4 + 8 }

// checkSteps fails when a step moved more than 4x its own inputs and
// outputs, copied anything parameter-sized, allocated, or waited more than
// maxSyncs times.
func checkSteps(t *testing.T, what string, got Counters, io, paramBytes int64, maxSyncs int64) {
	t.Helper()
	t.Logf("%s: %v (own I/O %d B)", what, got, io)
	if moved := got.HostToDevice + got.DeviceToHost; moved > 4*io {
		t.Errorf("%s moved %d bytes between host and device, more than 4x its %d bytes of inputs and outputs", what, moved, io)
	}
	if got.Largest >= paramBytes/4 {
		t.Errorf("%s made a copy of %d bytes, parameter-sized (the parameters are %d bytes)", what, got.Largest, paramBytes)
	}
	if got.Allocs != 0 {
		t.Errorf("%s allocated device memory %d times after the first step", what, got.Allocs)
	}
	if got.Syncs > maxSyncs {
		t.Errorf("%s synchronised %d times, more than %d", what, got.Syncs, maxSyncs)
	}
}

// stepLaunches are the kernel launches of the steps below in fp32 (the
// table "Transfers per step" in docs/gpu.md), by test and number of layers:
// a change to them (a fusion, a new pass) is a change to that table. The
// residual adds are fused with the RMSNorm that follows them (forward) and
// into the norm's backward (ResidualRMSNormForward/Backward), RoPE of q
// and k is one launch (RopeQKForward/Backward), and the input gradients of
// q/k/v, gate/up and the LoRA adapters are summed by the products
// themselves (MatmulBackward's accumulate): 23 launches a layer in a
// training step (41 with LoRA) where separate adds took 24 (49). The bias
// and RMSNorm weight gradients are two-pass column sums (colsum_finish
// after each: on the H200 the one-thread-per-column kernels took 21% of a
// Qwen2.5-0.5B step): 28 a layer (43 with LoRA). The MLP backward's
// SwiGLUBackwardH (dgate, dup and h in one pass) takes one launch fewer a
// layer than swiglu_forward recomputing h and swiglu_backward (the
// sequence before it): 27 (42). The policy's update clips inside
// AdamW (ClipAdamW): clip_coef is one launch a step more where the norm is
// below the bound, as here (where it clips, `scale` is one fewer); the
// critic's update (value.go) keeps ClipGradNorm. Generation runs the
// fused decode ops (decode.go) on the layers without adapters on q/k/v and
// gate/up: 6 launches a layer per forward where the separate ops took 11
// (Qwen2-shaped, with biases, and flash-decoding's attention in two
// launches, attention_cached_split and its combine: every forward here
// spans several chunks; on the Llama-shaped groups model, without biases,
// 2 fewer a layer); with adapters on q, k and v, RoPE and the cache writes
// are one launch where they were 3. Each sampling call whose rows the split
// path takes (all of these) launches its three kernels, where
// sample_tokens_hist was one.
var stepLaunches = map[string]int64{
	"L=1,scoredOnly=false": 39, "L=2,scoredOnly=false": 66,
	"L=1,scoredOnly=true": 41, "L=2,scoredOnly=true": 68,
	"critic L=1": 42, "critic L=2": 69,
	"LoRA L=1": 53, "LoRA L=2": 95,
	"decode lora=false": 76, "decode lora=true": 212,
	"groups + tool turn": 399,
}

// checkLaunches fails when a step's launches differ from stepLaunches.
func checkLaunches(t *testing.T, what string, got Counters) {
	t.Helper()
	if want, ok := stepLaunches[what]; !ok || got.Launches != want {
		t.Errorf("%s: %d kernel launches, want %d (update stepLaunches and docs/gpu.md together)", what, got.Launches, want)
	}
}

// TestTransferTrainStep: a policy training step (forward, backward, clip,
// AdamW) keeps every tensor on the device, and its synchronisations do not
// grow with the number of layers.
func TestTransferTrainStep(t *testing.T) {
	for _, scoredOnly := range []bool{false, true} {
		syncs := map[int]int64{}
		for _, L := range []int{1, 2} {
			name := fmt.Sprintf("L=%d,scoredOnly=%v", L, scoredOnly)
			be := openEmulator(t)
			s := NewPolicyStep(t, be, L, scoredOnly)
			got := Counted(be, func() { s.Run(t) })
			c := transferConfig(L)
			checkSteps(t, name, got, policyIO(transferB*transferT), int64(c.NumParams())*4, 8)
			checkLaunches(t, name, got)
			syncs[L] = got.Syncs
		}
		if syncs[1] != syncs[2] {
			t.Errorf("scoredOnly=%v: %d synchronisations with 1 layer, %d with 2: they must not depend on depth", scoredOnly, syncs[1], syncs[2])
		}
	}
}

// TestTransferCriticStep: the critic's step (forward to values, backward
// from dvalues, clip, AdamW over decoder and head) likewise.
func TestTransferCriticStep(t *testing.T) {
	syncs := map[int]int64{}
	for _, L := range []int{1, 2} {
		be := openEmulator(t)
		got := criticStep(t, be, L)
		c := transferConfig(L)
		// tokens and dvalues up, values down; two squared norms down
		io := int64(transferB*transferT)*3*4 + 16
		checkSteps(t, fmt.Sprintf("critic L=%d", L), got, io, int64(c.NumParams())*4, 8)
		checkLaunches(t, fmt.Sprintf("critic L=%d", L), got)
		syncs[L] = got.Syncs
	}
	if syncs[1] != syncs[2] {
		t.Errorf("critic: %d synchronisations with 1 layer, %d with 2", syncs[1], syncs[2])
	}
}

// criticStep runs the critic's step of an L-layer model (forward to
// values, backward from dvalues, clip, AdamW over decoder and head) twice
// on be and returns the counts of the second.
func criticStep(t *testing.T, be *Backend, L int) Counters {
	c := transferConfig(L)
	r := rand.New(rand.NewPCG(22, uint64(L)))
	body := model.NewZero(be, c)
	body.Params.Upload(checkutil.Randn(r, c.NumParams(), 0.05))
	vm := &model.ValueModel{Body: body, Head: be.Alloc("head", c.C+1), HeadGrad: be.Alloc("head grad", c.C+1)}
	be.Upload(vm.Head, checkutil.Randn(r, c.C+1, 0.05))
	va := vm.NewActs(transferB, transferT)
	opt := model.NewValueAdamW(vm, model.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MaxGradNorm: 1})
	b, dvalues, _ := transferBatch(r, c, false)
	return Counted(be, func() {
		vm.ZeroGrads()
		if err := vm.Forward(va, b); err != nil {
			t.Fatal(err)
		}
		if err := vm.Backward(va, dvalues); err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Update(vm); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTransferPlantedHostStaging: the same step with every op staging its
// operands through the host (as the backend did before) must fail the
// bounds; otherwise the tests above could not fail.
func TestTransferPlantedHostStaging(t *testing.T) {
	be := openEmulator(t)
	s := NewPolicyStep(t, be, 1, false)
	s.Run(t)
	be.d.stageHost = true
	defer func() { be.d.stageHost = false }()
	got := Counted(be, func() { s.Run(t) })
	io := policyIO(transferB * transferT)
	if moved := got.HostToDevice + got.DeviceToHost; moved <= 4*io {
		t.Errorf("with host staging planted a step moved %d bytes, within the bound %d: the bound cannot fail", moved, 4*io)
	}
	if got.Syncs <= 8 {
		t.Errorf("with host staging planted a step synchronised %d times: the bound cannot fail", got.Syncs)
	}
	if got.Largest < int64(transferConfig(1).V*transferConfig(1).C)*4 {
		t.Errorf("with host staging planted the largest copy was %d bytes: the parameter-sized bound cannot fail", got.Largest)
	}
}

// TestTransferLoRATrainStep: a LoRA training step (forward and backward
// through the adapters, clip and AdamW over them) keeps the adapters, their
// gradients, moments and scratch on the device: no copy as large as a
// quarter of the adapters (the smallest adapter tensor is larger than any
// per-token copy of the test), at most 4x the step's own I/O, syncs
// independent of depth.
func TestTransferLoRATrainStep(t *testing.T) {
	syncs := map[int]int64{}
	for _, L := range []int{1, 2} {
		be := openEmulator(t)
		s := newStep(t, be, L, false, true)
		got := Counted(be, func() { s.Run(t) })
		adapters := int64(len(s.M.LoRA().Data)) * 4
		checkSteps(t, fmt.Sprintf("LoRA L=%d", L), got, policyIO(transferB*transferT), adapters, 8)
		checkLaunches(t, fmt.Sprintf("LoRA L=%d", L), got)
		syncs[L] = got.Syncs
	}
	if syncs[1] != syncs[2] {
		t.Errorf("LoRA: %d synchronisations with 1 layer, %d with 2", syncs[1], syncs[2])
	}
}

// TestTransferLoRAPlantedHostStaging: with the adapters staged through the
// host at every op that uses them (as they were before they were resident),
// the bounds of TestTransferLoRATrainStep fail.
func TestTransferLoRAPlantedHostStaging(t *testing.T) {
	be := openEmulator(t)
	s := newStep(t, be, 1, false, true)
	s.Run(t)
	be.d.stageNamed = "LoRA"
	defer func() { be.d.stageNamed = "" }()
	got := Counted(be, func() { s.Run(t) })
	io := policyIO(transferB * transferT)
	adapters := int64(len(s.M.LoRA().Data)) * 4
	t.Logf("planted: %v", got)
	if moved := got.HostToDevice + got.DeviceToHost; moved <= 4*io {
		t.Errorf("with the adapters staged a step moved %d bytes, within the bound %d: the bound cannot fail", moved, 4*io)
	}
	if got.Largest < adapters/4 {
		t.Errorf("with the adapters staged the largest copy was %d bytes (adapters %d): the adapter-sized bound cannot fail", got.Largest, adapters)
	}
}

// decodeRun generates for 3 requests (prompt 3, 4 new tokens each, sampled
// with temperature, top-k and top-p) after a warm-up, and returns the
// counts of the second run, its number of forwards, and the bytes those
// forwards must move: per forward of N tokens and M sampled rows, the
// tokens, positions, slots and cache rows up (16N), the selected rows and
// the sampling parameters up (4M + 24M), the sampled ids and their
// log-probabilities down (8M): O(batch), never a row of logits.
func decodeRun(t *testing.T, be *Backend, lora bool, plant func()) (Counters, int64, int64) {
	t.Helper()
	c := transferConfig(2)
	r := rand.New(rand.NewPCG(23, 23))
	m := model.NewZero(be, c)
	m.Params.Upload(checkutil.Randn(r, c.NumParams(), 0.3))
	if lora {
		withLoRA(t, m, r)
	}
	const slots, prompt, maxTokens = 3, 3, 4
	g, err := m.NewGenerator(slots, 32)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []model.Request
	for i := 0; i < slots; i++ {
		sc := model.SampleConfig{MaxTokens: maxTokens, IgnoreEOS: true, Temperature: 0.9, TopK: 20, TopP: 0.9, Seed: uint64(i)}
		if i == 0 {
			sc.Temperature = 0 // greedy
		}
		reqs = append(reqs, model.Request{Prompt: []int32{int32(5 + i), 7, 9}, Sample: sc})
	}
	if _, err := g.Generate(reqs); err != nil { // warm-up: buffers grow to this size
		t.Fatal(err)
	}
	if plant != nil {
		plant()
	}
	be.ResetCounters()
	g.NoPrefixSharing = true
	res, err := g.Generate(reqs)
	if err != nil {
		t.Fatal(err)
	}
	got := be.Counters()
	steps := int64(len(res[0].Tokens)) // one prefill, then decode steps
	N := int64(slots*prompt) + int64(slots)*(steps-1)
	M := int64(slots) * steps
	return got, steps, 16*N + 36*M
}

// checkDecode fails when generation moved more than its per-step I/O, made
// a copy as large as one row of logits, allocated, or waited more than once
// per forward.
func checkDecode(t *testing.T, what string, got Counters, steps, io int64, V int) {
	t.Helper()
	t.Logf("%s: %d forwards: %v (own I/O %d B)", what, steps, got, io)
	if moved := got.HostToDevice + got.DeviceToHost; moved > io {
		t.Errorf("%s moved %d bytes in %d forwards, more than the %d bytes of ids, positions, sampling parameters, sampled ids and log-probs", what, moved, steps, io)
	}
	if got.Largest >= int64(V)*4 {
		t.Errorf("%s made a copy of %d bytes, at least a row of logits (%d)", what, got.Largest, V*4)
	}
	if got.Allocs != 0 {
		t.Errorf("%s allocated device memory %d times after the warm-up", what, got.Allocs)
	}
	if got.Syncs > steps {
		t.Errorf("%s synchronised %d times in %d forwards", what, got.Syncs, steps)
	}
}

// TestTransferDecodeStep: decode steps, sampled on the device, with and
// without LoRA adapters, move O(batch) bytes: ids, positions and sampling
// parameters up, sampled ids and log-probs down.
func TestTransferDecodeStep(t *testing.T) {
	for _, lora := range []bool{false, true} {
		got, steps, io := decodeRun(t, openEmulator(t), lora, nil)
		checkDecode(t, fmt.Sprintf("decode lora=%v", lora), got, steps, io, transferConfig(2).V)
		checkLaunches(t, fmt.Sprintf("decode lora=%v", lora), got)
	}
}

// TestTransferDecodePlanted: sampling on the host (the logits [M,V] come
// down each step) and adapters staged through the host each fail the
// decode bounds.
func TestTransferDecodePlanted(t *testing.T) {
	V := transferConfig(2).V
	be := openEmulator(t)
	got, steps, io := decodeRun(t, be, false, func() { be.d.sampleHook = be.d.sampleHost })
	t.Logf("planted host sampling: %v", got)
	if got.DeviceToHost+got.HostToDevice <= io || got.Largest < int64(3*V)*4 {
		t.Errorf("with host sampling planted, %d forwards moved %d bytes (largest copy %d): the decode bounds cannot fail", steps, got.DeviceToHost+got.HostToDevice, got.Largest)
	}
	be = openEmulator(t)
	got, _, io = decodeRun(t, be, true, func() { be.d.stageNamed = "LoRA" })
	t.Logf("planted adapter staging: %v", got)
	if got.DeviceToHost+got.HostToDevice <= io || got.Largest < int64(V)*4 {
		t.Errorf("with the adapters staged, generation moved %d bytes (largest copy %d): the decode bounds cannot fail", got.DeviceToHost+got.HostToDevice, got.Largest)
	}
}

// TestTransferMixedPrecision: in BF16 a training step (plain and LoRA) and
// generation, and in TF32 a training step, move exactly what they move in
// FP32 (the weights' bfloat16 copies are made and refreshed on the device:
// no byte, copy, synchronisation or allocation more after the first step); only kernel
// launches are added in BF16 (the conversions of the activations for each
// product, and of the parameters once per step after AdamW).
func TestTransferMixedPrecision(t *testing.T) {
	same := func(t *testing.T, what string, got, want Counters) {
		t.Helper()
		t.Logf("%s: %v", what, got)
		g, w := got, want
		g.Launches, w.Launches = 0, 0
		// the same launches, some of them in graphs (which steps replay one
		// depends on the arena's growth, i.e. on the kernels)
		g.GraphKernels, w.GraphKernels, g.GraphLaunches, w.GraphLaunches = 0, 0, 0, 0
		g, w = g.Counts(), w.Counts() // the times apart
		if g != w {
			t.Errorf("%s: %v, in fp32 %v", what, got, want)
		}
	}
	for _, lora := range []bool{false, true} {
		var fp32 Counters
		precisions := []Precision{FP32, BF16, TF32}
		if lora {
			precisions = precisions[:2]
		}
		for _, p := range precisions {
			be := openEmulator(t)
			be.SetPrecision(p)
			s := newStep(t, be, 2, false, lora)
			got := Counted(be, func() { s.Run(t) })
			if p == FP32 {
				fp32 = got
				continue
			}
			same(t, fmt.Sprintf("training step lora=%v %v", lora, p), got, fp32)
			if p == BF16 && got.Launches <= fp32.Launches {
				t.Errorf("lora=%v: %d launches in bf16, %d in fp32: no conversions ran", lora, got.Launches, fp32.Launches)
			}
		}
	}
	var fp32 Counters
	for _, p := range []Precision{FP32, BF16} {
		be := openEmulator(t)
		be.SetPrecision(p)
		got, _, _ := decodeRun(t, be, false, nil)
		if p == FP32 {
			fp32 = got
			continue
		}
		same(t, "generation "+p.String(), got, fp32)
	}
}

// countedGen is the emulator's backend as the groups workload's model sees
// it, counting the forwards (one SampleTokens each) and the copies the
// generator asks for (Copy: its prefix copies); hostCopy plants a prefix copy
// through the host (download, then upload).
type countedGen struct {
	*Backend
	forwards, copies, copied int64
	// the tokens of decode steps copied from the previous step's samples
	// (overlap scheduling: gpu.DecodeOverlap)
	tokCopies, tokCopied int64
	hostCopy             bool
}

func (c *countedGen) CopyInt32(dst, src []int32) {
	c.tokCopies++
	c.tokCopied += int64(min(len(dst), len(src)))
	c.Backend.CopyInt32(dst, src)
}

func (c *countedGen) SampleTokens(tokens []int32, logp []float32, logits []float32, params []gpu.SampleParams, M, V int) {
	c.forwards++
	c.Backend.SampleTokens(tokens, logp, logits, params, M, V)
}

func (c *countedGen) Copy(dst, src []float32) {
	c.copies++
	c.copied += int64(min(len(dst), len(src)))
	if c.hostCopy {
		h := make([]float32, min(len(dst), len(src)))
		c.Backend.Download(h, src[:len(h)])
		c.Backend.Upload(dst[:len(h)], h)
		return
	}
	c.Backend.Copy(dst, src)
}

// groupsPrompts are the prompt tokens of the groups workload's two rounds
// prefilled and shared (groupsWorkload). Round 1: A0 prefills its 18
// tokens; A1 and A2 copy 17 from A0's slot and run the last; B0 takes A0's
// slot when it finishes, whose first 6 tokens (the system prompt) are
// already there, and prefills 14; B1 and B2 copy 19 from B0's slot: 36
// prefilled, 78 shared. Round 2: the tool turns of B2, B1, B0 (finished
// last) find their conversations in their own slots (prompt + response but
// its last token: 25, 24, 23) and run 4 tokens each; those of A2, A1, A0
// share only the system prompt and prefill the rest (21, 20, 19): 72
// prefilled, 90 shared.
var groupsPrompts = [2][2]int{{36, 78}, {72, 90}}

// groupsTransfer runs the groups workload on the emulator, after a warm-up
// Run when warm (Params.Changed between the two empties the cache, so the
// second schedules the same), and returns the counts of the last run, its
// rounds and the generator's own copies and forwards.
func groupsTransfer(t *testing.T, warm bool, plant func(*countedGen, *model.Generator)) (Counters, [2]checkutil.GroupsRound, *countedGen) {
	t.Helper()
	be := openEmulator(t)
	cg := &countedGen{Backend: be}
	w := checkutil.NewGroupsWorkload()
	m, g, err := w.Generator(cg)
	if err != nil {
		t.Fatal(err)
	}
	if warm {
		if _, err := w.Run(g); err != nil {
			t.Fatal(err)
		}
		m.Params.Changed()
	}
	if plant != nil {
		plant(cg, g)
	}
	cg.forwards, cg.copies, cg.copied, cg.tokCopies, cg.tokCopied = 0, 0, 0, 0, 0
	be.ResetCounters()
	rounds, err := w.Run(g)
	if err != nil {
		t.Fatal(err)
	}
	return be.Counters(), rounds, cg
}

// groupsIO is what the groups workload must move: 16 B per token run
// (ids, positions, slots, cache rows up) and 36 B per sampled row (selected
// row and sampling parameters up, sampled id and log-prob down), with the
// prompt tokens of groupsPrompts prefilled and every generated token but a
// request's last run as a decode token; and the tokens and rows.
func groupsIO(rounds [2]checkutil.GroupsRound) (io, N, M int64) {
	for n, r := range rounds {
		N += int64(groupsPrompts[n][0])
		for _, res := range r.Results {
			N += int64(len(res.Tokens) - 1)
			M += int64(len(res.Tokens))
		}
	}
	return 16*N + 36*M, N, M
}

// TestTransferGenerateGroups: a GRPO rollout with a tool turn
// (groupsWorkload: groups of samples, slots refilled mid-run, the tool turn
// appended to the conversations' caches) moves only its per-token and
// per-row I/O between host and device: the prefix copies stay on the device
// (counted apart: as many as the generator made, of as many floats) and the
// tool turns' reuse of their slots moves nothing; no allocation after the
// warm-up; no synchronisation: a wait for each forward's samples alone,
// made after the next forward is queued (overlap scheduling), whose decode
// tokens are copied on the device from those samples (4 B a token, counted
// apart like the prefix copies).
func TestTransferGenerateGroups(t *testing.T) {
	got, rounds, cg := groupsTransfer(t, true, nil)
	io, N, M := groupsIO(rounds)
	t.Logf("groups + tool turn: %d forwards, %d tokens run, %d sampled: %v (own I/O %d B); the generator copied %d floats in %d copies",
		cg.forwards, N, M, got, io, cg.copied, cg.copies)
	for n, r := range rounds {
		if r.Prefill != groupsPrompts[n][0] || r.Share != groupsPrompts[n][1] {
			t.Errorf("round %d: %d prompt tokens prefilled, %d shared; want %d and %d", n+1, r.Prefill, r.Share, groupsPrompts[n][0], groupsPrompts[n][1])
		}
	}
	checkDecode(t, "groups + tool turn", got, cg.forwards, io, checkutil.GroupsConfig.V)
	checkLaunches(t, "groups + tool turn", got)
	if cg.copies == 0 || got.DeviceCopies != cg.copies+cg.tokCopies || got.DeviceToDevice != 4*(cg.copied+cg.tokCopied) {
		t.Errorf("the device copied %d B in %d copies; the generator asked for %d floats in %d copies and %d tokens in %d",
			got.DeviceToDevice, got.DeviceCopies, cg.copied, cg.copies, cg.tokCopied, cg.tokCopies)
	}
	// the decode tokens of every forward but the few after an admission
	// (read first: the prefill's slot must be known) come from the device
	if got.Syncs != 0 || got.DownloadWaits != cg.forwards || cg.tokCopied == 0 || cg.tokCopied > N-int64(groupsPrompts[0][0]+groupsPrompts[1][0]) {
		t.Errorf("%d syncs and %d waits for samples in %d forwards, %d decode tokens copied on the device of %d: want no sync, a wait a forward",
			got.Syncs, got.DownloadWaits, cg.forwards, cg.tokCopied, N-int64(groupsPrompts[0][0]+groupsPrompts[1][0]))
	}
	t.Logf("decode tokens from the device: %d in %d copies", cg.tokCopied, cg.tokCopies)
}

// TestTransferGenerateGroupsPlanted: a prefix copy through the host, and
// prompts prefilled again instead of shared, each fail the bounds of
// TestTransferGenerateGroups (one run each, without the warm-up: the
// allocations are not what they plant).
func TestTransferGenerateGroupsPlanted(t *testing.T) {
	got, rounds, cg := groupsTransfer(t, false, func(cg *countedGen, _ *model.Generator) { cg.hostCopy = true })
	io, _, _ := groupsIO(rounds)
	t.Logf("planted prefix copy through the host: %v (own I/O %d B)", got, io)
	if moved := got.HostToDevice + got.DeviceToHost; moved <= io || got.DeviceCopies != cg.tokCopies {
		t.Errorf("with the prefix copies through the host the workload moved %d bytes (bound %d), %d device copies: the bound cannot fail", moved, io, got.DeviceCopies)
	}
	got, rounds, _ = groupsTransfer(t, false, func(_ *countedGen, g *model.Generator) { g.NoPrefixSharing = true })
	io, _, _ = groupsIO(rounds)
	t.Logf("planted re-prefill: %v (own I/O %d B with sharing)", got, io)
	if moved := got.HostToDevice + got.DeviceToHost; moved <= io || rounds[1].Share != 0 {
		t.Errorf("with every prompt prefilled the workload moved %d bytes (bound %d), shared %d tokens in round 2: the bound cannot fail", moved, io, rounds[1].Share)
	}
}

// sampleHost is the planted bug of TestTransferDecodePlanted (set as
// device.sampleHook): the
// logits [M,V] come down and the host samples them, as generation did
// before sampling ran on the device.
func (d *device) sampleHost(a *arena, tokens []int32, logp []float32, logits []float32, params []gpu.SampleParams, M, V int) bool {
	h := make([]float32, M*V)
	if err := d.dtoh(unsafe.Pointer(&h[0]), a.in(logits, M*V), int64(M*V)*4); err != nil {
		panic(&Error{"", err})
	}
	ids, lp := make([]int32, M), make([]float32, M)
	cpu.New().SampleTokens(ids, lp, h, params, M, V)
	// the outputs may be tensors (overlap scheduling samples into the
	// generator's): those go up
	d.putBack(unsafe.Pointer(&tokens[0]), unsafe.Pointer(&ids[0]), int64(M)*4)
	if logp != nil {
		d.putBack(unsafe.Pointer(&logp[0]), unsafe.Pointer(&lp[0]), int64(M)*4)
	}
	return true
}
