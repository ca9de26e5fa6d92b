//go:build cudaemu && !cuda

package cuda

import (
	"strings"
	"testing"
)

// TestAttentionCachedPlantedBugs runs the cached attention's check with a
// defect planted in attention_cached (attention.cuh's ATTC_BUG_*: the
// barriers of the warps' reduction left out, the group's query heads mapped
// to the wrong KV head, the token's own position left out): each must make
// the check fail, naming the output.
func TestAttentionCachedPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	check := Check{"AttentionCached", checkAttentionCached}
	if err := check.Do(be); err != nil {
		t.Fatalf("the check fails without a defect: %v", err)
	}
	for _, defect := range []string{"nosync", "head", "last"} {
		t.Run(defect, func(t *testing.T) {
			emuPlanted["attention_cached"] = defect
			defer delete(emuPlanted, "attention_cached")
			err := check.Do(be)
			if err == nil {
				t.Fatalf("the check passed with %s planted in attention_cached", defect)
			}
			if !strings.Contains(err.Error(), "out") {
				t.Errorf("error %q does not name out", err)
			}
			t.Log(err)
		})
	}
}
