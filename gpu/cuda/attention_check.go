package cuda

// Checks of the attention family against the CPU reference gpu/cpu (attention.go).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

func checkAttention(b Device) error {
	r := rand.New(rand.NewPCG(8, 8))
	const B, T, NH, NKV, HD = 2, 19, 6, 2, 16
	q, k, v := randn(r, B*T*NH*HD, 1), randn(r, B*T*NKV*HD, 1), randn(r, B*T*NKV*HD, 1)
	o1, o2 := make([]float32, len(q)), make([]float32, len(q))
	scratch := make([]float32, 2*NH*T*T)
	ref.AttentionForward(o1, scratch, q, k, v, B, T, NH, NKV, HD, 0)
	b.AttentionForward(o2, scratch, q, k, v, B, T, NH, NKV, HD, 0)
	if err := compare("out", o2, o1, 1e-5); err != nil {
		return err
	}
	dout := randn(r, len(q), 1)
	dq1, dq2 := make([]float32, len(q)), make([]float32, len(q))
	dk1, dk2, dv1, dv2 := randn(r, len(k), 1), randn(r, len(k), 1), randn(r, len(v), 1), randn(r, len(v), 1)
	ref.AttentionBackward(dq1, dk1, dv1, scratch, dout, q, k, v, B, T, NH, NKV, HD, 0)
	b.AttentionBackward(dq2, dk2, dv2, scratch, dout, q, k, v, B, T, NH, NKV, HD, 0)
	return compareAll(1e-5, "dq", dq2, dq1, "dk", dk2, dk1, "dv", dv2, dv1)
}

// attentionCachedCase is one launch of AttentionCachedForward: N =
// len(pos) tokens over S slots of maxT positions.
type attentionCachedCase struct {
	NH, NKV, HD, S, maxT int
	slot, pos            []int32
}

// attentionCachedCases are the shapes of checkAttentionCached: GQA groups
// of 1, 2, 3, 4 and 7 query heads (the last Qwen2.5-0.5B's 14/2), heads of
// 16 to 128 dimensions, tokens of one launch at different positions (the
// first token of a slot, contexts of one to more than 600 positions, more
// than one pass of a block's 256 threads), slots used twice; a group of
// 17 heads and a head of 144 dimensions.
var attentionCachedCases = []attentionCachedCase{
	{4, 2, 32, 3, 300, []int32{0, 2, 1, 2, 0}, []int32{0, 299, 17, 100, 1}},
	{2, 2, 64, 2, 700, []int32{1, 0, 1}, []int32{699, 0, 8}},
	{6, 2, 128, 3, 620, []int32{0, 1, 2, 1}, []int32{619, 5, 0, 300}},
	{14, 2, 64, 3, 650, []int32{2, 0, 1, 2, 0}, []int32{640, 1, 63, 0, 257}},
	{7, 1, 128, 2, 40, []int32{1, 0}, []int32{39, 9}},
	{4, 1, 16, 2, 70, []int32{0, 1, 1}, []int32{2, 69, 33}},
	{17, 1, 16, 2, 70, []int32{1, 0}, []int32{69, 3}},
	{2, 1, 144, 1, 20, []int32{0, 0}, []int32{19, 0}},
}

// checkAttentionCached compares AttentionCachedForward with gpu/cpu on
// attentionCachedCases and decodeSplitCases, with the kernels selected
// (by default flash-decoding: the chunks' partial softmaxes, their
// combination, and the single-chunk path of the cases whose rows fill the
// grid).
func checkAttentionCached(b Device) error {
	return attentionCachedCompare(b, append(slices.Clone(attentionCachedCases), decodeSplitCases...))
}

// attentionCachedCompare compares AttentionCachedForward with gpu/cpu on
// the given cases. The device's output is a resident tensor poisoned with
// NaN first, so every element must be written.
func attentionCachedCompare(b Device, cases []attentionCachedCase) error {
	r := rand.New(rand.NewPCG(9, 9))
	for _, c := range cases {
		N := len(c.pos)
		kc, vc := randn(r, c.S*c.maxT*c.NKV*c.HD, 1), randn(r, c.S*c.maxT*c.NKV*c.HD, 1)
		q := randn(r, N*c.NH*c.HD, 1)
		o1 := make([]float32, N*c.NH*c.HD)
		ref.AttentionCachedForward(o1, q, kc, vc, c.slot, c.pos, N, c.NH, c.NKV, c.HD, c.maxT, 0)
		o2 := b.Alloc("check cached attention out", len(o1))
		poison := make([]float32, len(o1))
		for i := range poison {
			poison[i] = float32(math.NaN())
		}
		b.Upload(o2, poison)
		b.AttentionCachedForward(o2, q, kc, vc, c.slot, c.pos, N, c.NH, c.NKV, c.HD, c.maxT, 0)
		got := host(b, o2)
		b.Free(o2)
		if err := compare("out", got, o1, 1e-5); err != nil {
			return fmt.Errorf("NH %d NKV %d HD %d positions %v: %w", c.NH, c.NKV, c.HD, c.pos, err)
		}
	}
	return nil
}

// decodeSplitCases are the shapes added for flash-decoding (attention.go's
// decodeChunks): few blocks (token, KV
// head, part of its group) over long caches, so that on any GPU of 2 or
// more multiprocessors (and on the emulator) a row is cut into many chunks;
// the last position of a sequence inside a chunk and on a chunk's last
// position, sequences shorter than one chunk (positions 0 to 14) beside
// long ones in the same launch, GQA groups of 1, 2, 3, 5, 7, 8 and 14 (one
// block a KV head, the heads not a multiple of the block's 8 warps), 9 and
// 17 (cut into blocks of 5+4 and 6+6+5 heads), heads of 32, 64, 80, 128,
// 256 and 320 dimensions (8 heads of 256: the queries fill the block's
// shared memory; 320: two passes over a key row); Qwen2.5-0.5B's 14/2
// heads of 64 at batch 1 and batch 64 over a cache of 640 positions; and
// the single-chunk path: a cache of 8 positions, and 136 tokens of 14
// heads (272 blocks).
// TestDecodeSplitCases checks what decodeChunks makes of them.
var decodeSplitCases = []attentionCachedCase{
	{2, 2, 64, 2, 700, []int32{1, 0}, []int32{699, 5}},
	{14, 2, 64, 2, 650, []int32{1}, []int32{600}},
	{14, 2, 64, 2, 1000, []int32{0, 1}, []int32{14, 999}},
	{7, 1, 128, 1, 2000, []int32{0}, []int32{1999}},
	{3, 1, 80, 2, 300, []int32{0, 1, 0}, []int32{0, 287, 129}},
	{2, 1, 256, 1, 100, []int32{0}, []int32{63}},
	{17, 1, 64, 2, 900, []int32{1, 0}, []int32{899, 400}},
	{9, 1, 256, 1, 200, []int32{0, 0}, []int32{199, 3}},
	{16, 2, 256, 2, 300, []int32{1, 0}, []int32{299, 150}},
	{10, 2, 128, 1, 1500, []int32{0}, []int32{1234}},
	{12, 4, 320, 1, 50, []int32{0, 0}, []int32{49, 10}},
	{17, 1, 16, 2, 70, []int32{1, 0}, []int32{69, 3}},
	{14, 2, 64, 1, 640, []int32{0}, []int32{639}},
	manyTokens(14, 2, 64, 64, 640, 64),
	{4, 2, 32, 3, 8, []int32{2, 0, 1}, []int32{7, 0, 3}},
	manyTokens(14, 2, 64, 4, 100, 136),
}

// manyTokens is a launch of N tokens over S slots of maxT positions (token
// i in slot i%S at position (37*i) % maxT, and the last position of the
// cache for the first).
func manyTokens(NH, NKV, HD, S, maxT, N int) attentionCachedCase {
	c := attentionCachedCase{NH: NH, NKV: NKV, HD: HD, S: S, maxT: maxT}
	for i := range N {
		c.slot = append(c.slot, int32(i%S))
		c.pos = append(c.pos, int32((37*i)%maxT))
	}
	c.pos[0] = int32(maxT - 1)
	return c
}

// checkAttentionCachedBlock is checkAttentionCached's attentionCachedCases
// with the decode_block variant on for its duration, at the same
// tolerance: attention_cached, one block per (token, head), the default
// kernel before flash-decoding.
func checkAttentionCachedBlock(b Device) error {
	return withDecodeBlock(b, func() error { return attentionCachedCompare(b, attentionCachedCases) })
}

// checkGenerateDecodeBlock is the generation checks Generate (greedy),
// GenerateSampled and GenerateGroups (a GRPO rollout with a tool turn:
// refilled slots, shared prefixes) with the decode_block variant on: every
// prefill's and decode step's attention through attention_cached. By
// default the three run through flash-decoding's chunks (caches of 32 and
// 40 positions, a group of 4 query heads on one KV head: chunks of 8, the
// prompts and responses crossing from one to the next).
func checkGenerateDecodeBlock(b Device) error {
	return withDecodeBlock(b, func() error { return generationChecks(b) })
}

// withDecodeBlock runs f with the decode_block variant on (withVariant),
// and restores the device's variants after it.
func withDecodeBlock(b Device, f func() error) error {
	return withVariant(b, func(v *Variants) { v.DecodeBlock = true }, f)
}

// checkAttentionCachedVec is checkAttentionCached's cases (the former
// kernel's and flash-decoding's) with the decode_vec variant on for its
// duration, at the same tolerance: attention_cached_split_vec, the
// output pass by 16-byte V loads, where the heads' dimensions are a
// multiple of 4 (all of them but the odd ones of attentionCachedCases,
// which run the default kernel).
func checkAttentionCachedVec(b Device) error {
	return withDecodeVec(b, func() error {
		return attentionCachedCompare(b, append(slices.Clone(attentionCachedCases), decodeSplitCases...))
	})
}

// checkGenerateDecodeVec is the generation checks Generate, GenerateSampled
// and GenerateGroups with the decode_vec variant on: every decode step's
// attention through attention_cached_split_vec.
func checkGenerateDecodeVec(b Device) error {
	return withDecodeVec(b, func() error { return generationChecks(b) })
}

// withDecodeVec runs f with the decode_vec variant on (and decode_block
// off, which would take the decode's attention instead), and restores
// the device's variants after it.
func withDecodeVec(b Device, f func() error) error {
	return withVariant(b, func(v *Variants) { v.DecodeVec, v.DecodeBlock = true, false }, f)
}

// generationChecks runs the generation checks Generate (greedy),
// GenerateSampled and GenerateGroups on b, with the variants it has.
func generationChecks(b Device) error {
	for _, c := range []struct {
		name string
		run  func(Device) error
	}{{"greedy", checkGenerate}, {"sampled", checkGenerateSampled}, {"groups", checkGenerateGroups}} {
		if err := c.run(b); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}
