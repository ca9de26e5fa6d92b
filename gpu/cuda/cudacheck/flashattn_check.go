package cudacheck

// Checks of the fused attention over packed sequences (flashattn.go) against
// the CPU reference gpu/cpu (varlen.go), which itself equals the padded
// AttentionForward/Backward on each sequence (gpu/cpu's tests).

import (
	"fmt"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// FlashCases: lengths with an empty sequence, one of a single token, partial
// and whole tiles (64 rows) and several tiles; GQA, MHA and MQA; head
// dimensions below, at and not a multiple of a thread's 4 columns, and past
// one 64-wide chunk (FA_DC), whole or partial.
var FlashCases = []struct {
	Lengths     []int
	NH, NKV, HD int
}{
	{[]int{37, 1, 0, 48, 16, 23}, 4, 2, 32},
	{[]int{64, 5}, 2, 2, 64},
	{[]int{20, 33}, 3, 1, 24},
	{[]int{17}, 2, 1, 128},
	{[]int{150, 64, 1, 65}, 4, 2, 64},
	{[]int{129, 70}, 2, 1, 100},
	{[]int{66, 3}, 2, 2, 13},
}

// FlashOperands packs sequences of the given lengths (cu, the longest
// maxT, S sequences of N tokens in all) and draws q [N,NH,HD], then k and
// v [N,NKV,HD], from r.
func FlashOperands(r *rand.Rand, lengths []int, NH, NKV, HD int) (cu []int32, maxT, S, N int, q, k, v []float32) {
	cu, maxT = gpu.CuSeqlens(lengths)
	S, N = len(lengths), int(cu[len(lengths)])
	q, k, v = checkutil.Randn(r, N*NH*HD, 1), checkutil.Randn(r, N*NKV*HD, 1), checkutil.Randn(r, N*NKV*HD, 1)
	return cu, maxT, S, N, q, k, v
}

func CheckAttentionVarlen(b Device) error {
	for i, c := range FlashCases {
		if err := checkAttentionVarlenCase(b, uint64(i), c.Lengths, c.NH, c.NKV, c.HD); err != nil {
			return fmt.Errorf("lengths %v NH %d NKV %d HD %d: %w", c.Lengths, c.NH, c.NKV, c.HD, err)
		}
	}
	return nil
}

func checkAttentionVarlenCase(b Device, seed uint64, lengths []int, NH, NKV, HD int) error {
	return checkAttentionVarlenTol(b, seed, lengths, NH, NKV, HD, 1e-5, 2e-5)
}

// checkAttentionVarlenTol compares the forward's out and lse within fwdTol
// and the backward's dq, dk, dv within bwdTol (relative to each tensor's
// largest value, see compare).
func checkAttentionVarlenTol(b Device, seed uint64, lengths []int, NH, NKV, HD int, fwdTol, bwdTol float64) error {
	r := rand.New(rand.NewPCG(21, seed))
	cu, maxT, S, N, q, k, v := FlashOperands(r, lengths, NH, NKV, HD)
	// poisoned outputs: every element must be written
	o1, o2 := checkutil.Randn(r, len(q), 100), checkutil.Randn(r, len(q), 100)
	l1, l2 := checkutil.Randn(r, N*NH, 100), checkutil.Randn(r, N*NH, 100)
	checkutil.Ref.AttentionVarlenForward(o1, l1, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
	b.AttentionVarlenForward(o2, l2, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
	if err := checkutil.CompareAll(fwdTol, "out", o2, o1, "lse", l2, l1); err != nil {
		return err
	}
	dout := checkutil.Randn(r, len(q), 1)
	dq1, dq2 := checkutil.Randn(r, len(q), 100), checkutil.Randn(r, len(q), 100)
	dk1, dk2, dv1, dv2 := checkutil.Randn(r, len(k), 100), checkutil.Randn(r, len(k), 100), checkutil.Randn(r, len(v), 100), checkutil.Randn(r, len(v), 100)
	checkutil.Ref.AttentionVarlenBackward(dq1, dk1, dv1, dout, o1, l1, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
	// the device's backward reads the device's forward (its out and lse)
	b.AttentionVarlenBackward(dq2, dk2, dv2, dout, o2, l2, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
	return checkutil.CompareAll(bwdTol, "dq", dq2, dq1, "dk", dk2, dk1, "dv", dv2, dv1)
}

// Variant turns one of dev/cuda's kernel variants on (true) or off on the
// device a check runs on. The product has none to select: the emulator's
// tests pass one (launching the variant's build of dev/cuda in its
// default's place), and a check given nil runs the default kernels.
type Variant func(on bool)

// WithVariant runs f with v on (nil: as it is), then turns it off.
func WithVariant(v Variant, f func() error) error {
	if v != nil {
		v(true)
		defer v(false)
	}
	return f()
}

// Tolerances of the FlashMMA forward (bf16 products) against the fp32
// CPU reference, relative to each tensor's largest value, and of the
// FlashMMA backward run on its out and lse. Measured on the emulator over
// FlashCases (TestFlashMMAErrors): see docs/gpu.md, "Tensor-core
// attention (flash_mma)".
const FlashMMAFwdTol, FlashMMABwdTol = 1e-2, 2e-2

// CheckAttentionVarlenMMA is checkAttentionVarlen with bf16 products: the
// FlashMMA kernels (the attention's products on the bf16 tensor cores; for
// HD <= 64 the forward with ldmatrix and double-buffered key tiles, the
// backward's dK/dV per query head with its reduction over each group, and
// dQ with ldmatrix), at the tolerances of bf16 operands.
// CheckAttentionVarlen, in fp32, checks the SIMT kernels.
func CheckAttentionVarlenMMA(b Device) error {
	prev := b.Precision()
	b.SetPrecision(cuda.BF16)
	defer b.SetPrecision(prev)
	for i, c := range FlashCases {
		if err := checkAttentionVarlenTol(b, uint64(i), c.Lengths, c.NH, c.NKV, c.HD, FlashMMAFwdTol, FlashMMABwdTol); err != nil {
			return fmt.Errorf("flash_mma: lengths %v NH %d NKV %d HD %d: %w", c.Lengths, c.NH, c.NKV, c.HD, err)
		}
	}
	return nil
}
