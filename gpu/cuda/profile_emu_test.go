//go:build cudaemu && !cuda

package cuda

import (
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/model"
)

// profileDecode generates 3 tokens for two prompts on m (greedy).
func profileDecode(t *testing.T, m *model.Model) {
	t.Helper()
	g, err := m.NewGenerator(2, 16)
	if err != nil {
		t.Fatal(err)
	}
	g.NoPrefixSharing = true
	reqs := []model.Request{
		{Prompt: []int32{5, 7, 9}, Sample: model.SampleConfig{MaxTokens: 3, IgnoreEOS: true}},
		{Prompt: []int32{6, 8}, Sample: model.SampleConfig{MaxTokens: 3, IgnoreEOS: true}},
	}
	if _, err := g.Generate(reqs); err != nil {
		t.Fatal(err)
	}
}

func profileEntry(p Profile, op string) (ProfileEntry, bool) {
	for _, e := range p.Entries {
		if e.Op == op {
			return e, true
		}
	}
	return ProfileEntry{}, false
}

// TestProfileEmulator: with profiling on, a training step and a decode
// leave one entry per kernel, cuBLAS call kind and copy kind that ran:
// the fused attention, the cached attention of decoding and the bfloat16
// GemmEx among them; the kernel calls are the backend's launch count, the
// copies its copy counts, every time is > 0 and the shares add to 1. With
// profiling off nothing is recorded, and after DisableProfile the device's
// driver is the plain one again.
func TestProfileEmulator(t *testing.T) {
	be := openEmulator(t)
	be.SetPrecision(BF16)
	s := NewPolicyStep(t, be, 1, false)
	s.Run(t) // warm-up: the staging arena settles

	s.Run(t)
	profileDecode(t, s.M)
	if p, err := be.Profile(); err != nil || len(p.Entries) != 0 || p.Total != 0 {
		t.Fatalf("profiling off: Profile() = %d entries, %v total, %v; want none", len(p.Entries), p.Total, err)
	}

	if err := be.EnableProfile(); err != nil {
		t.Fatal(err)
	}
	be.ResetCounters()
	s.Run(t)
	profileDecode(t, s.M)
	p, err := be.Profile()
	if err != nil {
		t.Fatal(err)
	}
	c := be.Counters()
	t.Logf("emulator, a training step and a decode:\n%v", p)

	for _, op := range []string{"flash_attention_forward_ldsm_mma64", "flash_attention_backward_dq_ldsm_mma64", "attention_cached_split", "adamw", "embedding_forward"} {
		if e, ok := profileEntry(p, op); !ok || e.Kind != "kernel" {
			t.Errorf("no kernel entry %q in the profile", op)
		}
	}
	gemm := false
	for _, e := range p.Entries {
		gemm = gemm || (e.Kind == "cublas" && strings.HasPrefix(e.Op, "cublasGemmEx bf16->f32 "))
		if e.Calls <= 0 || e.Time <= 0 || e.Share <= 0 || e.Mean() <= 0 {
			t.Errorf("entry %+v: want calls, time, share and mean > 0", e)
		}
	}
	if !gemm {
		t.Errorf("no cublasGemmEx bf16->f32 entry in the profile (BF16 products)")
	}
	if got := p.Calls("kernel"); got != c.Launches || got == 0 {
		t.Errorf("profile counts %d kernel calls, the backend %d launches", got, c.Launches)
	}
	for _, x := range []struct {
		op   string
		want int64
	}{{"memcpy HtoD", c.Uploads}, {"memcpy DtoH", c.Downloads}, {"memcpy DtoD", c.DeviceCopies}} {
		e, _ := profileEntry(p, x.op)
		if e.Calls != x.want || e.Kind != "copy" && x.want > 0 {
			t.Errorf("profile: %d %s copies (kind %q), the backend counted %d", e.Calls, x.op, e.Kind, x.want)
		}
	}
	share := 0.0
	for i, e := range p.Entries {
		share += e.Share
		if i > 0 && e.Time > p.Entries[i-1].Time {
			t.Errorf("entries not sorted by time: %v after %v", e, p.Entries[i-1])
		}
	}
	if share < 0.999 || share > 1.001 {
		t.Errorf("shares add to %v, want 1", share)
	}

	// off again: the plain driver and cuBLAS, the times kept, nothing added
	if err := be.DisableProfile(); err != nil {
		t.Fatal(err)
	}
	if _, ok := be.d.drv.(emuDriver); !ok {
		t.Errorf("after DisableProfile the driver is %T, want emuDriver", be.d.drv)
	}
	if _, ok := be.d.blas.api.(emuBlas); !ok {
		t.Errorf("after DisableProfile cuBLAS is %T, want emuBlas", be.d.blas.api)
	}
	s.Run(t)
	p2, err := be.Profile()
	if err != nil || p2.Total != p.Total || p2.Calls("") != p.Calls("") {
		t.Errorf("after DisableProfile a step changed the profile: %v calls, %v (was %v, %v); %v", p2.Calls(""), p2.Total, p.Calls(""), p.Total, err)
	}
	if err := be.ResetProfile(); err != nil {
		t.Fatal(err)
	}
	if p, _ := be.Profile(); len(p.Entries) != 0 {
		t.Errorf("after ResetProfile: %d entries, want none", len(p.Entries))
	}
}

// TestProfileEmulatorPoolAndClose: more ops than the pool holds are
// resolved as it fills (the counts stay exact), and Close with profiling
// on releases the events and keeps the times.
func TestProfileEmulatorPoolAndClose(t *testing.T) {
	be := OpenEmulator()
	x := be.Alloc("x", 64)
	if err := be.EnableProfile(); err != nil {
		t.Fatal(err)
	}
	const n = profilePairs + 10
	for range n {
		be.Zero(x)
	}
	if got := len(be.d.prof.all); got != profilePairs {
		t.Errorf("%d event pairs made for %d ops, want the pool's %d", got, n, profilePairs)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(be.d.prof.all); got != 0 {
		t.Errorf("%d event pairs left after Close, want 0", got)
	}
	p, err := be.Profile()
	if e, _ := profileEntry(p, "memset"); err != nil || e.Calls != n {
		t.Errorf("after Close: %d memsets in the profile (%v), want %d", e.Calls, err, n)
	}
	if err := be.DisableProfile(); err != nil {
		t.Fatal(err)
	}
}
