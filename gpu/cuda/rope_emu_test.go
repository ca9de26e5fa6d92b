//go:build cudaemu && !cuda

package cuda_test

import (
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestRopeQKPlantedBug runs the fused RoPE check with the key heads
// addressed at the query heads' row stride (rope_qk/kstride): the
// check must fail, naming the keys.
func TestRopeQKPlantedBug(t *testing.T) {
	be := openEmulator(t)
	check := cudacheck.Check{Name: "RopeQK", Run: cudacheck.CheckRopeQK}
	if err := check.Do(be); err != nil {
		t.Fatalf("the check fails without a defect: %v", err)
	}
	cuda.EmuPlanted["rope_qk"] = "kstride"
	defer delete(cuda.EmuPlanted, "rope_qk")
	err := check.Do(be)
	if err == nil {
		t.Fatal("the check passed with the key stride planted in rope_qk")
	}
	if !strings.Contains(err.Error(), "k/") {
		t.Errorf("error %q does not name k", err)
	}
	t.Log(err)
}
