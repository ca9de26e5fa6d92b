package cuda

import (
	"os"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
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
	// Qwen2.5-0.5B's 14 query heads on 2 KV heads (one block each: 2 blocks
	// a chunk a token) over a cache of 640 positions (prompt 128 + 512 new
	// tokens) on 132 multiprocessors: batch 1 and batch 64 both fill them.
	if rows := decodeRows(1, 14, 2, 64); rows != 2 {
		t.Errorf("batch 1: %d blocks a chunk, want 2", rows)
	}
	if L, chunks := decodeChunks(decodeRows(1, 14, 2, 64), 640, 132); L != 8 || chunks != 80 {
		t.Errorf("batch 1: %d chunks of %d, want 80 of 8", chunks, L)
	}
	if L, chunks := decodeChunks(decodeRows(64, 14, 2, 64), 640, 132); L != 216 || chunks != 3 {
		t.Errorf("batch 64: %d chunks of %d, want 3 of 216", chunks, L)
	}
}

// TestDecodeGroupHeads: a block of attention_cached_split takes a whole
// group of query heads where it fits (8 heads, 2048 floats of queries),
// else near-equal parts of it; every part within those bounds.
func TestDecodeGroupHeads(t *testing.T) {
	for _, c := range []struct{ G, HD, GB int }{
		{1, 64, 1}, {7, 64, 7}, {8, 256, 8}, {9, 256, 5}, {14, 64, 7}, {16, 128, 8}, {17, 64, 6}, {17, 16, 6},
		{3, 320, 3}, {7, 320, 4}, {2, 2048, 1}, {64, 64, 8},
	} {
		if GB := decodeGroupHeads(c.G, c.HD); GB != c.GB {
			t.Errorf("G %d HD %d: %d heads a block, want %d", c.G, c.HD, GB, c.GB)
		}
	}
	for G := 1; G <= 40; G++ {
		for _, HD := range []int{16, 64, 80, 128, 144, 256, 320, 1000, 2048} {
			GB := decodeGroupHeads(G, HD)
			parts := (G + GB - 1) / GB
			if GB < 1 || GB > decodeHeadsMax || GB*HD > decodeQMax || G-(parts-1)*GB < 1 {
				t.Fatalf("G %d HD %d: %d heads a block", G, HD, GB)
			}
		}
	}
}

// TestDecodeSplitCases: what the check AttentionCached exercises, on
// the emulator (decodeSMs, as an H100 or H200) and on an A100's 108
// multiprocessors: several chunks a row, the last position of a long
// sequence inside a chunk past the first, a sequence shorter than one
// chunk in the same launch as a long one, one case whose last position
// ends a chunk, GQA groups (one whose heads are not a multiple of the
// block's 8 warps, one cut into blocks of fewer heads), and launches of
// one chunk.
func TestDecodeSplitCases(t *testing.T) {
	for _, sms := range []int{decodeSMs, 108} {
		var inside, short, ends, gqa, uneven, cut, single bool
		for _, c := range checkutil.DecodeSplitCases {
			L, chunks := decodeChunks(decodeRows(len(c.Pos), c.NH, c.NKV, c.HD), c.MaxT, sms)
			if chunks == 1 {
				single = true
				continue
			}
			G := c.NH / c.NKV
			GB := decodeGroupHeads(G, c.HD)
			gqa = gqa || G > 1
			uneven = uneven || (G > 1 && GB == G && G%decodeHeadsMax != 0)
			cut = cut || GB < G
			long := false
			for _, p := range c.Pos {
				P := int(p) + 1
				long = long || P > L
				inside = inside || (P > L && P%L != 0)
				ends = ends || (P > L && P%L == 0)
			}
			for _, p := range c.Pos {
				short = short || (long && int(p)+1 < L)
			}
		}
		if !inside || !short || !ends || !gqa || !uneven || !cut || !single {
			t.Errorf("%d multiprocessors: a position inside a later chunk %v, a short sequence beside a long one %v, a sequence ending a chunk %v, GQA %v (a block's heads not a multiple of its warps %v, a group cut %v), one chunk %v",
				sms, inside, short, ends, gqa, uneven, cut, single)
		}
	}
}

// TestDecodeChunkMax: decodeChunkMax, decodeHeadsMax and decodeQMax are
// the kernel's DS_CHUNK_MAX, DS_HEADS and DS_QMAX (the bounds of its
// shared memory).
func TestDecodeChunkMax(t *testing.T) {
	src, err := os.ReadFile("kernels/attention.cuh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "#define DS_CHUNK_MAX 1024 ") || decodeChunkMax != 1024 {
		t.Errorf("decodeChunkMax %d and attention.cuh's DS_CHUNK_MAX differ", decodeChunkMax)
	}
	if !strings.Contains(string(src), "#define DS_HEADS 8 ") || decodeHeadsMax != 8 {
		t.Errorf("decodeHeadsMax %d and attention.cuh's DS_HEADS differ", decodeHeadsMax)
	}
	if !strings.Contains(string(src), "#define DS_QMAX 2048 ") || decodeQMax != 2048 {
		t.Errorf("decodeQMax %d and attention.cuh's DS_QMAX differ", decodeQMax)
	}
}
