//go:build cudaemu && !cuda

package cuda_test

import (
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestClipAdamWEmulator: the ClipAdamW check passes on the emulator, and
// fails with the clipping factor planted away (optimizer.cuh
// adamw/noclip) while AdamW's own check passes (the check compares
// ClipAdamW with ClipGradNorm then AdamW bit for bit). A training step's
// update (gpu/model's AdamW.Update, which takes ClipAdamW) launches
// clip_coef and no `scale`.
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

	b := openEmulator(t)
	s := cuda.NewPolicyStep(t, b, 2, false)
	s.Opt.Config.MaxGradNorm = 1e-3 // every step clips
	s.Run(t)
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
	if ops["clip_coef"] != 1 || ops["scale"] != 0 {
		t.Errorf("a step's clip_coef and scale launches: %d and %d; want 1 and 0", ops["clip_coef"], ops["scale"])
	}
}
