//go:build cudaemu

package cuda

import "testing"

// TestChecksWithAllVariants runs every check with every kernel variant on,
// as `RLHOST_CUDA_VARIANTS=all rlhost selftest --device cuda` does on a GPU
// (scripts/gpu/proof.sh): the checks written for the default kernels hold
// with the variants too.
func TestChecksWithAllVariants(t *testing.T) {
	be := openEmulator(t)
	all, err := ParseVariants("all")
	if err != nil {
		t.Fatal(err)
	}
	be.SetVariants(all)
	for _, c := range Checks {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Do(be); err != nil {
				t.Fatal(err)
			}
			if got := be.Variants(); got != all {
				t.Fatalf("the check left the variants at %v", got)
			}
		})
	}
}
