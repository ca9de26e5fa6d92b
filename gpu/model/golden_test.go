package model

import (
	"fmt"
	"github.com/rlhost/rlhost/gpu/model/modeltest"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/weights"
)

func TestMain(m *testing.M) {
	if err := cpu.EnsureCoreType(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if err := cpu.SelfCheck(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// families are the Llama-2 and Qwen2 checkpoints of make_goldens.py, which the LoRA,
// value and reward goldens also cover.
var families = []string{"tiny-llama", "tiny-qwen2"}

// newFamilies are make_family_goldens.py's checkpoints of the other families: Qwen3 (tied,
// head_dim != hidden/heads; and with yarn RoPE, one key/value head), Llama 3 (llama3 RoPE),
// Mistral (a sliding window shorter than the prompts), Gemma 3 (sliding and global layers,
// query_pre_attn_scalar; and with linear RoPE scaling and final logit soft-capping).
var newFamilies = []string{"tiny-qwen3", "tiny-qwen3-yarn", "tiny-llama3", "tiny-mistral", "tiny-gemma3", "tiny-gemma3-capped"}

// allFamilies are every tiny checkpoint with the base goldens (logits, gradients, AdamW,
// greedy generations).
var allFamilies = append(append([]string{}, families...), newFamilies...)

// loadCheckpoint reads a save_pretrained directory (config.json + safetensors).
func loadCheckpoint(t testing.TB, dir string) *weights.Checkpoint {
	t.Helper()
	ck, err := weights.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// golden is a checkpoint's goldens in testdata.
type golden = modeltest.Golden

func loadGolden(t testing.TB, name string) *golden { return modeltest.Load(t, "testdata", name) }

// maxRelErr and checkClose: modeltest's.
var maxRelErr = modeltest.MaxRelErr

func checkClose(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	modeltest.CheckClose(t, what, got, want, tol)
}

func flat[T any](x [][]T) []T {
	var out []T
	for _, r := range x {
		out = append(out, r...)
	}
	return out
}

func newTiny(t testing.TB, name string) *Model {
	t.Helper()
	m, err := New(cpu.New(), loadCheckpoint(t, filepath.Join("testdata", name)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGoldenTrainStep compares logits, log-probs, entropy, loss, every
// parameter gradient and the parameters after one clipped AdamW step with
// transformers + PyTorch autograd (scripts/goldens/model/make_goldens.py).
func TestGoldenTrainStep(t *testing.T) {
	for _, name := range allFamilies {
		t.Run(name, func(t *testing.T) {
			m := newTiny(t, name)
			g := loadGolden(t, name)
			B, T := g.B, g.T
			N := B * T
			a := m.NewActs(B, T)
			batch := Batch{B: B, T: T, Tokens: flat(g.Tokens), Targets: flat(g.Targets)}
			if err := m.Forward(a, batch); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "logits", a.Logits, g.Get(t, "logits"), 1e-4)
			checkClose(t, "logp", a.Logp, g.Get(t, "logp"), 1e-4)
			checkClose(t, "entropy", a.Entropy, g.Get(t, "entropy"), 1e-4)

			w := flat(g.Weights)
			dlogp, dent := make([]float32, N), make([]float32, N)
			var loss float64
			for n := 0; n < N; n++ {
				dlogp[n] = -w[n]
				if batch.Targets[n] >= 0 {
					dent[n] = -g.EntCoef
				}
				loss += float64(dlogp[n])*float64(a.Logp[n]) + float64(dent[n])*float64(a.Entropy[n])
			}
			checkClose(t, "loss", []float32{float32(loss)}, g.Get(t, "loss"), 1e-4)

			m.ZeroGrads()
			if err := m.Backward(a, dlogp, dent); err != nil {
				t.Fatal(err)
			}
			for _, p := range m.Grads.Names {
				checkClose(t, "grad "+p.Name, p.Data, g.Get(t, "grad."+p.Name), 1e-3)
			}

			before := append([]float32(nil), m.Params.Data...)
			ac := g.AdamW
			opt := NewAdamW(m, AdamWConfig{LR: ac.LR, Beta1: ac.Beta1, Beta2: ac.Beta2, Eps: ac.Eps, WeightDecay: ac.WeightDecay, MaxGradNorm: ac.MaxNorm})
			norm, err := opt.Update(m)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(norm-ac.GradNorm) > 1e-3*ac.GradNorm {
				t.Errorf("grad norm %v, want %v", norm, ac.GradNorm)
			}
			// The first Adam step moves each parameter by about lr*sign(grad),
			// so compare the moves; a gradient within float error of zero may
			// legitimately move either way and is not counted.
			for _, p := range m.Params.Names {
				want := g.Get(t, "adamw."+p.Name)
				grad := g.Get(t, "grad."+p.Name)
				off := offsetOf(m.Params, p.Data)
				var gmax float64
				for _, x := range grad {
					gmax = math.Max(gmax, math.Abs(float64(x)))
				}
				bad := 0
				for i := range want {
					if math.Abs(float64(grad[i])) < 1e-4*gmax {
						continue
					}
					if d := math.Abs(float64(p.Data[i]) - float64(want[i])); d > 1e-3*float64(ac.LR) {
						bad++
						if bad <= 3 {
							t.Errorf("%s[%d] after AdamW = %v, want %v (was %v, grad %v)", p.Name, i, p.Data[i], want[i], before[off+i], grad[i])
						}
					}
				}
			}
		})
	}
}

// offsetOf is the index of view's first element in p.Data.
func offsetOf(p *Params, view []float32) int {
	for i := range p.Data {
		if &p.Data[i] == &view[0] {
			return i
		}
	}
	return -1
}

// TestGradAccumulation: the gradients of a batch equal the sum of the
// gradients of its micro-batches (Backward accumulates), which is how a large
// RL step is run in bounded memory.
func TestGradAccumulation(t *testing.T) {
	m := newTiny(t, "tiny-qwen2")
	g := loadGolden(t, "tiny-qwen2")
	B, T := g.B, g.T
	w := flat(g.Weights)
	run := func(rows []int) {
		n := len(rows) * T
		batch := Batch{B: len(rows), T: T}
		dlogp, dent := make([]float32, n), make([]float32, n)
		for i, b := range rows {
			batch.Tokens = append(batch.Tokens, g.Tokens[b]...)
			batch.Targets = append(batch.Targets, g.Targets[b]...)
			for t := 0; t < T; t++ {
				dlogp[i*T+t] = -w[b*T+t]
				if g.Targets[b][t] >= 0 {
					dent[i*T+t] = -g.EntCoef
				}
			}
		}
		a := m.NewActs(len(rows), T)
		if err := m.Forward(a, batch); err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(a, dlogp, dent); err != nil {
			t.Fatal(err)
		}
	}
	m.ZeroGrads()
	run([]int{0, 1})
	run([]int{2})
	for _, p := range m.Grads.Names {
		checkClose(t, "accumulated grad "+p.Name, p.Data, g.Get(t, "grad."+p.Name), 1e-4)
	}
	_ = B
}

// TestBadCheckpoints: missing, misshapen and unexpected tensors and
// unsupported configs are errors naming the tensor or key.
func TestBadCheckpoints(t *testing.T) {
	base := loadCheckpoint(t, filepath.Join("testdata", "tiny-qwen2"))
	clone := func() *weights.Checkpoint {
		ck := &weights.Checkpoint{Config: base.Config, Source: base.Source, Tensors: map[string]*weights.Tensor{}}
		for k, v := range base.Tensors {
			ck.Tensors[k] = v
		}
		return ck
	}
	tests := []struct {
		name   string
		edit   func(ck *weights.Checkpoint)
		substr string
	}{
		{"missing tensor", func(ck *weights.Checkpoint) { delete(ck.Tensors, "model.layers.1.mlp.up_proj.weight") }, "model.layers.1.mlp.up_proj.weight is missing"},
		{"wrong shape", func(ck *weights.Checkpoint) {
			ck.Tensors["model.norm.weight"] = &weights.Tensor{Shape: []int{47}, Data: make([]float32, 47)}
		}, "model.norm.weight has shape [47], want [48]"},
		{"short data", func(ck *weights.Checkpoint) {
			ck.Tensors["model.norm.weight"] = &weights.Tensor{Shape: []int{48}, Data: make([]float32, 3)}
		}, "model.norm.weight has 3 values"},
		{"extra tensor", func(ck *weights.Checkpoint) {
			ck.Tensors["model.layers.9.foo"] = &weights.Tensor{Shape: []int{1}, Data: []float32{1}}
		}, "unexpected tensors [model.layers.9.foo]"},
		{"architecture", func(ck *weights.Checkpoint) {
			ck.Config.ModelType, ck.Config.Architectures = "gpt2", []string{"GPT2LMHeadModel"}
		}, "unsupported architecture"},
		{"heads", func(ck *weights.Checkpoint) { ck.Config.NumKeyValueHeads = 3 }, "not a multiple"},
		{"activation", func(ck *weights.Checkpoint) { ck.Config.HiddenAct = "gelu" }, "hidden_act"},
		{"rope theta", func(ck *weights.Checkpoint) { ck.Config.RopeTheta = 0 }, "rope_theta"},
		{"zero layers", func(ck *weights.Checkpoint) { ck.Config.NumHiddenLayers = 0 }, "num_hidden_layers"},
	}
	for _, tt := range tests {
		ck := clone()
		tt.edit(ck)
		_, err := New(cpu.New(), ck)
		if err == nil || !strings.Contains(err.Error(), tt.substr) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.substr)
		}
	}
	// bad batches
	m := newTiny(t, "tiny-qwen2")
	a := m.NewActs(1, 2)
	for _, b := range []Batch{
		{B: 1, T: 2, Tokens: []int32{1, 200}, Targets: []int32{-1, -1}},
		{B: 1, T: 2, Tokens: []int32{1, 2}, Targets: []int32{-2, -1}},
		{B: 1, T: 2, Tokens: []int32{1}, Targets: []int32{-1}},
		{B: 3, T: 1, Tokens: []int32{1, 2, 3}, Targets: []int32{-1, -1, -1}}, // more rows than the activations hold
		{B: 1, T: 3, Tokens: []int32{1, 2, 3}, Targets: []int32{-1, -1, -1}},
	} {
		if err := m.Forward(a, b); err == nil {
			t.Errorf("batch %+v: no error", b)
		}
	}
}
