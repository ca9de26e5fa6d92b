//go:build cudaemu && !cuda

package cuda_test

import (
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// TestDecodeSplitPlantedBug: with attention_cached_combine/no_rescale
// planted (the combine adds the chunks' outputs and sums without
// rescaling them by exp(m_c - M)), the checks of flash-decoding, the
// default, fail (AttentionCached naming the output, and the generation
// checks).
func TestDecodeSplitPlantedBug(t *testing.T) {
	be := openEmulator(t)
	split := cudacheck.Check{Name: "AttentionCached", Run: cudacheck.CheckAttentionCached}
	if err := split.Do(be); err != nil {
		t.Fatalf("the check fails without a defect: %v", err)
	}
	cuda.EmuPlanted["attention_cached_combine"] = "no_rescale"
	defer delete(cuda.EmuPlanted, "attention_cached_combine")
	err := split.Do(be)
	if err == nil {
		t.Fatal("AttentionCached passed with the combine's rescaling left out")
	}
	if !strings.Contains(err.Error(), "out[") {
		t.Errorf("error %q does not name the output", err)
	}
	t.Log(err)
	for _, c := range []cudacheck.Check{{Name: "Generate", Run: cudacheck.CheckGenerate}, {Name: "GenerateSampled", Run: cudacheck.CheckGenerateSampled}, {Name: "GenerateGroups", Run: cudacheck.CheckGenerateGroups}} {
		if err := c.Do(be); err == nil {
			t.Errorf("%s passed with the combine's rescaling left out", c.Name)
		} else {
			t.Logf("%s: %v", c.Name, err)
		}
	}
}

// TestDecodeSplitSharedQPlantedBug: with attention_cached_split/one_q
// planted (every query head of a block scored with the block's first
// head's query: the K rows shared, the queries not told apart), the
// checks of flash-decoding, the default, fail (AttentionCached naming the
// output, and the generation checks), and pass again once it is gone.
func TestDecodeSplitSharedQPlantedBug(t *testing.T) {
	be := openEmulator(t)
	split := cudacheck.Check{Name: "AttentionCached", Run: cudacheck.CheckAttentionCached}
	if err := split.Do(be); err != nil {
		t.Fatalf("the check fails without a defect: %v", err)
	}
	cuda.EmuPlanted["attention_cached_split"] = "one_q"
	err := split.Do(be)
	var genErrs []error
	gens := []cudacheck.Check{{Name: "Generate", Run: cudacheck.CheckGenerate}, {Name: "GenerateSampled", Run: cudacheck.CheckGenerateSampled}, {Name: "GenerateGroups", Run: cudacheck.CheckGenerateGroups}}
	for _, c := range gens {
		genErrs = append(genErrs, c.Do(be))
	}
	delete(cuda.EmuPlanted, "attention_cached_split")
	if err == nil {
		t.Fatal("AttentionCached passed with every head of a block scored with its first head's query")
	}
	if !strings.Contains(err.Error(), "out[") {
		t.Errorf("error %q does not name the output", err)
	}
	t.Log(err)
	for i, c := range gens {
		if genErrs[i] == nil {
			t.Errorf("%s passed with every head of a block scored with its first head's query", c.Name)
		} else {
			t.Logf("%s: %v", c.Name, genErrs[i])
		}
	}
	if err := split.Do(be); err != nil {
		t.Errorf("the check fails once the defect is gone: %v", err)
	}
}

// TestDecodeSplitLaunches: by default AttentionCachedForward launches
// attention_cached_split and, over more than one chunk,
// attention_cached_combine; nothing moves between host and device but the
// staged host operands.
func TestDecodeSplitLaunches(t *testing.T) {
	be := openEmulator(t)
	c := checkutil.DecodeSplitCases[0] // two tokens of 2 heads over 700 positions: many chunks
	N := len(c.Pos)
	kc, vc := be.Alloc("k", c.S*c.MaxT*c.NKV*c.HD), be.Alloc("v", c.S*c.MaxT*c.NKV*c.HD)
	q, out := be.Alloc("q", N*c.NH*c.HD), be.Alloc("out", N*c.NH*c.HD)
	slot, pos := be.AllocInt32("slot", N), be.AllocInt32("pos", N)
	be.UploadInt32(slot, c.Slot)
	be.UploadInt32(pos, c.Pos)
	be.AttentionCachedForward(out, q, kc, vc, slot, pos, N, c.NH, c.NKV, c.HD, c.MaxT, 0) // the arena grows here
	be.ResetCounters()
	be.AttentionCachedForward(out, q, kc, vc, slot, pos, N, c.NH, c.NKV, c.HD, c.MaxT, 0)
	if got := be.Counters(); got.Launches != 2 || got.HostToDevice+got.DeviceToHost != 0 || got.Syncs != 0 || got.Allocs != 0 {
		t.Errorf("%v; want 2 launches, no copy, sync or allocation", got)
	}
	if L, chunks := cuda.DecodeChunks(cuda.DecodeRows(N, c.NH, c.NKV, c.HD), c.MaxT, cuda.DecodeSMs); chunks < 2 {
		t.Errorf("the case has %d chunk(s) of %d: the combine is not exercised", chunks, L)
	}
}

// TestDecodeVecPlantedBug: with attention_cached_split/vec_group in
// attention_cached_split's place (the vector output pass's first group of
// positions left out of the sum), AttentionCached fails naming the output,
// and so does generation; with attention_cached_split/scalar (the scalar
// pass for every HD, the kernel before the vector pass) both pass.
func TestDecodeVecPlantedBug(t *testing.T) {
	be := openEmulator(t)
	cached := cudacheck.Check{Name: "AttentionCached", Run: cudacheck.CheckAttentionCached}
	func() {
		defer cuda.UseBuild("attention_cached_split", "vec_group")()
		err := cached.Do(be)
		if err == nil {
			t.Fatal("AttentionCached passed with the vector pass's first group left out")
		}
		if !strings.Contains(err.Error(), "out[") {
			t.Errorf("error %q does not name the output", err)
		}
		t.Log(err)
		if err := cudacheck.GenerationChecks(be); err == nil {
			t.Error("generation passed with the vector pass's first group left out")
		} else {
			t.Logf("generation: %v", err)
		}
	}()
	func() {
		defer cuda.UseBuild("attention_cached_split", "scalar")()
		if err := cached.Do(be); err != nil {
			t.Errorf("the scalar pass: %v", err)
		}
		if err := cudacheck.GenerationChecks(be); err != nil {
			t.Errorf("the scalar pass: generation: %v", err)
		}
	}()
	if len(cuda.EmuPlanted) != 0 {
		t.Errorf("the checks left builds in their kernels' place: %v", cuda.EmuPlanted)
	}
}
