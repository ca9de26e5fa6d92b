package model

import (
	"encoding/json"
	"github.com/rlhost/rlhost/gpu/model/modeltest"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/safetensors"
)

// valueGoldenMeta is NAME-value-golden.json (scripts/goldens/model/make_value_goldens.py).
type valueGoldenMeta struct {
	B, T  int
	Coef  [][]float32     `json:"coef"`
	AdamW modeltest.AdamW `json:"adamw"`
}

func newTinyValue(t testing.TB, name string) *ValueModel {
	t.Helper()
	vm, err := NewValueModel(cpu.New(), loadCheckpoint(t, filepath.Join("testdata", name)))
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// TestValueGolden compares the critic's values, every gradient (decoder and head) and the
// parameters after one clipped AdamW step with a torch Linear(hidden, 1) on transformers'
// last hidden state.
func TestValueGolden(t *testing.T) {
	for _, name := range families {
		t.Run(name, func(t *testing.T) {
			vm := newTinyValue(t, name)
			g := loadGolden(t, name) // the batch
			b, err := os.ReadFile(filepath.Join("testdata", name+"-value-golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			var meta valueGoldenMeta
			if err := json.Unmarshal(b, &meta); err != nil {
				t.Fatal(err)
			}
			vg, err := safetensors.Open(filepath.Join("testdata", name+"-value-golden.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer vg.Close()
			get := func(k string) []float32 {
				x, _, err := vg.Float32s(k)
				if err != nil {
					t.Fatal(err)
				}
				return x
			}
			C := vm.Body.Config.C
			copy(vm.Head[:C], get("head.weight"))
			copy(vm.Head[C:], get("head.bias"))

			B, T := meta.B, meta.T
			N := B * T
			va := vm.NewActs(B, T)
			if err := vm.Forward(va, Batch{B: B, T: T, Tokens: flat(g.Tokens)}); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "values", va.Values, get("values"), 1e-5)
			coef := flat(meta.Coef)
			var loss float64
			for n := 0; n < N; n++ {
				loss += float64(coef[n]) * float64(va.Values[n])
			}
			checkClose(t, "loss", []float32{float32(loss)}, get("loss"), 1e-5)

			vm.ZeroGrads()
			if err := vm.Backward(va, coef); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "grad score.weight", vm.HeadGrad[:C], get("grad.score.weight"), 1e-5)
			checkClose(t, "grad score.bias", vm.HeadGrad[C:], get("grad.score.bias"), 1e-5)
			checked := 0
			for _, p := range vm.Body.Grads.Names {
				if p.Name == "lm_head.weight" { // unused by the critic
					for _, x := range p.Data {
						if x != 0 {
							t.Fatalf("lm_head.weight has a gradient in the critic")
						}
					}
					continue
				}
				checkClose(t, "grad "+p.Name, p.Data, get("grad."+p.Name), 1e-4)
				checked++
			}
			if checked < 10 {
				t.Fatalf("only %d decoder gradients compared", checked)
			}

			ac := meta.AdamW
			opt := NewValueAdamW(vm, AdamWConfig{LR: ac.LR, Beta1: ac.Beta1, Beta2: ac.Beta2, Eps: ac.Eps, WeightDecay: ac.WeightDecay, MaxGradNorm: ac.MaxNorm})
			norm, err := opt.Update(vm)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(norm-ac.GradNorm) > 1e-4*ac.GradNorm {
				t.Errorf("grad norm %v, want %v", norm, ac.GradNorm)
			}
			// As in TestGoldenTrainStep: the first Adam step moves a parameter by about
			// lr*sign(grad); gradients within float error of zero are not counted.
			views := map[string][2][]float32{"score.weight": {vm.Head[:C], get("grad.score.weight")},
				"score.bias": {vm.Head[C:], get("grad.score.bias")}}
			for _, p := range vm.Body.Params.Names {
				if p.Name != "lm_head.weight" {
					views[p.Name] = [2][]float32{p.Data, get("grad." + p.Name)}
				}
			}
			for pname, v := range views {
				got, grad, want := v[0], v[1], get("adamw."+pname)
				var gmax float64
				for _, x := range grad {
					gmax = math.Max(gmax, math.Abs(float64(x)))
				}
				bad := 0
				for i := range want {
					if math.Abs(float64(grad[i])) < 1e-4*gmax {
						continue
					}
					if d := math.Abs(float64(got[i]) - float64(want[i])); d > 1e-3*float64(ac.LR) {
						bad++
						if bad <= 3 {
							t.Errorf("%s[%d] after AdamW = %v, want %v", pname, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestValueZeroHead: a fresh critic values every position 0, and its first backward reaches
// the head's weight (not yet the decoder, whose gradient goes through the zero head).
func TestValueZeroHead(t *testing.T) {
	vm := newTinyValue(t, "tiny-qwen2")
	B, T := 2, 5
	va := vm.NewActs(B, T)
	tok := []int32{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	if err := vm.Forward(va, Batch{B: B, T: T, Tokens: tok}); err != nil {
		t.Fatal(err)
	}
	for n, v := range va.Values {
		if v != 0 {
			t.Fatalf("value[%d] = %v, want 0", n, v)
		}
	}
	d := make([]float32, B*T)
	d[3] = 1
	vm.ZeroGrads()
	if err := vm.Backward(va, d); err != nil {
		t.Fatal(err)
	}
	var hw float64
	for _, x := range vm.HeadGrad[:vm.Body.Config.C] {
		hw += math.Abs(float64(x))
	}
	if hw == 0 || vm.HeadGrad[vm.Body.Config.C] != 1 {
		t.Errorf("head gradient: |dw| = %v, db = %v (want > 0 and 1)", hw, vm.HeadGrad[vm.Body.Config.C])
	}
	if err := vm.Backward(va, d[:3]); err == nil || !strings.Contains(err.Error(), "dvalues") {
		t.Errorf("short dvalues: %v", err)
	}
}

// TestValueSaveLoad: Save then Load restores the decoder and the head exactly; a head file
// with the wrong shape is an error naming the file and the tensor.
func TestValueSaveLoad(t *testing.T) {
	vm := newTinyValue(t, "tiny-llama")
	for i := range vm.Head {
		vm.Head[i] = float32(i)*0.01 - 0.2
	}
	vm.Body.Params.Layers[1].WUp[7] = 3.5
	dir := t.TempDir()
	if err := vm.Save(dir); err != nil {
		t.Fatal(err)
	}
	back := newTinyValue(t, "tiny-llama")
	if err := back.Load(dir); err != nil {
		t.Fatal(err)
	}
	for i := range vm.Head {
		if back.Head[i] != vm.Head[i] {
			t.Fatalf("head[%d] = %v, want %v", i, back.Head[i], vm.Head[i])
		}
	}
	for i := range vm.Body.Params.Data {
		if back.Body.Params.Data[i] != vm.Body.Params.Data[i] {
			t.Fatalf("decoder parameter %d = %v, want %v", i, back.Body.Params.Data[i], vm.Body.Params.Data[i])
		}
	}

	C := vm.Body.Config.C
	path := filepath.Join(dir, ValueHeadFile)
	if err := safetensors.Write(path, []safetensors.Tensor{
		{Name: "score.weight", Shape: []int{1, C - 1}, Data: make([]float32, C-1)},
		{Name: "score.bias", Shape: []int{1}, Data: []float32{0}},
	}, safetensors.F32, nil); err != nil {
		t.Fatal(err)
	}
	err := back.Load(dir)
	if err == nil || !strings.Contains(err.Error(), "score.weight") || !strings.Contains(err.Error(), ValueHeadFile) {
		t.Errorf("wrong head shape: %v", err)
	}
	os.Remove(path)
	if err := back.Load(dir); err == nil || !strings.Contains(err.Error(), "value head") {
		t.Errorf("missing head file: %v", err)
	}
}
