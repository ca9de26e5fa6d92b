package cuda

import (
	"os"
	"strings"
	"testing"
)

// TestDecodeChunks: decodeChunks's chunks cover the cache (chunks*L >=
// maxT, none empty), are multiples of decodeChunkStep within
// [decodeChunkMin, decodeChunkMax], come within a third of two blocks a
// multiprocessor where the cache is long enough, and give one chunk to a
// grid already full.
func TestDecodeChunks(t *testing.T) {
	for _, sms := range []int{1, 16, 108, 132, 148} {
		for _, rows := range []int{1, 2, 7, 14, 64, 100, 263, 264, 896, 5000} {
			for _, maxT := range []int{1, 15, 16, 17, 40, 640, 1024, 1025, 4096, 40000} {
				L, chunks := decodeChunks(rows, maxT, sms)
				if L%decodeChunkStep != 0 || L < decodeChunkMin || L > decodeChunkMax || chunks*L < maxT || (chunks-1)*L >= maxT {
					t.Fatalf("rows %d maxT %d sms %d: %d chunks of %d", rows, maxT, sms, chunks, L)
				}
				// rounding L up to decodeChunkStep may leave the grid short of
				// the target, by less than a third
				if 3*rows*chunks < 2*2*sms && L > decodeChunkMin && L < decodeChunkMax {
					t.Errorf("rows %d maxT %d sms %d: %d chunks of %d give %d blocks, under two thirds of %d, with chunks longer than %d", rows, maxT, sms, chunks, L, rows*chunks, 2*sms, decodeChunkMin)
				}
				if rows >= 2*sms && maxT <= decodeChunkMax && chunks != 1 {
					t.Errorf("rows %d maxT %d sms %d: %d chunks for a full grid", rows, maxT, sms, chunks)
				}
			}
		}
	}
	// Qwen2.5-0.5B's 14 heads over a cache of 640 positions (prompt 128 +
	// 512 new tokens) on 132 multiprocessors: batch 1 and batch 64.
	if L, chunks := decodeChunks(14, 640, 132); L != 40 || chunks != 16 {
		t.Errorf("batch 1: %d chunks of %d, want 16 of 40", chunks, L)
	}
	if L, chunks := decodeChunks(64*14, 640, 132); L != 640 || chunks != 1 {
		t.Errorf("batch 64: %d chunks of %d, want 1 of 640", chunks, L)
	}
}

// TestDecodeSplitCases: what the check AttentionCached exercises, on
// the emulator (decodeSMs, as an H100 or H200) and on an A100's 108
// multiprocessors: several chunks a row, the last position of a long
// sequence inside a chunk past the first, a sequence shorter than one
// chunk in the same launch as a long one, one case whose last position
// ends a chunk, GQA groups, and launches of one chunk.
func TestDecodeSplitCases(t *testing.T) {
	for _, sms := range []int{decodeSMs, 108} {
		var inside, short, ends, gqa, single bool
		for _, c := range decodeSplitCases {
			L, chunks := decodeChunks(len(c.pos)*c.NH, c.maxT, sms)
			if chunks == 1 {
				single = true
				continue
			}
			gqa = gqa || c.NH > c.NKV
			long := false
			for _, p := range c.pos {
				P := int(p) + 1
				long = long || P > L
				inside = inside || (P > L && P%L != 0)
				ends = ends || (P > L && P%L == 0)
			}
			for _, p := range c.pos {
				short = short || (long && int(p)+1 < L)
			}
		}
		if !inside || !short || !ends || !gqa || !single {
			t.Errorf("%d multiprocessors: a position inside a later chunk %v, a short sequence beside a long one %v, a sequence ending a chunk %v, GQA %v, one chunk %v",
				sms, inside, short, ends, gqa, single)
		}
	}
}

// TestDecodeChunkMax: decodeChunkMax is the kernel's DS_CHUNK_MAX (the
// scores of a chunk in shared memory).
func TestDecodeChunkMax(t *testing.T) {
	src, err := os.ReadFile("kernels/attention.cuh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "#define DS_CHUNK_MAX 1024 ") || decodeChunkMax != 1024 {
		t.Errorf("decodeChunkMax %d and attention.cuh's DS_CHUNK_MAX differ", decodeChunkMax)
	}
}
