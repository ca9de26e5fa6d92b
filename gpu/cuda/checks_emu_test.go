//go:build cudaemu && !cuda

package cuda_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// checkNamed is the check of cudacheck.Checks called name.
func checkNamed(t *testing.T, name string) cudacheck.Check {
	t.Helper()
	for _, c := range cudacheck.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s", name)
	return cudacheck.Check{}
}

// TestKernelsOnEmulator runs every check with the kernels of kernels.cu
// executed on the CPU by the emulator, through the same op code (backend.go)
// and staging as on a GPU.
func TestKernelsOnEmulator(t *testing.T) {
	be := openEmulator(t)
	for _, c := range cudacheck.Checks {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Do(be); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDecodeGraphGroupsEmulator: the groups workload (a GRPO rollout with
// a tool turn: slots refilled while others decode, prompts sharing
// prefixes, a second round appending to the first round's caches) gives
// the same tokens and log-probs with graphs as without, bit for bit, with
// graphs replayed; and the check DecodeGraph passes.
func TestDecodeGraphGroupsEmulator(t *testing.T) {
	w := checkutil.NewGroupsWorkload()
	var rounds [2][2]checkutil.GroupsRound
	var st cuda.GraphStats
	for k, on := range []bool{false, true} {
		be := openEmulator(t)
		be.SetDecodeGraphs(on)
		_, g, err := w.Generator(be)
		if err != nil {
			t.Fatal(err)
		}
		if rounds[k], err = w.Run(g); err != nil {
			t.Fatal(err)
		}
		st = be.GraphStats()
	}
	t.Logf("%+v", st)
	for n := range 2 {
		for i := range rounds[0][n].Results {
			x, y := rounds[1][n].Results[i], rounds[0][n].Results[i]
			if !slices.Equal(x.Tokens, y.Tokens) || !slices.Equal(x.Logprobs, y.Logprobs) {
				t.Errorf("round %d request %d: %v %v with graphs, %v %v without", n+1, i, x.Tokens, x.Logprobs, y.Tokens, y.Logprobs)
			}
		}
		if rounds[1][n].Share != rounds[0][n].Share || rounds[1][n].Share == 0 {
			t.Errorf("round %d: %d prompt tokens shared with graphs, %d without", n+1, rounds[1][n].Share, rounds[0][n].Share)
		}
	}
	if st.Replays == 0 {
		t.Errorf("%+v: no graph replayed", st)
	}
	be := openEmulator(t)
	if err := (cudacheck.Check{Name: "DecodeGraph", Run: cudacheck.CheckDecodeGraph}).Do(be); err != nil {
		t.Error(err)
	}
}

// TestSwiGLUBackwardHPlanted plants defects in swiglu_backward_h
// (dev/cuda/elementwise.edits): h without its up factor must fail the op's
// check and the training step's, and h's bfloat16 copy made of gate the
// mixed-precision products' check (a product reading h after the op).
func TestSwiGLUBackwardHPlanted(t *testing.T) {
	be := openEmulator(t)
	for _, tc := range []struct {
		defect string
		fail   []cudacheck.Check
	}{
		{"no_up", []cudacheck.Check{{Name: "SwiGLUBackwardH", Run: cudacheck.CheckSwiGLUBackwardH}, {Name: "TrainStep", Run: cudacheck.CheckTrainStep}, {Name: "TrainStepBF16", Run: cudacheck.CheckTrainStepBF16}}},
		{"copy", []cudacheck.Check{{Name: "MatmulBF16", Run: cudacheck.CheckMatmulBF16}}},
	} {
		t.Run(tc.defect, func(t *testing.T) {
			cuda.EmuPlanted["swiglu_backward_h"] = tc.defect
			defer delete(cuda.EmuPlanted, "swiglu_backward_h")
			for _, c := range tc.fail {
				if err := c.Do(be); err == nil {
					t.Errorf("%s passed with %s planted in swiglu_backward_h", c.Name, tc.defect)
				} else {
					t.Logf("%s: %v", c.Name, err)
				}
			}
		})
	}
}

// TestDecodeProductsExactEmulator pins what holds of the fused products
// where the summation order is fixed: the emulator's cuBLAS sums each
// element over K in order whatever the output width, so one product over
// q|k|v (gate|up) equals the separate products bit for bit, in fp32, tf32
// and bf16 (on a GPU, the check DecodeProducts allows decodeProductTol).
// With the bfloat16 copy's view offset ignored (plantBF16 "offset": the
// separate products of k and v then read q's rows), it fails.
func TestDecodeProductsExactEmulator(t *testing.T) {
	be := openEmulator(t)
	if err := cudacheck.DecodeProductsCompare(be, 0); err != nil {
		t.Fatalf("the fused products differ from the separate ones on the emulator: %v", err)
	}
	be.SetPlantBF16("offset")
	defer be.SetPlantBF16("")
	err := cudacheck.DecodeProductsCompare(be, cudacheck.DecodeProductTol)
	if err == nil || !strings.Contains(err.Error(), "bfloat16") {
		t.Fatalf("with the view offset planted, the bf16 comparison gave %v", err)
	}
	t.Log(err)
}

// TestDecodeQKVPlantedBugs: decode_qkv with the cache rows ignored (the
// keys and values at the token's position in slot 0, decode.cuh
// decode_qkv/slot) and with the value heads' bias left out (decode_qkv/vbias) each
// fail the check DecodeQKV, naming the cache.
func TestDecodeQKVPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	check := cudacheck.Check{Name: "DecodeQKV", Run: cudacheck.CheckDecodeQKV}
	if err := check.Do(be); err != nil {
		t.Fatalf("the check fails without a defect: %v", err)
	}
	for plant, names := range map[string]string{"slot": "cache", "vbias": "v cache"} {
		cuda.EmuPlanted["decode_qkv"] = plant
		err := check.Do(be)
		delete(cuda.EmuPlanted, "decode_qkv")
		if err == nil {
			t.Errorf("the check passed with %s planted in decode_qkv", plant)
			continue
		}
		if !strings.Contains(err.Error(), names) {
			t.Errorf("%s: error %q does not name the %s", plant, err, names)
		}
		t.Logf("%s: %v", plant, err)
	}
}

// TestSwiGLURowsPlantedBug: swiglu_rows with gate and up swapped
// (swiglu_rows/swap) fails the check SwiGLURows.
func TestSwiGLURowsPlantedBug(t *testing.T) {
	be := openEmulator(t)
	check := cudacheck.Check{Name: "SwiGLURows", Run: cudacheck.CheckSwiGLURows}
	if err := check.Do(be); err != nil {
		t.Fatalf("the check fails without a defect: %v", err)
	}
	cuda.EmuPlanted["swiglu_rows"] = "swap"
	defer delete(cuda.EmuPlanted, "swiglu_rows")
	err := check.Do(be)
	if err == nil {
		t.Fatal("the check passed with gate and up swapped in swiglu_rows")
	}
	t.Log(err)
}
