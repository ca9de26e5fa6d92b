//go:build cudaemu && !cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// sampleVersusBisect samples CheckSampleShapes' rows (every kind and shape
// at V 20000, and the GRPO-like decode's at V 151936, which SampleTokens
// would send to the split path) with sample_tokens_hist, with defect planted in it ("" for none), and with
// the bisection swapped in its place (sample_tokens_hist/bisect, the
// kernel the radix select replaced): an error names the first row whose
// token or log-prob differ in a bit.
func sampleVersusBisect(be *cuda.Backend, defect string) error {
	const kernel = "sample_tokens_hist"
	defer delete(cuda.EmuPlanted, kernel)
	hist := cuda.SampleHist(be) // the GRPO-like rows would take the split path
	hist(true)
	defer hist(false)
	r := rand.New(rand.NewPCG(27, 27))
	for _, V := range []int{20000, 151936} {
		params, logits := cudacheck.SampleShapesRows(r, V)
		if V > 20000 {
			params, logits = cudacheck.SampleShapesGRPO(r, V)
		}
		M := len(params)
		z := be.Alloc("logits", M*V)
		be.Upload(z, logits)
		var tok [2][]int32
		var lp [2][]float32
		for i, plant := range []string{defect, "bisect"} {
			cuda.EmuPlanted[kernel] = plant
			tok[i], lp[i] = make([]int32, M), make([]float32, M)
			be.SampleTokens(tok[i], lp[i], z, params, M, V)
		}
		be.Free(z)
		for i := range tok[0] {
			if tok[1][i] != tok[0][i] || math.Float32bits(lp[1][i]) != math.Float32bits(lp[0][i]) {
				return fmt.Errorf("V=%d row %d (%+v): radix select token %d (log-prob %g), bisection %d (%g)",
					V, i, params[i], tok[0][i], lp[0][i], tok[1][i], lp[1][i])
			}
		}
	}
	return nil
}

// TestSampleBisectEmulator: the radix-select kernel gives the bisection's
// tokens and log-probs bit for bit over CheckSampleShapes' rows, and the
// check itself passes (TestKernelsOnEmulator runs it too).
func TestSampleBisectEmulator(t *testing.T) {
	be := openEmulator(t)
	if err := sampleVersusBisect(be, ""); err != nil {
		t.Fatal(err)
	}
	if err := (cudacheck.Check{Name: "SampleShapes", Run: cudacheck.CheckSampleShapes}).Do(be); err != nil {
		t.Fatal(err)
	}
}

// TestSampleHistSkewEmulator: with every mass-based guess of the radix
// select one key off (sample_tokens_hist/skew: above the answer for the draw,
// below it for top-p), hist_settle's exact test must catch each and
// bisect to the default's cut, so the tokens are still the bisection's.
// It is what a guess spoilt by the fp32 masses' rounding goes through.
func TestSampleHistSkewEmulator(t *testing.T) {
	if err := sampleVersusBisect(openEmulator(t), "skew"); err != nil {
		t.Fatal(err)
	}
}

// TestSampleHistPlantedBugs: a defect planted in the radix-select kernel
// (the top-k count scan one member late: top-k keeps K+1; the skewed
// guesses taken without hist_settle's test: wrong top-p cuts and draws)
// makes its tokens differ from the bisection's and fails the check
// against the CPU reference.
func TestSampleHistPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	for _, defect := range []string{"topk", "unsettled"} {
		t.Run(defect, func(t *testing.T) {
			err := sampleVersusBisect(be, defect)
			if err == nil {
				t.Fatalf("the tokens are the bisection's with %s planted in sample_tokens_hist", defect)
			}
			t.Log(err)
			cuda.EmuPlanted["sample_tokens_hist"] = defect
			defer delete(cuda.EmuPlanted, "sample_tokens_hist")
			if err := (cudacheck.Check{Name: "SampleShapes", Run: cudacheck.CheckSampleShapes}).Do(be); err == nil {
				t.Fatalf("the check passed with %s planted in sample_tokens_hist", defect)
			} else {
				t.Log(err)
			}
		})
	}
}

// TestTransferSampleHist: SampleTokens on flat rows (3000 candidates
// each: the radix select runs) makes one launch and one synchronisation,
// allocates nothing once the arena has grown, and moves what the
// bisection in its place moves (the same arguments and scratch), giving
// the same tokens.
func TestTransferSampleHist(t *testing.T) {
	be := openEmulator(t)
	const M, V = 4, 3000
	r := rand.New(rand.NewPCG(5, 5))
	z := be.Alloc("logits", M*V)
	defer be.Free(z)
	be.Upload(z, checkutil.Randn(r, M*V, 0.01))
	params := make([]gpu.SampleParams, M)
	for i := range params {
		params[i] = gpu.SampleParams{Temperature: 1, TopK: 50, TopP: 0.95, U: r.Float64()}
	}
	var c [2]cuda.Counters
	var tok [2][]int32
	hist := cuda.SampleHist(be) // these rows would take the split path
	hist(true)
	defer hist(false)
	defer delete(cuda.EmuPlanted, "sample_tokens_hist")
	for i, plant := range []string{"", "bisect"} {
		cuda.EmuPlanted["sample_tokens_hist"] = plant
		tok[i] = make([]int32, M)
		lp := make([]float32, M)
		be.SampleTokens(tok[i], lp, z, params, M, V) // the arena grows here
		be.ResetCounters()
		be.SampleTokens(tok[i], lp, z, params, M, V)
		c[i] = be.Counters()
		c[i] = c[i].Counts() // the times apart
	}
	if c[0] != c[1] || c[0].Launches != 1 || c[0].Syncs != 1 || c[0].Allocs != 0 {
		t.Errorf("%+v; the bisection %+v (want the same, one launch, one sync, no allocation)", c[0], c[1])
	}
	for i := range tok[0] {
		if tok[1][i] != tok[0][i] {
			t.Errorf("row %d: token %d, %d with the bisection", i, tok[0][i], tok[1][i])
		}
	}
}

// sampleSplit is the split path on be as its check compares it with
// sample_tokens_hist.
func sampleSplit(be *cuda.Backend) cudacheck.SampleSplit {
	return cudacheck.SampleSplit{Takes: cuda.SampleSplits, Hist: cuda.SampleHist(be)}
}

// TestSampleSplitEmulator runs the check of the split path on the
// emulator: its tokens are the CPU reference's and sample_tokens_hist's.
func TestSampleSplitEmulator(t *testing.T) {
	be := openEmulator(t)
	if err := cudacheck.CheckSampleSplit(be, sampleSplit(be)); err != nil {
		t.Fatal(err)
	}
}

// TestSampleSplitPlantedBugs: the check fails with a defect planted in the
// split path (dev/cuda/sample.edits): the ties at the K-th key taken from
// the highest ids (in the slices and in the merge), and a slice's e taken
// against the slice's own max instead of the row's (a wrong se: wrong
// draws and log-probs).
func TestSampleSplitPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	for _, c := range []struct {
		defect string
		builds map[string]string
	}{
		{"tie", map[string]string{"sample_split_sum": "tie", "sample_split_pick": "tie"}},
		{"slice_max", map[string]string{"sample_split_sum": "slice_max"}},
	} {
		t.Run(c.defect, func(t *testing.T) {
			for k, b := range c.builds {
				defer cuda.UseBuild(k, b)()
			}
			err := cudacheck.CheckSampleSplit(be, sampleSplit(be))
			if err == nil {
				t.Fatalf("the check passed with %s planted in the split kernels", c.defect)
			}
			t.Log(err)
		})
	}
}

// TestTransferSampleSplit: a call whose rows the split path takes runs its
// three launches and moves what sample_tokens_hist moves (the params up,
// tokens and log-probs down, one synchronisation, no allocation once the
// arena has grown), with sample_tokens_hist's tokens; a call with a row it
// does not take (top-p alone) runs sample_tokens_hist, one launch.
func TestTransferSampleSplit(t *testing.T) {
	be := openEmulator(t)
	const M, V = 4, 9000
	r := rand.New(rand.NewPCG(6, 6))
	z := be.Alloc("logits", M*V)
	defer be.Free(z)
	be.Upload(z, checkutil.Randn(r, M*V, 0.01))
	params := make([]gpu.SampleParams, M)
	for i := range params {
		params[i] = gpu.SampleParams{Temperature: 1, TopK: 50, TopP: 0.95, U: r.Float64()}
	}
	params[1] = gpu.SampleParams{Temperature: 0.8, U: r.Float64()}
	params[2] = gpu.SampleParams{}
	hist := cuda.SampleHist(be)
	run := func(histOnly bool, params []gpu.SampleParams) (cuda.Counters, []int32) {
		hist(histOnly)
		defer hist(false)
		tok, lp := make([]int32, M), make([]float32, M)
		be.SampleTokens(tok, lp, z, params, M, V) // the arena grows here
		be.ResetCounters()
		be.SampleTokens(tok, lp, z, params, M, V)
		c := be.Counters()
		return c.Counts(), tok
	}
	def, dt := run(true, params)
	got, st := run(false, params)
	want := def
	want.Launches = 3
	if got != want || got.Syncs != 1 || got.Allocs != 0 {
		t.Errorf("split path: %+v; sample_tokens_hist %+v (want three launches, one sync, no allocation, the same copies)", got, def)
	}
	for i := range dt {
		if st[i] != dt[i] {
			t.Errorf("row %d: token %d by the split path, %d by sample_tokens_hist", i, st[i], dt[i])
		}
	}
	params[3] = gpu.SampleParams{Temperature: 1, TopP: 0.9, U: 0.5}
	fall, _ := run(false, params)
	if fall.Launches != 1 {
		t.Errorf("a call with a top-p row: %d launches, want 1 (sample_tokens_hist)", fall.Launches)
	}
}

// TestGenerateSampleSplitKernels: the generation check of the split path
// samples with its three kernels, never with sample_tokens_hist (each of
// its rows is one the split path takes).
func TestGenerateSampleSplitKernels(t *testing.T) {
	be := openEmulator(t)
	if err := be.EnableProfile(); err != nil {
		t.Fatal(err)
	}
	if err := cudacheck.CheckGenerateSampleSplit(be); err != nil {
		t.Fatal(err)
	}
	p, err := be.Profile()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for _, e := range p.Entries {
		calls[e.Op] += e.Calls
	}
	if calls["sample_split_max"] == 0 || calls["sample_split_sum"] != calls["sample_split_max"] ||
		calls["sample_split_pick"] != calls["sample_split_max"] || calls["sample_tokens_hist"] != 0 {
		t.Errorf("kernel calls %v: want the three split kernels alike, no sample_tokens_hist", calls)
	}
}
