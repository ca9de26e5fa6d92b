package cudacheck

// Checks of the families' ops against the CPU reference gpu/cpu:
// sliding-window attention (the padded ops, the fused attention over packed
// sequences, the decode attention over full and rolling caches), GeGLU,
// soft-capping, and the training step and generation of Gemma-3- and
// Mistral-shaped models.
//
// The planted defects of the window checks are their plant argument: the
// device's op is launched with its window (or a cache's rows) off by one,
// against the CPU reference with the true values, and the check must fail
// (window_test.go on gpu/cpu; window_emu_test.go on the kernels).

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// WindowPlant is a planted defect of a window check: the device's op gets
// the window of each windowed case (window > 0) plus window, and a cache's
// rows plus rows; the CPU reference the true values. The zero value plants
// nothing.
type WindowPlant struct{ Window, Rows int }

// Win is the window the device's op gets for the true window w.
func (p WindowPlant) Win(w int) int {
	if w > 0 {
		return max(0, w+p.Window)
	}
	return w
}

// AttentionWindowCases are the padded ops' windowed shapes: GQA, MHA and
// MQA, windows of 1 (a query sees itself), shorter than the sequence, and
// longer than it (every earlier key).
var AttentionWindowCases = []struct{ B, T, NH, NKV, HD, Window int }{
	{2, 19, 6, 2, 16, 4},
	{1, 23, 4, 4, 8, 1},
	{2, 17, 3, 1, 24, 7},
	{1, 12, 2, 1, 16, 30},
}

// checkAttentionWindow compares the padded AttentionForward and
// AttentionBackward with a sliding window (attention_probs and the
// kernels after it) with gpu/cpu.
func checkAttentionWindow(b Device) error { return attentionWindowCompare(b, WindowPlant{}) }

func attentionWindowCompare(b Device, plant WindowPlant) error {
	for i := range AttentionWindowCases {
		if err := AttentionWindowCase(b, i, plant); err != nil {
			return err
		}
	}
	return nil
}

// AttentionWindowCase compares case i of attentionWindowCases.
func AttentionWindowCase(b Device, i int, plant WindowPlant) error {
	c := AttentionWindowCases[i]
	r := rand.New(rand.NewPCG(41, uint64(i)))
	B, T, NH, NKV, HD := c.B, c.T, c.NH, c.NKV, c.HD
	q, k, v := checkutil.Randn(r, B*T*NH*HD, 1), checkutil.Randn(r, B*T*NKV*HD, 1), checkutil.Randn(r, B*T*NKV*HD, 1)
	o1, o2 := make([]float32, len(q)), checkutil.Randn(r, len(q), 100)
	scratch := make([]float32, 2*NH*T*T)
	checkutil.Ref.AttentionForward(o1, scratch, q, k, v, B, T, NH, NKV, HD, c.Window)
	b.AttentionForward(o2, scratch, q, k, v, B, T, NH, NKV, HD, plant.Win(c.Window))
	err := checkutil.Compare("out", o2, o1, 1e-5)
	if err == nil {
		dout := checkutil.Randn(r, len(q), 1)
		dq1, dq2 := make([]float32, len(q)), checkutil.Randn(r, len(q), 100)
		dk1, dk2, dv1, dv2 := checkutil.Randn(r, len(k), 1), checkutil.Randn(r, len(k), 1), checkutil.Randn(r, len(v), 1), checkutil.Randn(r, len(v), 1)
		checkutil.Ref.AttentionBackward(dq1, dk1, dv1, scratch, dout, q, k, v, B, T, NH, NKV, HD, c.Window)
		b.AttentionBackward(dq2, dk2, dv2, scratch, dout, q, k, v, B, T, NH, NKV, HD, plant.Win(c.Window))
		err = checkutil.CompareAll(1e-5, "dq", dq2, dq1, "dk", dk2, dk1, "dv", dv2, dv1)
	}
	if err != nil {
		return fmt.Errorf("B %d T %d NH %d NKV %d HD %d window %d: %w", B, T, NH, NKV, HD, c.Window, err)
	}
	return nil
}

// FlashWindowCases are the fused attention's windowed shapes: windows
// inside a key tile, of a whole tile and across tiles, on sequences of
// several tiles (so that the key tiles before a query tile's band, and
// after a key tile's, are skipped; the tensor-core forward's 128 queries
// a block see part of a tile), GQA groups of 2 and 4, MHA and MQA, heads
// of 64 (the tensor-core kernels up to 64), 128 (up to 128) and 256
// (Gemma's: the _hd256 kernels) dimensions and of 24 and 16; a window of 2
// and one longer than every sequence (full attention). (A window of 1,
// checked on the padded ops, makes dk exactly 0, where the tensor-core
// kernels leave the bf16 rounding of dP - D.)
var FlashWindowCases = []struct {
	Lengths             []int
	NH, NKV, HD, Window int
}{
	{[]int{200, 37, 1}, 4, 2, 64, 17},
	{[]int{150, 64}, 2, 2, 64, 64},
	{[]int{190, 20}, 3, 1, 32, 70},
	{[]int{130, 9}, 4, 1, 128, 5},
	{[]int{100, 66}, 2, 1, 256, 33},
	{[]int{70}, 2, 2, 24, 2},
	{[]int{40, 3}, 2, 1, 16, 100},
}

// checkAttentionVarlenWindow compares the fused attention with sliding
// windows with gpu/cpu in fp32 (flash_attention_forward, _backward_dkv,
// _backward_dq and their _hd256 builds) at checkAttentionVarlen's
// tolerances.
func checkAttentionVarlenWindow(b Device) error {
	return flashWindowCompare(b, cuda.FP32, "fp32", 1e-5, 2e-5, WindowPlant{})
}

// checkAttentionVarlenWindowMMA is checkAttentionVarlenWindow with bf16
// products and the default kernels (the tensor-core kernels up to 128
// dimensions, the _hd256 kernels above), at the tensor-core tolerances.
func checkAttentionVarlenWindowMMA(b Device) error {
	return flashWindowCompare(b, cuda.BF16, "flash_mma", FlashMMAFwdTol, FlashMMABwdTol, WindowPlant{})
}

func flashWindowCompare(b Device, p cuda.Precision, name string, fwdTol, bwdTol float64, plant WindowPlant) error {
	prev := b.Precision()
	b.SetPrecision(p)
	defer b.SetPrecision(prev)
	for i, c := range FlashWindowCases {
		if err := FlashWindowCase(b, uint64(i), c.Lengths, c.NH, c.NKV, c.HD, c.Window, fwdTol, bwdTol, plant); err != nil {
			return fmt.Errorf("%s: lengths %v NH %d NKV %d HD %d window %d: %w", name, c.Lengths, c.NH, c.NKV, c.HD, c.Window, err)
		}
	}
	return nil
}

// FlashWindowCase is checkAttentionVarlenTol with a window: out and lse
// within fwdTol, dq, dk, dv (the device's backward on the device's
// forward) within bwdTol, outputs poisoned first.
func FlashWindowCase(b Device, seed uint64, lengths []int, NH, NKV, HD, window int, fwdTol, bwdTol float64, plant WindowPlant) error {
	r := rand.New(rand.NewPCG(42, seed))
	cu, maxT, S, N, q, k, v := FlashOperands(r, lengths, NH, NKV, HD)
	o1, o2 := checkutil.Randn(r, len(q), 100), checkutil.Randn(r, len(q), 100)
	l1, l2 := checkutil.Randn(r, N*NH, 100), checkutil.Randn(r, N*NH, 100)
	checkutil.Ref.AttentionVarlenForward(o1, l1, q, k, v, cu, S, N, maxT, NH, NKV, HD, window)
	b.AttentionVarlenForward(o2, l2, q, k, v, cu, S, N, maxT, NH, NKV, HD, plant.Win(window))
	if err := checkutil.CompareAll(fwdTol, "out", o2, o1, "lse", l2, l1); err != nil {
		return err
	}
	dout := checkutil.Randn(r, len(q), 1)
	dq1, dq2 := checkutil.Randn(r, len(q), 100), checkutil.Randn(r, len(q), 100)
	dk1, dk2, dv1, dv2 := checkutil.Randn(r, len(k), 100), checkutil.Randn(r, len(k), 100), checkutil.Randn(r, len(v), 100), checkutil.Randn(r, len(v), 100)
	checkutil.Ref.AttentionVarlenBackward(dq1, dk1, dv1, dout, o1, l1, q, k, v, cu, S, N, maxT, NH, NKV, HD, window)
	b.AttentionVarlenBackward(dq2, dk2, dv2, dout, o2, l2, q, k, v, cu, S, N, maxT, NH, NKV, HD, plant.Win(window))
	return checkutil.CompareAll(bwdTol, "dq", dq2, dq1, "dk", dk2, dk1, "dv", dv2, dv1)
}

// CachedWindowCase is a launch of AttentionCachedForward over slots of
// rows rows (attentionCachedCase's maxT) with a window.
type CachedWindowCase struct {
	checkutil.AttentionCachedCase
	Window int
}

// CachedWindowCases are the decode attention's rolling caches: positions
// past the slot's rows (the window wraps around it), a chunked prefill's
// tokens of one slot at consecutive positions in one launch (rows =
// Window + chunk - 1, as gpu/model's generator makes them), a window of
// 512 over many chunks (flash-decoding's combine, a chunk across the
// wrap), GQA groups of 2, 4 and 8, heads of 32, 64, 128 and 256
// dimensions; a window inside a full cache (no wrap) and a full cache
// without one.
var CachedWindowCases = []CachedWindowCase{
	{checkutil.AttentionCachedCase{NH: 4, NKV: 2, HD: 32, S: 2, MaxT: 12, Slot: []int32{0, 1, 1}, Pos: []int32{40, 7, 11}}, 8},
	{checkutil.AttentionCachedCase{NH: 4, NKV: 1, HD: 64, S: 2, MaxT: 8, Slot: []int32{0, 0, 0, 0, 0, 1}, Pos: []int32{20, 21, 22, 23, 24, 2}}, 4},
	{checkutil.AttentionCachedCase{NH: 14, NKV: 2, HD: 64, S: 1, MaxT: 600, Slot: []int32{0}, Pos: []int32{1999}}, 512},
	{checkutil.AttentionCachedCase{NH: 8, NKV: 1, HD: 256, S: 2, MaxT: 20, Slot: []int32{0, 1}, Pos: []int32{100, 3}}, 16},
	{checkutil.AttentionCachedCase{NH: 4, NKV: 1, HD: 128, S: 2, MaxT: 40, Slot: []int32{1, 0}, Pos: []int32{39, 77}}, 33},
	{checkutil.AttentionCachedCase{NH: 4, NKV: 2, HD: 64, S: 2, MaxT: 100, Slot: []int32{1, 0}, Pos: []int32{99, 3}}, 10},
	{checkutil.AttentionCachedCase{NH: 6, NKV: 2, HD: 64, S: 2, MaxT: 300, Slot: []int32{0, 1}, Pos: []int32{299, 5}}, 0},
	{manyTokensWindow(8, 2, 64, 4, 70, 40), 64},
}

// manyTokensWindow is manyTokens over slots of rows rows with positions
// up to twice the rows (wrapping).
func manyTokensWindow(NH, NKV, HD, S, rows, N int) checkutil.AttentionCachedCase {
	c := checkutil.ManyTokens(NH, NKV, HD, S, rows, N)
	for i := range c.Pos {
		c.Pos[i] = int32((53 * i) % (2 * rows))
	}
	return c
}

// checkAttentionCachedWindow compares AttentionCachedForward over rolling
// caches and windows with gpu/cpu (flash-decoding: attention_cached_split
// and its combine).
func checkAttentionCachedWindow(b Device) error {
	return CachedWindowCompare(b, CachedWindowCases, WindowPlant{})
}

// CachedWindowCompare is attentionCachedCompare with windows and rows.
func CachedWindowCompare(b Device, cases []CachedWindowCase, plant WindowPlant) error {
	r := rand.New(rand.NewPCG(43, 43))
	for _, c := range cases {
		N, rows := len(c.Pos), c.MaxT
		kc, vc := checkutil.Randn(r, c.S*rows*c.NKV*c.HD, 1), checkutil.Randn(r, c.S*rows*c.NKV*c.HD, 1)
		q := checkutil.Randn(r, N*c.NH*c.HD, 1)
		o1 := make([]float32, N*c.NH*c.HD)
		checkutil.Ref.AttentionCachedForward(o1, q, kc, vc, c.Slot, c.Pos, N, c.NH, c.NKV, c.HD, rows, c.Window)
		o2 := b.Alloc("check cached attention out", len(o1))
		poison := make([]float32, len(o1))
		for i := range poison {
			poison[i] = float32(math.NaN())
		}
		b.Upload(o2, poison)
		b.AttentionCachedForward(o2, q, kc, vc, c.Slot, c.Pos, N, c.NH, c.NKV, c.HD, rows+plant.Rows, plant.Win(c.Window))
		got := checkutil.Host(b, o2)
		b.Free(o2)
		if err := checkutil.Compare("out", got, o1, 1e-5); err != nil {
			return fmt.Errorf("NH %d NKV %d HD %d rows %d window %d positions %v: %w", c.NH, c.NKV, c.HD, rows, c.Window, c.Pos, err)
		}
	}
	return nil
}

// checkGeGLU compares GeGLUForward (into its own output and in place, over
// its gate, as the generator runs it) and GeGLUBackwardH with gpu/cpu, on
// gates that reach tanh's saturation, and requires the backward's h to be
// the forward's output bit for bit.
func checkGeGLU(b Device) error { return GeGLUCompare(b, false) }

// GeGLUCompare: swap plants a defect, the device's ops run with gate and
// up swapped.
func GeGLUCompare(b Device, swap bool) error {
	r := rand.New(rand.NewPCG(44, 44))
	const n = 10007
	gate, up, dout := checkutil.Randn(r, n, 3), checkutil.Randn(r, n, 1), checkutil.Randn(r, n, 1)
	g, u := gate, up
	if swap {
		g, u = up, gate
	}
	want := make([]float32, n)
	checkutil.Ref.GeGLUForward(want, gate, up, n)
	got := make([]float32, n)
	b.GeGLUForward(got, g, u, n)
	if err := checkutil.Compare("geglu out", got, want, 1e-5); err != nil {
		return err
	}
	gd := b.Alloc("check geglu gate", n)
	defer b.Free(gd)
	b.Upload(gd, g)
	b.GeGLUForward(gd, gd, u, n) // in place over gate
	if err := checkutil.Compare("geglu out in place", checkutil.Host(b, gd), want, 1e-5); err != nil {
		return err
	}
	dg1, du1, h1 := make([]float32, n), make([]float32, n), make([]float32, n)
	checkutil.Ref.GeGLUBackwardH(dg1, du1, h1, dout, gate, up, n)
	dg2, du2, h2 := checkutil.Randn(r, n, 100), checkutil.Randn(r, n, 100), checkutil.Randn(r, n, 100)
	b.GeGLUBackwardH(dg2, du2, h2, dout, g, u, n)
	if err := checkutil.CompareAll(1e-5, "geglu dgate", dg2, dg1, "geglu dup", du2, du1, "geglu h", h2, h1); err != nil {
		return err
	}
	for i := range h2 {
		if math.Float32bits(h2[i]) != math.Float32bits(got[i]) {
			return fmt.Errorf("geglu h[%d] = %v, the forward's out %v on cuda (want the same bits; cpu %v)", i, h2[i], got[i], h1[i])
		}
	}
	return nil
}

// checkSoftcap compares SoftcapForward and SoftcapBackward with gpu/cpu,
// values from well inside the cap to far past it, for two caps.
func checkSoftcap(b Device) error { return SoftcapCompare(b, 0) }

// SoftcapCompare: capOff plants a defect, the device's ops run with the
// cap plus capOff.
func SoftcapCompare(b Device, capOff float32) error {
	r := rand.New(rand.NewPCG(45, 45))
	const n = 5003
	for _, cp := range []float32{30, 4} {
		x, dx := checkutil.Randn(r, n, float64(2*cp)), checkutil.Randn(r, n, 1)
		y1, y2 := checkutil.Clone(x), checkutil.Clone(x)
		checkutil.Ref.SoftcapForward(y1, cp, n)
		b.SoftcapForward(y2, cp+capOff, n)
		if err := checkutil.Compare(fmt.Sprintf("softcap %v forward", cp), y2, y1, 1e-5); err != nil {
			return err
		}
		d1, d2 := checkutil.Clone(dx), checkutil.Clone(dx)
		checkutil.Ref.SoftcapBackward(d1, y1, cp, n)
		b.SoftcapBackward(d2, y1, cp+capOff, n)
		if err := checkutil.Compare(fmt.Sprintf("softcap %v backward", cp), d2, d1, 1e-5); err != nil {
			return err
		}
	}
	return nil
}

// gemmaConfig is the checks' Gemma-3-shaped model: a sliding-window layer
// (window 5, its own RoPE base) and a global one, QK-norm, (1 + w) norms
// and the sandwich norms, GeGLU, the scaled embedding, a query scale and
// soft-capped logits.
func gemmaConfig() model.Config {
	return model.Config{Family: "gemma3_text", V: 97, C: 64, F: 128, L: 2, NH: 4, NKV: 2, HD: 16, MaxPos: 64,
		Eps: 1e-6, RopeTheta: 1e6, LocalRopeTheta: 1e4, Windows: []int{5, 0}, QKNorm: true, NormOffset: 1, Sandwich: true,
		Act: model.GELUTanh, EmbedScale: 8, QScale: 0.8, FinalSoftcap: 10, Tied: true, BOS: 1, EOS: 2}
}

// mistralConfig is a Mistral-shaped model: a window of 4 on every layer.
func mistralConfig() model.Config {
	return model.Config{Family: "mistral", V: 97, C: 64, F: 128, L: 2, NH: 4, NKV: 1, HD: 16, MaxPos: 64,
		Eps: 1e-5, RopeTheta: 10000, Windows: []int{4, 4}, BOS: 1, EOS: 2}
}

// checkTrainStepWindow is checkTrainStep on the Gemma-3-shaped model (a
// batch of 2 x 12 tokens, longer than its window; on the device the
// padded batch runs through the fused attention), then on packed
// sequences.
func checkTrainStepWindow(b Device) error {
	if err := trainStepCheckConfig(b, gemmaConfig(), nil); err != nil {
		return fmt.Errorf("padded: %w", err)
	}
	if err := trainStepCheckConfig(b, gemmaConfig(), []int{7, 12, 5}); err != nil {
		return fmt.Errorf("packed: %w", err)
	}
	return nil
}

// checkTrainStepWindowBF16 is checkTrainStepBF16 on the Gemma-3-shaped
// model (GeGLU's and the soft-cap's bfloat16 copies, the windowed
// tensor-core attention), within gemmaBF16Tolerance.
func checkTrainStepWindowBF16(b Device) error {
	return mixedStepCheckConfig(b, cuda.BF16, gemmaConfig(), gemmaBF16Tolerance)
}

// gemmaBF16Tolerance bounds the bf16 step of the Gemma-3-shaped model
// against fp32: its log-probabilities move more under the operands'
// rounding than the Qwen2 shape's (mixedTolerance), the sandwich norms
// keeping each layer's output at the residual stream's scale. gpu/cpu with
// the products' operands rounded as the device rounds them (checks_test.go)
// differs from fp32 by 0.015 and 0.032 (log-probs, the two steps) and 7e-4
// and 2.2e-3 (loss).
var gemmaBF16Tolerance = struct{ Logp, Loss float64 }{5e-2, 5e-3}

// checkGenerateWindow: greedy generation of the Gemma-3- and
// Mistral-shaped models, prompts and generations longer than their windows
// (the sliding layers' rolling caches, prompts prefilled in chunks, slots
// reused), on the device (its decode steps through decode graphs where it
// has them, as by default) and on gpu/cpu: the same tokens, log-probs
// within 1e-4.
func checkGenerateWindow(b Device) error {
	for i, c := range []model.Config{gemmaConfig(), mistralConfig()} {
		r := rand.New(rand.NewPCG(46, uint64(i)))
		init := checkutil.Randn(r, c.NumParams(), 0.3)
		if err := generateBoth(checkutil.Ref, b, c, init, greedyRequests(r, c.V, 3, 3, 5, 12), 2, "tokens"); err != nil {
			return fmt.Errorf("%s: %w", c.Family, err)
		}
	}
	return nil
}
