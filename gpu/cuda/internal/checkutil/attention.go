package checkutil

// AttentionCachedCase is one launch of AttentionCachedForward: N =
// len(pos) tokens over S slots of maxT positions.
type AttentionCachedCase struct {
	NH, NKV, HD, S, MaxT int
	Slot, Pos            []int32
}

// AttentionCachedCases are the shapes of checkAttentionCached: GQA groups
// of 1, 2, 3, 4 and 7 query heads (the last Qwen2.5-0.5B's 14/2), heads of
// 16 to 128 dimensions, tokens of one launch at different positions (the
// first token of a slot, contexts of one to more than 600 positions, more
// than one pass of a block's 256 threads), slots used twice; a group of
// 17 heads and a head of 144 dimensions.
var AttentionCachedCases = []AttentionCachedCase{
	{4, 2, 32, 3, 300, []int32{0, 2, 1, 2, 0}, []int32{0, 299, 17, 100, 1}},
	{2, 2, 64, 2, 700, []int32{1, 0, 1}, []int32{699, 0, 8}},
	{6, 2, 128, 3, 620, []int32{0, 1, 2, 1}, []int32{619, 5, 0, 300}},
	{14, 2, 64, 3, 650, []int32{2, 0, 1, 2, 0}, []int32{640, 1, 63, 0, 257}},
	{7, 1, 128, 2, 40, []int32{1, 0}, []int32{39, 9}},
	{4, 1, 16, 2, 70, []int32{0, 1, 1}, []int32{2, 69, 33}},
	{17, 1, 16, 2, 70, []int32{1, 0}, []int32{69, 3}},
	{2, 1, 144, 1, 20, []int32{0, 0}, []int32{19, 0}},
}

// DecodeSplitCases are the shapes added for flash-decoding (attention.go's
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
var DecodeSplitCases = []AttentionCachedCase{
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
	ManyTokens(14, 2, 64, 64, 640, 64),
	{4, 2, 32, 3, 8, []int32{2, 0, 1}, []int32{7, 0, 3}},
	ManyTokens(14, 2, 64, 4, 100, 136),
}

// ManyTokens is a launch of N tokens over S slots of maxT positions (token
// i in slot i%S at position (37*i) % maxT, and the last position of the
// cache for the first).
func ManyTokens(NH, NKV, HD, S, maxT, N int) AttentionCachedCase {
	c := AttentionCachedCase{NH: NH, NKV: NKV, HD: HD, S: S, MaxT: maxT}
	for i := range N {
		c.Slot = append(c.Slot, int32(i%S))
		c.Pos = append(c.Pos, int32((37*i)%maxT))
	}
	c.Pos[0] = int32(maxT - 1)
	return c
}
