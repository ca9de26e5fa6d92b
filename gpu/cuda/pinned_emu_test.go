//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// Uploads through the page-locked buffer (pinned.go) on the emulator,
// whose copies from page-locked memory run when the stream reaches them,
// as on a GPU: an upload whose bytes were handed out again before then
// copies the later bytes.

// uploadRound uploads tensors of the given lengths one after another
// without a synchronisation, overwriting each host source right after its
// upload (the caller may reuse it at once), then downloads them all and
// compares. It returns the counts of the uploads alone.
func uploadRound(be *Backend, lens []int, seed uint64) (Counters, error) {
	r := rand.New(rand.NewPCG(seed, 9))
	dev := make([][]float32, len(lens))
	want := make([][]float32, len(lens))
	defer func() {
		for _, d := range dev {
			if d != nil {
				be.Free(d)
			}
		}
	}()
	for i, n := range lens {
		dev[i] = be.Alloc(fmt.Sprintf("t%d", i), n)
	}
	c0 := be.Counters()
	for i, n := range lens {
		src := checkutil.Randn(r, n, 1)
		want[i] = slices.Clone(src)
		be.Upload(dev[i], src)
		clear(src)
	}
	c := be.Counters().Sub(c0)
	for i, n := range lens {
		got := make([]float32, n)
		be.Download(got, dev[i])
		for j := range got {
			if got[j] != want[i][j] {
				return c, fmt.Errorf("tensor %d (%d values): element %d is %v, uploaded %v", i, n, j, got[j], want[i][j])
			}
		}
	}
	return c, nil
}

func TestPinnedUploadsEmulator(t *testing.T) {
	be := openEmulator(t)
	if on, why := be.PinnedUploads(); !on {
		t.Fatalf("uploads not through page-locked memory on the emulator: %s", why)
	}
	// small and medium uploads, no synchronisation between them
	lens := []int{1, 7, 1000, 64, 300000, 3}
	c, err := uploadRound(be, lens, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c.PinnedUploads != int64(len(lens)) || c.Uploads != int64(len(lens)) || c.Syncs != 0 {
		t.Errorf("%d uploads: %v (want all through page-locked memory, no synchronisation)", len(lens), c)
	}
	// more than the buffer holds: one synchronisation, then from the front
	largest := pinnedLargest / 4
	lens = []int{largest, largest, largest, largest, largest, 5}
	if c, err = uploadRound(be, lens, 2); err != nil {
		t.Fatal(err)
	}
	if c.PinnedUploads != int64(len(lens)) || c.Syncs != 1 {
		t.Errorf("%d uploads of %d bytes in a buffer of %d: %v (want all through page-locked memory, one synchronisation)",
			len(lens), pinnedLargest, pinnedSize, c)
	}
	// larger than pinnedLargest: from the caller's memory
	if c, err = uploadRound(be, []int{largest + 1, 2}, 3); err != nil {
		t.Fatal(err)
	}
	if c.PinnedUploads != 1 || c.Uploads != 2 || c.Syncs != 0 {
		t.Errorf("an upload of %d bytes and one of 8: %v (want the first from the caller's memory)", 4*(largest+1), c)
	}
	// switched off: every upload from the caller's memory, the same values
	be.SetPinnedUploads(false)
	if on, _ := be.PinnedUploads(); on {
		t.Error("PinnedUploads on after SetPinnedUploads(false)")
	}
	if c, err = uploadRound(be, []int{1, 1000, 300000}, 4); err != nil {
		t.Fatal(err)
	}
	if c.PinnedUploads != 0 || c.Uploads != 3 {
		t.Errorf("uploads switched off: %v (want none through page-locked memory)", c)
	}
}

// TestPinnedUploadsPlantedReuse plants a buffer handed out again from the
// front at every upload, without a synchronisation: the uploads' check
// and a training step's results must see it.
func TestPinnedUploadsPlantedReuse(t *testing.T) {
	be := openEmulator(t)
	be.d.pin.reuse = true
	if _, err := uploadRound(be, []int{1000, 64, 3}, 1); err == nil {
		t.Error("uploads with the buffer reused before the stream read it: the check passed")
	} else {
		t.Logf("planted reuse: %v", err)
	}
	be.d.pin.reuse = false
	if _, err := uploadRound(be, []int{1000, 64, 3}, 1); err != nil {
		t.Errorf("the same uploads, nothing planted: %v", err)
	}
}

// TestPinnedUploadsTrainingStep: a training step (forward, backward,
// AdamW) gives the same parameters bit for bit with its uploads through
// page-locked memory and from the caller's memory, in the same number of
// synchronisations. (The planted reuse is not run here: it hands the
// embedding token ids that are not the batch's, read out of bounds.)
func TestPinnedUploadsTrainingStep(t *testing.T) {
	params := func(pinnedOn bool) ([]float32, Counters) {
		be := openEmulator(t)
		be.SetPinnedUploads(pinnedOn)
		s := NewPolicyStep(t, be, 2, false)
		c := Counted(be, func() { s.Run(t) })
		p := make([]float32, len(s.M.Params.Data))
		be.Download(p, s.M.Params.Data)
		return p, c
	}
	on, con := params(true)
	off, coff := params(false)
	if !slices.Equal(on, off) {
		t.Error("training step: parameters differ with uploads through page-locked memory and from the caller's memory")
	}
	if con.PinnedUploads != con.Uploads || coff.PinnedUploads != 0 || con.Syncs != coff.Syncs || con.Uploads != coff.Uploads {
		t.Errorf("training step: through page-locked memory %v; from the caller's memory %v (want every upload through it, the same uploads and synchronisations)", con, coff)
	}
}

// TestPinnedEnv: RLHOST_CUDA_PINNED=0 when the device opens uploads from
// the caller's memory; unset or 1, through the buffer; anything else is an
// error naming the variable.
func TestPinnedEnv(t *testing.T) {
	for _, c := range []struct {
		v   string
		off bool
	}{{"", false}, {"1", false}, {"0", true}} {
		t.Setenv(PinnedEnv, c.v)
		if off, err := pinnedOffFromEnv(); err != nil || off != c.off {
			t.Errorf("%s=%q: off %v, %v; want off %v", PinnedEnv, c.v, off, err, c.off)
		}
		be := OpenEmulator()
		be.Upload(be.Alloc("x", 4), []float32{1, 2, 3, 4})
		if on, why := be.PinnedUploads(); on == c.off || be.Counters().PinnedUploads != map[bool]int64{false: 1, true: 0}[c.off] {
			t.Errorf("%s=%q: PinnedUploads %v (%s), %d through the buffer", PinnedEnv, c.v, on, why, be.Counters().PinnedUploads)
		}
		be.Close()
	}
	t.Setenv(PinnedEnv, "yes")
	if _, err := pinnedOffFromEnv(); err == nil || !strings.Contains(err.Error(), PinnedEnv) {
		t.Errorf("%s=yes: %v, want an error naming the variable", PinnedEnv, err)
	}
}
