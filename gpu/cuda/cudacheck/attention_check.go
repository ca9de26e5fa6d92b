package cudacheck

// Checks of the attention family against the CPU reference gpu/cpu (attention.go).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

func checkAttention(b Device) error {
	r := rand.New(rand.NewPCG(8, 8))
	const B, T, NH, NKV, HD = 2, 19, 6, 2, 16
	q, k, v := checkutil.Randn(r, B*T*NH*HD, 1), checkutil.Randn(r, B*T*NKV*HD, 1), checkutil.Randn(r, B*T*NKV*HD, 1)
	o1, o2 := make([]float32, len(q)), make([]float32, len(q))
	scratch := make([]float32, 2*NH*T*T)
	checkutil.Ref.AttentionForward(o1, scratch, q, k, v, B, T, NH, NKV, HD, 0)
	b.AttentionForward(o2, scratch, q, k, v, B, T, NH, NKV, HD, 0)
	if err := checkutil.Compare("out", o2, o1, 1e-5); err != nil {
		return err
	}
	dout := checkutil.Randn(r, len(q), 1)
	dq1, dq2 := make([]float32, len(q)), make([]float32, len(q))
	dk1, dk2, dv1, dv2 := checkutil.Randn(r, len(k), 1), checkutil.Randn(r, len(k), 1), checkutil.Randn(r, len(v), 1), checkutil.Randn(r, len(v), 1)
	checkutil.Ref.AttentionBackward(dq1, dk1, dv1, scratch, dout, q, k, v, B, T, NH, NKV, HD, 0)
	b.AttentionBackward(dq2, dk2, dv2, scratch, dout, q, k, v, B, T, NH, NKV, HD, 0)
	return checkutil.CompareAll(1e-5, "dq", dq2, dq1, "dk", dk2, dk1, "dv", dv2, dv1)
}

// CheckAttentionCached compares AttentionCachedForward with gpu/cpu on
// attentionCachedCases and decodeSplitCases: flash-decoding's chunks'
// partial softmaxes, their combination, and the single-chunk path of the
// cases whose rows fill the grid; the output pass by 16-byte V loads where
// the heads' dimensions are a multiple of 4, the scalar one for the odd
// ones of attentionCachedCases.
func CheckAttentionCached(b Device) error {
	return attentionCachedCompare(b, append(slices.Clone(checkutil.AttentionCachedCases), checkutil.DecodeSplitCases...))
}

// attentionCachedCompare compares AttentionCachedForward with gpu/cpu on
// the given cases. The device's output is a resident tensor poisoned with
// NaN first, so every element must be written.
func attentionCachedCompare(b Device, cases []checkutil.AttentionCachedCase) error {
	r := rand.New(rand.NewPCG(9, 9))
	for _, c := range cases {
		N := len(c.Pos)
		kc, vc := checkutil.Randn(r, c.S*c.MaxT*c.NKV*c.HD, 1), checkutil.Randn(r, c.S*c.MaxT*c.NKV*c.HD, 1)
		q := checkutil.Randn(r, N*c.NH*c.HD, 1)
		o1 := make([]float32, N*c.NH*c.HD)
		checkutil.Ref.AttentionCachedForward(o1, q, kc, vc, c.Slot, c.Pos, N, c.NH, c.NKV, c.HD, c.MaxT, 0)
		o2 := b.Alloc("check cached attention out", len(o1))
		poison := make([]float32, len(o1))
		for i := range poison {
			poison[i] = float32(math.NaN())
		}
		b.Upload(o2, poison)
		b.AttentionCachedForward(o2, q, kc, vc, c.Slot, c.Pos, N, c.NH, c.NKV, c.HD, c.MaxT, 0)
		got := checkutil.Host(b, o2)
		b.Free(o2)
		if err := checkutil.Compare("out", got, o1, 1e-5); err != nil {
			return fmt.Errorf("NH %d NKV %d HD %d positions %v: %w", c.NH, c.NKV, c.HD, c.Pos, err)
		}
	}
	return nil
}

// GenerationChecks runs the generation checks Generate (greedy),
// GenerateSampled and GenerateGroups on b.
func GenerationChecks(b Device) error {
	for _, c := range []struct {
		name string
		run  func(Device) error
	}{{"greedy", CheckGenerate}, {"sampled", CheckGenerateSampled}, {"groups", CheckGenerateGroups}} {
		if err := c.run(b); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}
