//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/cuda/internal/emu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/round"
	"github.com/rlhost/rlhost/gpu/model"
)

// The shared bfloat16 copy of the products' activation operands (bf16.go):
// how many conversions it saves, exactly, and that no product ever reads a
// copy of values its operand no longer holds.

// The paths the conversion counts are given for: each product converting
// its own operands (unsharedBF16, the reference path; the backend's
// products before the copies were shared), the shared activation copy
// alone (the backend before the producers wrote copies: no longer a path
// of the backend, kept for the figures in docs/bench/history/gpu-experiments.md), and the backend
// as it is (shared copies, written by their producers where the
// producer is RMSNormForward, ResidualRMSNormForward, SwiGLUForward or
// AdamW).
const (
	ownCopies = iota
	sharedCopies
	producedCopies
)

// stepConversions are the f32_to_bf16 launches and floats of one policy
// step (forward, backward, AdamW; not ScoredOnly) of N tokens in BF16,
// after a first step, and the floats whose copies producers wrote. Per
// layer and token the products read ln1 (q, k, v), the attention output
// (o), ln2 (gate, up), h (down) forward, and in the backward dres (down's
// input gradient), dres and h (down's weight gradient, a product of its
// own after SwiGLUBackwardH wrote h), dgate and ln2 (gate), dup and ln2
// (up), dres and the attention output (o), dq, dk, dv and ln1 (q, k, v);
// the LM head reads lnf forward
// and dlogits [N,V] and lnf backward; the parameters' copy (one tensor,
// its whole allocation) is converted once after AdamW. Shared, ln1 and
// ln2 are converted once for their products in each direction and lnf
// once for both directions: 6 conversions of C floats a layer and token
// fewer and one of lnf, 6 launches a layer and 1 fewer. Produced, the
// norms write ln1, ln2 and lnf (forward, and ln1 and ln2 again where the
// backward recomputes them) and SwiGLU h (forward, and recomputed by
// SwiGLUBackwardH), the backward's producers the output gradients dlogits
// (LogprobBackward), dres (the norms' backward: at the final norm, and at
// ln2 and ln1 of each layer), dgate and dup (SwiGLUBackwardH), dq and dk
// (RopeQKBackward), and AdamW the parameters' copy: left are the
// attention output (forward and backward), dv, and dres for down's weight
// gradient (SwiGLUBackwardH's copies of dgate and dup replaced the norm's
// copy of it), 4 launches a layer. The shared path is the backend as it
// was then, before SwiGLUBackwardH (the swiglu_recompute sequence: down's
// two gradients one product, h recomputed before it), the figures of
// docs/bench/history/gpu-experiments.md; the sequence since converts dres once more a layer there.
func stepConversions(c model.Config, N int, path int) (launches, floats, produced int64) {
	QD, KD, L := int64(c.NH*c.HD), int64(c.NKV*c.HD), int64(c.L)
	C, F, V := int64(c.C), int64(c.F), int64(c.V)
	n := int64(N)
	params := (int64(c.NumParams())*4 + 255) &^ 255 / 4
	switch path {
	case producedCopies:
		return 4 * L, n * L * (2*QD + KD + C), n*(L*(6*C+4*F+QD+KD)+2*C+V) + int64(c.NumParams())
	case sharedCopies:
		return 15*L + 3, n*(L*(6*C+3*QD+4*F+2*KD)+C+V) + params, 0
	}
	return 22*L + 4, n*(L*(13*C+3*QD+4*F+2*KD)+2*C+V) + params, 0
}

// decodeConversions are those of one generation forward of N tokens of
// which M rows are sampled: per layer ln1 (q, k, v), the attention output,
// ln2 (gate, up) and h, then the selected rows' final norm for the LM head;
// shared, ln1 and ln2 once each; produced, only the attention output (the
// norms and SwiGLU write the others' copies).
func decodeConversions(c model.Config, N, M int, path int) (launches, floats, produced int64) {
	QD, L, C, F := int64(c.NH*c.HD), int64(c.L), int64(c.C), int64(c.F)
	n, m := int64(N), int64(M)
	switch path {
	case producedCopies:
		return L, n * L * QD, n*L*(2*C+F) + m*C
	case sharedCopies:
		return 4*L + 1, n*L*(2*C+QD+F) + m*C, 0
	}
	return 7*L + 1, n*L*(5*C+QD+F) + m*C, 0
}

// sharedConversions are the measured f32_to_bf16 launches and floats of
// the steps of TestSharedBF16Conversions, unshared (the reference path, as
// before the copies were shared) and as the backend runs them (shared,
// produced), for the cases the formulas above do not cover: a change to
// them is a change to docs/gpu.md ("Mixed precision": conversions a step)
// and to the table in docs/bench/history/gpu-experiments.md. With LoRA the one copy
// alternates between a module's input and its adapter's u, so the backward
// shares little: the base product and the adapter's A read the same input
// forward, and the norms' and SwiGLU's copies serve the first product
// that reads them (SwiGLUBackwardH's h serves the down adapter's A
// gradient, whose du it converts twice: its dB and dh products run before
// the op, dA after).
var sharedConversions = map[string][2]convCounts{ // [unshared, produced]
	"ScoredOnly L=2": {{launches: 48, floats: 156104}, {launches: 9, floats: 7680, shared: 39, produced: 137672}},
	"LoRA L=2":       {{launches: 117, floats: 103440}, {launches: 68, floats: 25344, shared: 49, produced: 48400}},
	"critic L=2":     {{launches: 49, floats: 156496}, {launches: 9, floats: 7184, shared: 40, produced: 136961}},
	"decode LoRA":    {{launches: 172, floats: 40944}, {launches: 88, floats: 10224, shared: 84, produced: 11136}},
}

// TestSharedBF16Conversions counts the f32_to_bf16 conversions of a BF16
// policy step (1 and 2 layers, plain, ScoredOnly, LoRA), a critic step and
// generation (per forward), on the reference path that converts each
// product's operand on its own and as the backend runs them (copies
// shared, written by their producers), and requires both exactly, with
// the floats of the copies producers wrote: the plain step and generation
// as the formulas above say, the others as sharedConversions says. The
// launches are the profile's f32_to_bf16 calls too. It logs the counts,
// and the formulas at the shape of the proof's training step (Qwen2.5-0.5B,
// 8 x 1024 tokens) and its decode (per token), for the three paths.
func TestSharedBF16Conversions(t *testing.T) {
	// each use of a copy the product did not convert is one conversion
	// fewer: the backend reuses copies as many times as the reference
	// path launches more
	check := func(t *testing.T, what string, got convCounts, launches, floats, produced, reference int64, shared bool) {
		t.Helper()
		t.Logf("%s, shared=%v: %d f32_to_bf16 launches, %d floats converted, %d produced (%d bytes moved), %d products used a copy they did not convert",
			what, shared, got.launches, got.floats, got.produced, got.bytes(), got.shared)
		if got.launches != launches || got.floats != floats || got.produced != produced {
			t.Errorf("%s, shared=%v: %d launches converting %d floats, %d produced, want %d, %d and %d", what, shared,
				got.launches, got.floats, got.produced, launches, floats, produced)
		}
		if want := reference - launches; got.shared != want {
			t.Errorf("%s, shared=%v: %d products used a copy they did not convert, want %d", what, shared, got.shared, want)
		}
	}
	for _, shared := range []bool{false, true} {
		path := ownCopies
		if shared {
			path = producedCopies
		}
		for _, L := range []int{1, 2} {
			be := openEmulator(t)
			be.SetPrecision(BF16)
			be.d.unsharedBF16 = !shared
			s := NewPolicyStep(t, be, L, false)
			s.Run(t)
			if err := be.EnableProfile(); err != nil {
				t.Fatal(err)
			}
			be.ResetCounters()
			be.ResetProfile()
			s.Run(t)
			got := be.d.conv
			p, err := be.Profile()
			if err != nil {
				t.Fatal(err)
			}
			if e, _ := profileEntry(p, "f32_to_bf16"); e.Calls != got.launches {
				t.Errorf("L=%d: the profile has %d f32_to_bf16 calls, the conversions counted %d launches", L, e.Calls, got.launches)
			}
			launches, floats, produced := stepConversions(transferConfig(L), transferB*transferT, path)
			reference, _, _ := stepConversions(transferConfig(L), transferB*transferT, ownCopies)
			check(t, fmt.Sprintf("policy step L=%d", L), got, launches, floats, produced, reference, shared)
		}
		for _, tc := range []struct {
			name             string
			scoredOnly, lora bool
		}{{"ScoredOnly L=2", true, false}, {"LoRA L=2", false, true}} {
			be := openEmulator(t)
			be.SetPrecision(BF16)
			be.d.unsharedBF16 = !shared
			s := newStep(t, be, 2, tc.scoredOnly, tc.lora)
			Counted(be, func() { s.Run(t) })
			want := sharedConversions[tc.name][b2i(shared)]
			check(t, tc.name, be.d.conv, want.launches, want.floats, want.produced, sharedConversions[tc.name][0].launches, shared)
		}
		be := openEmulator(t)
		be.SetPrecision(BF16)
		be.d.unsharedBF16 = !shared
		criticStep(t, be, 2)
		want := sharedConversions["critic L=2"][b2i(shared)]
		check(t, "critic L=2", be.d.conv, want.launches, want.floats, want.produced, sharedConversions["critic L=2"][0].launches, shared)

		for _, lora := range []bool{false, true} {
			be := openEmulator(t)
			be.SetPrecision(BF16)
			be.d.unsharedBF16 = !shared
			be.SetDecodeFusion(false) // the separate q/k/v and gate/up products (fused: below)
			_, steps, _ := decodeRun(t, be, lora, nil)
			if lora {
				want := sharedConversions["decode LoRA"][b2i(shared)]
				check(t, "generation with LoRA", be.d.conv, want.launches, want.floats, want.produced,
					sharedConversions["decode LoRA"][0].launches, shared)
				continue
			}
			// decodeRun: 3 slots, prompts of 3, so a prefill of 9 tokens
			// and then steps-1 forwards of 3, each sampling 3 rows
			c := transferConfig(2)
			launches, floats, produced := decodeConversions(c, 9, 3, path)
			reference, _, _ := decodeConversions(c, 9, 3, ownCopies)
			for i := int64(1); i < steps; i++ {
				l, f, p := decodeConversions(c, 3, 3, path)
				r, _, _ := decodeConversions(c, 3, 3, ownCopies)
				launches, floats, produced, reference = launches+l, floats+f, produced+p, reference+r
			}
			check(t, fmt.Sprintf("generation, %d forwards", steps), be.d.conv, launches, floats, produced, reference, shared)
		}
		// with the fused decode ops (decode.go) q, k and v are one product,
		// and so are gate and up: each product converting its own input
		// converts what the shared copy alone converted (sharedCopies),
		// and no product uses another's copy; as the backend runs them,
		// the same as with the separate products (swiglu_rows writes h's
		// copy as swiglu_forward does), 3 products a layer and the LM
		// head using a copy they did not convert
		be = openEmulator(t)
		be.SetPrecision(BF16)
		be.d.unsharedBF16 = !shared
		_, steps, _ := decodeRun(t, be, false, nil)
		c := transferConfig(2)
		fusedPath := sharedCopies
		if shared {
			fusedPath = producedCopies
		}
		launches, floats, produced := decodeConversions(c, 9, 3, fusedPath)
		reference, _, _ := decodeConversions(c, 9, 3, sharedCopies)
		for i := int64(1); i < steps; i++ {
			l, f, p := decodeConversions(c, 3, 3, fusedPath)
			r, _, _ := decodeConversions(c, 3, 3, sharedCopies)
			launches, floats, produced, reference = launches+l, floats+f, produced+p, reference+r
		}
		check(t, fmt.Sprintf("generation with the fused decode ops, %d forwards", steps), be.d.conv, launches, floats, produced,
			reference, shared)
	}
	// Qwen2.5-0.5B, the proof's training step (8 x 1024 tokens) and a decode token
	q := qwen05
	for path, name := range []string{"own copies", "shared", "produced"} {
		l, f, p := stepConversions(q, 8*1024, path)
		dl, df, dp := decodeConversions(q, 1, 1, path)
		t.Logf("Qwen2.5-0.5B, %s: training step of 8192 tokens %d launches, %d floats converted, %d produced (%.1f GB moved); "+
			"decode %d launches, %d floats converted, %d produced (%d bytes) a token",
			name, l, f, p, float64(6*f+2*p)/1e9, dl, df, dp, 6*df+2*dp)
	}
}

// qwen05 is the Qwen2.5-0.5B shape (the proof's model).
var qwen05 = model.Config{V: 151936, C: 896, F: 4864, L: 24, NH: 14, NKV: 2, HD: 64, Tied: true, QKVBias: true}

// TestProducedBF16Bound: at the Qwen2.5-0.5B shape, a training step of
// 8 x 1024 tokens launches at most 4L = 96 conversions (363 with the
// copies shared alone, 532 with none) and moves at most 40% of the bytes
// the shared copies moved (17.0 GB of 43.2 GB), and a decode token
// launches at most L = 24 (97, 169); TestSharedBF16Conversions holds the
// emulator's steps to the same formulas exactly. It was 3L and 37% (15.9
// GB) before SwiGLUBackwardH: down's weight gradient now converts the
// residual stream's gradient again (N C floats a layer, 1.06 GB a step)
// where the step no longer reads gate and up a second time (8 bytes a
// float of N F a layer, 7.65 GB a step).
func TestProducedBF16Bound(t *testing.T) {
	const N = 8 * 1024
	l, f, p := stepConversions(qwen05, N, producedCopies)
	sl, sf, _ := stepConversions(qwen05, N, sharedCopies)
	if l > 96 || sl != 363 {
		t.Errorf("training step: %d launches (shared alone %d), want at most 96 (363)", l, sl)
	}
	if got, was := 6*f+2*p, 6*sf; float64(got) > 0.40*float64(was) {
		t.Errorf("training step: %d bytes moved by the copies, %d with the copies shared alone: more than 40%%", got, was)
	}
	dl, _, _ := decodeConversions(qwen05, 1, 1, producedCopies)
	sdl, _, _ := decodeConversions(qwen05, 1, 1, sharedCopies)
	if dl > int64(qwen05.L) || sdl != 97 {
		t.Errorf("decode token: %d launches (shared alone %d), want at most %d (97)", dl, sdl, qwen05.L)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sharedRun is what a BF16 run of two training steps (plain, ScoredOnly
// or LoRA) and a generation leaves: every log-probability and entropy of
// both forwards, the gradient norms, the trained tensors and their
// gradients, and the generated tokens and log-probabilities.
type sharedRun struct {
	logp, ent, tensors [][]float32
	norms              []float64
	tokens             [][]int32
	genLogp            [][]float32
}

// runShared runs them on a fresh emulator with the activation copies
// shared or not, each reuse verified (checkShared) if verify, and plant set
// as bf16.go's planted bug, or as an emulator kernel's defect when it is
// "kernel/defect".
func runShared(t *testing.T, shared, verify bool, plant string, scoredOnly, lora bool) (run sharedRun, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	if k, defect, ok := strings.Cut(plant, "/"); ok {
		emu.Planted[k] = defect
		defer delete(emu.Planted, k)
		plant = ""
	}
	be := openEmulator(t)
	be.SetPrecision(BF16)
	be.d.unsharedBF16, be.d.checkShared, be.d.plantBF16 = !shared, verify, plant
	s := newStep(t, be, 2, scoredOnly, lora)
	for range 2 {
		s.M.ZeroGrads()
		if err := s.M.Forward(s.a, s.batch); err != nil {
			return run, err
		}
		run.logp, run.ent = append(run.logp, checkutil.Clone(s.a.Logp)), append(run.ent, checkutil.Clone(s.a.Entropy))
		if err := s.M.Backward(s.a, s.dlogp, s.dent); err != nil {
			return run, err
		}
		norm, err := s.Opt.Update(s.M)
		if err != nil {
			return run, err
		}
		run.norms = append(run.norms, norm)
	}
	var trained [][]float32
	if lora {
		trained = [][]float32{s.M.LoRA().Data, s.M.LoRA().Grad}
	} else {
		trained = [][]float32{s.M.Params.Data, s.M.Grads.Data}
	}
	for _, x := range trained {
		h := make([]float32, len(x))
		be.Download(h, x)
		run.tensors = append(run.tensors, h)
	}
	g, err := s.M.NewGenerator(2, 24)
	if err != nil {
		return run, err
	}
	var reqs []model.Request
	for i := range 3 {
		sc := model.SampleConfig{MaxTokens: 5, IgnoreEOS: true, Temperature: 0.8, TopK: 30, TopP: 0.95, Seed: uint64(i)}
		reqs = append(reqs, model.Request{Prompt: []int32{int32(4 + i), 9, 11, int32(20 + i)}, Sample: sc})
	}
	res, err := g.Generate(reqs)
	if err != nil {
		return run, err
	}
	for _, r := range res {
		run.tokens, run.genLogp = append(run.tokens, r.Tokens), append(run.genLogp, r.Logprobs)
	}
	return run, nil
}

// sameBits reports the first difference between two runs, bit for bit.
func sameBits(got, want sharedRun) error {
	bits := func(what string, g, w [][]float32) error {
		if len(g) != len(w) {
			return fmt.Errorf("%s: %d tensors, want %d", what, len(g), len(w))
		}
		for i := range w {
			if len(g[i]) != len(w[i]) {
				return fmt.Errorf("%s %d: %d values, want %d", what, i, len(g[i]), len(w[i]))
			}
			for j := range w[i] {
				if math.Float32bits(g[i][j]) != math.Float32bits(w[i][j]) {
					return fmt.Errorf("%s %d [%d]: %v, want %v", what, i, j, g[i][j], w[i][j])
				}
			}
		}
		return nil
	}
	for _, c := range []struct {
		what string
		g, w [][]float32
	}{{"log-probs", got.logp, want.logp}, {"entropies", got.ent, want.ent}, {"trained tensor", got.tensors, want.tensors},
		{"generated log-probs", got.genLogp, want.genLogp}} {
		if err := bits(c.what, c.g, c.w); err != nil {
			return err
		}
	}
	if !slices.Equal(got.norms, want.norms) {
		return fmt.Errorf("gradient norms %v, want %v", got.norms, want.norms)
	}
	for i := range want.tokens {
		if !slices.Equal(got.tokens[i], want.tokens[i]) {
			return fmt.Errorf("request %d generated %v, want %v", i, got.tokens[i], want.tokens[i])
		}
	}
	return nil
}

// TestSharedBF16SameValues: two BF16 training steps (plain, ScoredOnly,
// LoRA) and a sampled generation, and the GRPO groups workload with its
// prefix copies and tool turn (checkGenerateGroups'), give bit for bit the
// same log-probs,
// entropies, gradient norms, trained tensors, gradients, tokens and
// token log-probs with the activation copies shared as with each product
// converting its own (the conversion is deterministic, so sharing must
// change nothing); every reuse of a copy is checked against a fresh
// conversion on the way, and every weight copy AdamW kept current on the
// first product that reads it. With a producer that writes no copy but
// makes it valid (prodskip), the fused residual norm's copy made of its
// sum (residual_rmsnorm_forward/copy_res), the norm backward's copy of dres made before its
// add (rmsnorm_backward_dinp/copy_noadd), RoPE's backward copies made before the
// rotation (rope_qk/copy_unrotated) and AdamW's copy made of the old parameters
// (adamw/stale_copy) planted, the check must fail, and without it
// the values must differ.
func TestSharedBF16SameValues(t *testing.T) {
	for _, tc := range []struct {
		name             string
		scoredOnly, lora bool
	}{{"plain", false, false}, {"ScoredOnly", true, false}, {"LoRA", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := runShared(t, false, false, "", tc.scoredOnly, tc.lora)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runShared(t, true, true, "", tc.scoredOnly, tc.lora)
			if err != nil {
				t.Fatal(err)
			}
			if err := sameBits(got, want); err != nil {
				t.Errorf("shared copies: %v", err)
			}
		})
	}
	t.Run("groups and a tool turn", func(t *testing.T) {
		var rounds [2][2]checkutil.GroupsRound
		for k, shared := range []bool{false, true} {
			be := openEmulator(t)
			be.SetPrecision(BF16)
			be.d.unsharedBF16, be.d.checkShared = !shared, shared
			w := checkutil.NewGroupsWorkload()
			_, g, err := w.Generator(be)
			if err != nil {
				t.Fatal(err)
			}
			if rounds[k], err = w.Run(g); err != nil {
				t.Fatalf("shared=%v: %v", shared, err)
			}
		}
		for n := range 2 {
			want, got := rounds[0][n], rounds[1][n]
			if !slices.Equal(got.Order, want.Order) || got.Prefill != want.Prefill || got.Share != want.Share {
				t.Errorf("round %d: order %v, %d prefilled, %d shared; unshared %v, %d, %d", n+1, got.Order, got.Prefill, got.Share, want.Order, want.Prefill, want.Share)
			}
			for i := range want.Results {
				g, w := got.Results[i], want.Results[i]
				if !slices.Equal(g.Tokens, w.Tokens) || !slices.EqualFunc(g.Logprobs, w.Logprobs, func(a, b float32) bool {
					return math.Float32bits(a) == math.Float32bits(b)
				}) {
					t.Errorf("round %d request %d: %v %v, unshared %v %v", n+1, i, g.Tokens, g.Logprobs, w.Tokens, w.Logprobs)
				}
			}
		}
	})
	want, err := runShared(t, false, false, "", false, false)
	if err != nil {
		t.Fatal(err)
	}
	// AdamW, the norms and SwiGLU write the copies that this run's
	// products use, and every copy a product converts is read before its
	// tensor is written again, so a copy kept after a write (actstale)
	// never reaches a product here (MatmulBF16 plants it); the producers'
	// defects do
	for _, plant := range []string{"prodskip", "residual_rmsnorm_forward/copy_res", "rmsnorm_backward_dinp/copy_noadd", "rope_qk/copy_unrotated",
		"adamw/stale_copy"} {
		_, err := runShared(t, true, true, plant, false, false)
		if err == nil || !strings.Contains(err.Error(), "stale bfloat16 copy") {
			t.Errorf("planted %s, uses of the copies checked: the run gave %v; want a stale copy found", plant, err)
		} else {
			t.Logf("planted %s, uses of the copies checked: %v", plant, err)
		}
		got, err := runShared(t, true, false, plant, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameBits(got, want); err == nil {
			t.Errorf("planted %s, the values did not change: the comparison cannot fail", plant)
		} else {
			t.Logf("planted %s, values compared: %v", plant, err)
		}
	}
}

// TestSharedBF16ReusesFreedMemory: on the emulator a tensor allocated
// after one of its size was freed gets that memory, so the MatmulBF16
// check's last step (sharedInputCheck) reads a new tensor at the address
// of the one whose copy was made, as it must to test the invalidation on
// Free; and the copy is made from a tensor of the backend only.
func TestSharedBF16ReusesFreedMemory(t *testing.T) {
	be := openEmulator(t)
	be.SetPrecision(BF16)
	const N, C = 19, 48
	x := be.Alloc("x", N*C)
	be.Upload(x, checkutil.Randn(rand.New(rand.NewPCG(1, 1)), N*C, 1))
	out := make([]float32, N*4)
	be.MatmulForward(out, x, checkutil.Randn(rand.New(rand.NewPCG(2, 2)), 4*C, 1), nil, N, C, 4)
	if !be.d.act.valid || be.d.act.src != dptr(uintptr(unsafe.Pointer(&x[0]))) {
		t.Fatalf("no shared copy of x after a product read it: %+v", be.d.act)
	}
	be.Free(x)
	if be.d.act.valid {
		t.Errorf("the copy of x is still valid after x was freed")
	}
	y := be.Alloc("y", N*C)
	if &y[0] != &x[0] {
		t.Errorf("the freed tensor's memory went elsewhere: %p, then %p", &x[0], &y[0])
	}
	host := checkutil.Randn(rand.New(rand.NewPCG(3, 3)), N*C, 1)
	be.MatmulForward(out, host, checkutil.Randn(rand.New(rand.NewPCG(2, 2)), 4*C, 1), nil, N, C, 4)
	if be.d.act.valid {
		t.Errorf("a host operand was kept as the shared copy: %+v", be.d.act)
	}
}

// TestProducedCopyNeedsItsTensorAlone: a copy a producer's kernel wrote
// becomes valid only if the op wrote that tensor through that one output
// (bf16.go, producedValid): ResidualRMSNormForward with res and out views
// of one tensor leaves the activation copy invalid (the next product
// converts out), AdamW whose moments lie in the parameters' tensor leaves
// its copy stale (the next product converts the tensor: the moments'
// part of the copy is stale), and with each output in a tensor of its own
// the copies are used; the products are right either way, and every copy
// used is compared with a fresh conversion (checkShared). With the rule
// left out (planted "anywrites": an op's copies made valid whatever else
// it wrote) the shared-tensor case must fail.
func TestProducedCopyNeedsItsTensorAlone(t *testing.T) {
	for _, plant := range []string{"", "anywrites"} {
		for _, together := range []bool{false, true} {
			problems := producedAloneProblems(t, together, plant)
			if fail := plant != "" && together; fail != (len(problems) > 0) {
				t.Errorf("planted %q, outputs in one tensor %v: problems %q", plant, together, problems)
			} else if fail {
				t.Logf("planted %q: %q", plant, problems)
			}
		}
	}
}

func producedAloneProblems(t *testing.T, together bool, plant string) (problems []string) {
	defer func() {
		if r := recover(); r != nil {
			problems = append(problems, fmt.Sprint(r))
		}
	}()
	const N, C, OC = 7, 32, 16
	r := rand.New(rand.NewPCG(5, 5))
	w, norm := checkutil.Randn(r, OC*C, 0.1), checkutil.Randn(r, C, 1)
	be := openEmulator(t)
	be.SetPrecision(BF16)
	be.d.checkShared, be.d.plantBF16 = true, plant
	var res, out []float32
	if together {
		x := be.Alloc("res and out", 2*N*C)
		res, out = x[:N*C], x[N*C:]
	} else {
		res, out = be.Alloc("res", N*C), be.Alloc("out", N*C)
	}
	be.ResidualRMSNormForward(res, out, make([]float32, N), checkutil.Randn(r, N*C, 1), checkutil.Randn(r, N*C, 1), norm, N, C, 1e-6)
	if got := be.d.act.valid; got == together {
		problems = append(problems, fmt.Sprintf("the activation copy valid %v after the norm", got))
	}
	before := be.d.conv
	got, vals := make([]float32, N*OC), make([]float32, N*C)
	be.MatmulForward(got, out, w, nil, N, C, OC)
	be.Download(vals, out)
	want := make([]float32, N*OC)
	checkutil.Ref.MatmulForward(want, round.BF16s(vals), round.BF16s(w), nil, N, C, OC)
	if err := checkutil.Compare("product of the norm's output", got, want, 1e-5); err != nil {
		problems = append(problems, err.Error())
	}
	if conv := be.d.conv.launches - before.launches; conv != int64(b2i(together))+1 { // + the host weight
		problems = append(problems, fmt.Sprintf("the product of the norm's output converted %d operands", conv))
	}

	// AdamW: the parameters, and the moments in the same tensor or not
	var params, m, v []float32
	if together {
		x := be.Alloc("parameters and moments", 3*OC*C)
		params, m, v = x[:OC*C], x[OC*C:2*OC*C], x[2*OC*C:]
	} else {
		params, m, v = be.Alloc("parameters", OC*C), be.Alloc("m", OC*C), be.Alloc("v", OC*C)
	}
	be.Upload(params, w)
	be.Upload(m, make([]float32, OC*C))
	be.Upload(v, make([]float32, OC*C))
	be.MatmulForward(got, out, params, nil, N, C, OC) // makes the copy
	be.AdamW(params, checkutil.Randn(r, OC*C, 1), m, v, 1, 1e-2, 0.9, 0.999, 1e-8, 0.1)
	before = be.d.conv
	be.MatmulForward(got, out, params, nil, N, C, OC)
	pv := make([]float32, OC*C)
	be.Download(pv, params)
	checkutil.Ref.MatmulForward(want, round.BF16s(vals), round.BF16s(pv), nil, N, C, OC)
	if err := checkutil.Compare("product after AdamW", got, want, 1e-5); err != nil {
		problems = append(problems, err.Error())
	}
	// out's copy is the one the product above used (made by the norm, or
	// converted by that product)
	if conv := be.d.conv.launches - before.launches; conv != int64(b2i(together)) {
		problems = append(problems, fmt.Sprintf("the product after AdamW converted %d operands", conv))
	}
	return problems
}
