//go:build cudaemu && !cuda

package cuda_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// TestDecodeSplitPlantedBug: with attention.cuh's DS_BUG_NO_RESCALE
// planted (the combine adds the chunks' outputs and sums without
// rescaling them by exp(m_c - M)), the checks of flash-decoding, the
// default, fail (AttentionCached naming the output, and the generation
// checks); those of the decode_block variant, which never launches the
// combine, still pass, and leave the variants as they were.
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
	for _, c := range []cudacheck.Check{{Name: "AttentionCachedBlock", Run: cudacheck.CheckAttentionCachedBlock}, {Name: "GenerateDecodeBlock", Run: cudacheck.CheckGenerateDecodeBlock}} {
		if err := c.Do(be); err != nil {
			t.Errorf("%s, of the decode_block variant, fails with the combine's defect planted: %v", c.Name, err)
		}
		if v := be.Variants(); v != (cuda.Variants{}) {
			t.Errorf("%s left the variants at %v", c.Name, v)
		}
	}
}

// TestDecodeSplitSharedQPlantedBug: with attention.cuh's DS_BUG_ONE_Q
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
// attention_cached_combine; with the decode_block variant it is the one
// launch of attention_cached; nothing moves between host and device but
// the staged host operands either way.
func TestDecodeSplitLaunches(t *testing.T) {
	be := openEmulator(t)
	c := checkutil.DecodeSplitCases[0] // two tokens of 2 heads over 700 positions: many chunks
	N := len(c.Pos)
	kc, vc := be.Alloc("k", c.S*c.MaxT*c.NKV*c.HD), be.Alloc("v", c.S*c.MaxT*c.NKV*c.HD)
	q, out := be.Alloc("q", N*c.NH*c.HD), be.Alloc("out", N*c.NH*c.HD)
	slot, pos := be.AllocInt32("slot", N), be.AllocInt32("pos", N)
	be.UploadInt32(slot, c.Slot)
	be.UploadInt32(pos, c.Pos)
	for _, split := range []bool{false, true} {
		be.SetVariants(cuda.Variants{DecodeBlock: !split})
		be.AttentionCachedForward(out, q, kc, vc, slot, pos, N, c.NH, c.NKV, c.HD, c.MaxT, 0) // the arena grows here
		be.ResetCounters()
		be.AttentionCachedForward(out, q, kc, vc, slot, pos, N, c.NH, c.NKV, c.HD, c.MaxT, 0)
		got := be.Counters()
		want := int64(1)
		if split {
			want = 2
		}
		if got.Launches != want || got.HostToDevice+got.DeviceToHost != 0 || got.Syncs != 0 || got.Allocs != 0 {
			t.Errorf("decode_block=%v: %v; want %d launches, no copy, sync or allocation", !split, got, want)
		}
	}
	if L, chunks := cuda.DecodeChunks(cuda.DecodeRows(N, c.NH, c.NKV, c.HD), c.MaxT, cuda.DecodeSMs); chunks < 2 {
		t.Errorf("the case has %d chunk(s) of %d: the combine is not exercised", chunks, L)
	}
}

// TestTransferDecodeBlock: TestTransferDecodeStep and
// TestTransferGenerateGroups with the decode_block variant on: within the
// same bounds, and the same bytes, copies, synchronisations and
// allocations as with flash-decoding, the default, with one launch fewer a
// layer per forward (the combine: every forward there has several chunks).
func TestTransferDecodeBlock(t *testing.T) {
	on := cuda.Variants{DecodeBlock: true}
	c := cuda.TransferConfig(2)
	if _, chunks := cuda.DecodeChunks(cuda.DecodeRows(1, c.NH, c.NKV, c.HD), 32, cuda.DecodeSMs); chunks < 2 {
		t.Fatalf("one token of the decode has %d chunk(s): the combine is not exercised", chunks)
	}
	same := func(what string, got, def cuda.Counters, forwards int64, layers int) {
		t.Helper()
		g, w := got, def
		g.Launches, w.Launches = 0, 0
		// the same launches, some of them in graphs (which steps replay one
		// depends on the arena's growth, i.e. on the kernels)
		g.GraphKernels, w.GraphKernels, g.GraphLaunches, w.GraphLaunches = 0, 0, 0, 0
		// and the bound's waits, which follow the launches queued between two
		// waits for samples (overlap scheduling: no synchronisation)
		g.QueueWaits, w.QueueWaits = 0, 0
		g, w = g.Counts(), w.Counts() // the times apart
		if g != w {
			t.Errorf("%s: %v, with the default kernels %v", what, got, def)
		}
		if want := def.Launches - forwards*int64(layers); got.Launches != want {
			t.Errorf("%s: %d launches, want %d (%d less flash-decoding's combine, a layer in each of %d forwards)", what, got.Launches, want, def.Launches, forwards)
		}
	}
	for _, lora := range []bool{false, true} {
		what := fmt.Sprintf("decode lora=%v", lora)
		def, _, _ := cuda.DecodeRun(t, openEmulator(t), lora, nil)
		be := openEmulator(t)
		be.SetVariants(on)
		got, steps, io := cuda.DecodeRun(t, be, lora, nil)
		cuda.CheckDecode(t, what+" decode_block", got, steps, io, c.V)
		same(what+" decode_block", got, def, steps, c.L)
	}
	def, _, _ := cuda.GroupsTransfer(t, true, nil)
	got, rounds, cg := cuda.GroupsTransfer(t, true, func(cg *cuda.CountedGen, _ *model.Generator) { cg.Backend.SetVariants(on) })
	io, _, _ := cuda.GroupsIO(rounds)
	cuda.CheckDecode(t, "groups + tool turn decode_block", got, cg.Forwards, io, checkutil.GroupsConfig.V)
	same("groups + tool turn decode_block", got, def, cg.Forwards, checkutil.GroupsConfig.L)
}

// TestDecodeVecPlantedBug: with attention.cuh's DS_BUG_VEC_GROUP planted
// in attention_cached_split_vec (the output pass's first group of
// positions left out of the sum), the checks of the decode_vec variant fail
// (AttentionCachedVec naming the output, GenerateDecodeVec); the default's
// AttentionCached, which never launches that kernel, still passes.
func TestDecodeVecPlantedBug(t *testing.T) {
	be := openEmulator(t)
	vec := cudacheck.Check{Name: "AttentionCachedVec", Run: cudacheck.CheckAttentionCachedVec}
	if err := vec.Do(be); err != nil {
		t.Fatalf("the check fails without a defect: %v", err)
	}
	cuda.EmuPlanted["attention_cached_split_vec"] = "vec_group"
	defer delete(cuda.EmuPlanted, "attention_cached_split_vec")
	err := vec.Do(be)
	if err == nil {
		t.Fatal("AttentionCachedVec passed with the output's first group left out")
	}
	if !strings.Contains(err.Error(), "out[") {
		t.Errorf("error %q does not name the output", err)
	}
	t.Log(err)
	if err := (cudacheck.Check{Name: "GenerateDecodeVec", Run: cudacheck.CheckGenerateDecodeVec}).Do(be); err == nil {
		t.Error("GenerateDecodeVec passed with the output's first group left out")
	} else {
		t.Logf("GenerateDecodeVec: %v", err)
	}
	if err := (cudacheck.Check{Name: "AttentionCached", Run: cudacheck.CheckAttentionCached}).Do(be); err != nil {
		t.Errorf("AttentionCached, of the default kernel, fails with the variant's defect planted: %v", err)
	}
	if v := be.Variants(); v != (cuda.Variants{}) {
		t.Errorf("the checks left the variants at %v", v)
	}
}
