// Package modeltest reads the goldens that scripts/goldens/model writes beside the tiny
// checkpoints of gpu/model/testdata (transformers and PyTorch autograd on them), for the tests
// of gpu/model and of the backends that run the model (gpu/cuda's emulator).
package modeltest

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlhost/rlhost/gpu/safetensors"
)

// Meta is NAME-golden.json: the batch, the loss's coefficients, the AdamW step and greedy
// generations (scripts/goldens/model/make_goldens.py, make_family_goldens.py).
type Meta struct {
	B, T     int
	Lengths  []int       `json:"lengths"`
	Tokens   [][]int32   `json:"tokens"`
	Targets  [][]int32   `json:"targets"`
	Weights  [][]float32 `json:"weights"`
	EntCoef  float32     `json:"ent_coef"`
	AdamW    AdamW       `json:"adamw"`
	Generate []struct {
		Prompt   []int32   `json:"prompt"`
		Tokens   []int32   `json:"tokens"`
		Logprobs []float64 `json:"logprobs"`
	} `json:"generate"`
}

// AdamW is the optimiser step a golden took, and the gradient norm it clipped.
type AdamW struct {
	LR          float32 `json:"lr"`
	Beta1       float32 `json:"beta1"`
	Beta2       float32 `json:"beta2"`
	Eps         float32 `json:"eps"`
	WeightDecay float32 `json:"weight_decay"`
	MaxNorm     float32 `json:"max_norm"`
	GradNorm    float64 `json:"grad_norm"`
}

// Golden is one checkpoint's goldens: Meta and the tensors of NAME-golden.safetensors (logits,
// logp, entropy, loss, grad.<param>, adamw.<param>, ...).
type Golden struct {
	Meta
	tensors *safetensors.File
}

// Load reads dir/NAME-golden.json and dir/NAME-golden.safetensors; the file is closed when
// the test ends.
func Load(t testing.TB, dir, name string) *Golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+"-golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Golden{}
	if err := json.Unmarshal(b, &g.Meta); err != nil {
		t.Fatalf("%s-golden.json: %v", name, err)
	}
	if g.tensors, err = safetensors.Open(filepath.Join(dir, name+"-golden.safetensors")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.tensors.Close() })
	return g
}

// Get is the golden tensor name as float32s.
func (g *Golden) Get(t testing.TB, name string) []float32 {
	t.Helper()
	x, _, err := g.tensors.Float32s(name)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Tensors opens a goldens file without its Meta (NAME-lora-golden.safetensors).
func Tensors(t testing.TB, path string) *Golden {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &Golden{tensors: f}
}

// MaxRelErr is max_i |got_i - want_i| / max_i |want_i| (the absolute error when want is all
// zeros); NaN when a difference is NaN.
func MaxRelErr(got, want []float32) float64 {
	var d, m float64
	for i := range want {
		d = math.Max(d, math.Abs(float64(got[i])-float64(want[i])))
		m = math.Max(m, math.Abs(float64(want[i])))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// CheckClose fails t when got and want differ in length or MaxRelErr(got, want) is above tol
// or NaN; with -v it logs the error.
func CheckClose(t testing.TB, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	if e := MaxRelErr(got, want); e > tol || math.IsNaN(e) {
		t.Errorf("%s: max relative error %.3g > %.3g", what, e, tol)
	} else if testing.Verbose() {
		t.Logf("%s: max relative error %.2g", what, e)
	}
}
