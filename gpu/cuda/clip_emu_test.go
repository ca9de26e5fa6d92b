//go:build cudaemu && !cuda

package cuda_test

import (
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestClipAdamWEmulator: the ClipAdamW check passes on the emulator, and
// fails with the clipping factor planted away (optimizer.cuh
// adamw/noclip) while AdamW's own check passes. A training step's
// update (gpu/model's AdamW.Update, which takes ClipAdamW) launches
// clip_coef and no `scale`, with the same synchronisations and copies as
// the clip_scale variant's ClipGradNorm then AdamW, and the same
// parameters bit for bit.
func TestClipAdamWEmulator(t *testing.T) {
	be := openEmulator(t)
	if err := cudacheck.CheckClipAdamW(be); err != nil {
		t.Fatal(err)
	}
	cuda.EmuPlanted["adamw"] = "noclip"
	err := cudacheck.CheckClipAdamW(be)
	errAdamW := cudacheck.CheckAdamW(be)
	delete(cuda.EmuPlanted, "adamw")
	if err == nil {
		t.Error("ClipAdamW passed with the clipping factor ignored")
	} else {
		t.Logf("planted noclip: %v", err)
	}
	if errAdamW != nil {
		t.Errorf("AdamW (no clipping factor) failed with the noclip defect: %v", errAdamW)
	}

	type run struct {
		params []float32
		c      cuda.Counters
		ops    map[string]int64
	}
	step := func(clipScale bool) run {
		b := openEmulator(t)
		b.SetVariants(cuda.Variants{ClipScale: clipScale})
		s := cuda.NewPolicyStep(t, b, 2, false)
		s.Opt.Config.MaxGradNorm = 1e-3 // every step clips
		c := cuda.Counted(b, func() { s.Run(t) })
		if err := b.EnableProfile(); err != nil {
			t.Fatal(err)
		}
		s.Run(t)
		p, err := b.Profile()
		if err != nil {
			t.Fatal(err)
		}
		ops := map[string]int64{}
		for _, e := range p.Entries {
			ops[e.Op] = e.Calls
		}
		out := make([]float32, len(s.M.Params.Data))
		b.Download(out, s.M.Params.Data)
		return run{out, c, ops}
	}
	fused, sep := step(false), step(true)
	if fused.ops["clip_coef"] != 1 || fused.ops["scale"] != 0 || sep.ops["clip_coef"] != 0 || sep.ops["scale"] != 1 {
		t.Errorf("a step's clip_coef and scale launches: %d and %d fused, %d and %d with clip_scale; want 1, 0, 0, 1",
			fused.ops["clip_coef"], fused.ops["scale"], sep.ops["clip_coef"], sep.ops["scale"])
	}
	if fused.c.Syncs != sep.c.Syncs || fused.c.Uploads != sep.c.Uploads || fused.c.Downloads != sep.c.Downloads ||
		fused.c.HostToDevice != sep.c.HostToDevice || fused.c.DeviceToHost != sep.c.DeviceToHost {
		t.Errorf("the step's transfers: fused %v, clip_scale %v", fused.c, sep.c)
	}
	for i := range fused.params {
		if fused.params[i] != sep.params[i] {
			t.Fatalf("parameter %d after three steps: %v fused, %v with clip_scale", i, fused.params[i], sep.params[i])
		}
	}
}
