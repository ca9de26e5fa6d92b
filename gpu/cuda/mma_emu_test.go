//go:build cudaemu && !cuda

package cuda_test

import (
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestMMAFragmentsEmulator: the emulated tensor-core product (emu.h)
// places every element where the PTX ISA's tables, as mma_check.go writes
// them out, say it is.
func TestMMAFragmentsEmulator(t *testing.T) {
	if err := (cudacheck.Check{Name: "MMAFragments", Run: cudacheck.CheckMMAFragments}).Do(openEmulator(t)); err != nil {
		t.Fatal(err)
	}
}

// TestMMAFragmentsPlantedSwap: the probe with two of a lane's A registers
// swapped (mma_bf16_probe/swap: rows 8-15 of columns 0-7 read as rows
// 0-7 of columns 8-15) must fail the check.
func TestMMAFragmentsPlantedSwap(t *testing.T) {
	be := openEmulator(t)
	cuda.EmuPlanted["mma_bf16_probe"] = "swap"
	defer delete(cuda.EmuPlanted, "mma_bf16_probe")
	err := (cudacheck.Check{Name: "MMAFragments", Run: cudacheck.CheckMMAFragments}).Do(be)
	if err == nil {
		t.Fatal("the check passed with two fragment registers swapped")
	}
	if !strings.Contains(err.Error(), "lane") {
		t.Errorf("error %q does not name the lane", err)
	}
	t.Log(err)
}

// TestMMALayoutTables: the tables of mma_check.go cover each fragment's
// elements once, so a check built on them tests every element.
func TestMMALayoutTables(t *testing.T) {
	for _, tc := range []struct {
		name      string
		per, rows int
		cols      int
		at        func(lane, i int) (int, int)
	}{{"A", 8, 16, 16, cudacheck.MmaA}, {"B", 4, 16, 8, cudacheck.MmaB}, {"C", 4, 16, 8, cudacheck.MmaC}} {
		seen := map[[2]int]bool{}
		for lane := 0; lane < 32; lane++ {
			for i := 0; i < tc.per; i++ {
				r, c := tc.at(lane, i)
				if r < 0 || r >= tc.rows || c < 0 || c >= tc.cols || seen[[2]int{r, c}] {
					t.Fatalf("%s: lane %d element %d at (%d,%d): outside or twice", tc.name, lane, i, r, c)
				}
				seen[[2]int{r, c}] = true
			}
		}
	}
}
