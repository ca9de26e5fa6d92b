package model

import (
	"encoding/json"
	"github.com/rlhost/rlhost/gpu/model/modeltest"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/safetensors"
)

// loraGoldenMeta is NAME-lora-golden.json (scripts/goldens/model/make_lora_goldens.py).
type loraGoldenMeta struct {
	Rank     int      `json:"rank"`
	Alpha    float32  `json:"alpha"`
	GradNorm float64  `json:"grad_norm"`
	Adapters []string `json:"adapters"`
}

// goldenLoss returns the batch of NAME-golden.json and the loss gradients
// dlogp, dentropy of make_goldens.py's loss.
func goldenLoss(g *golden) (Batch, []float32, []float32) {
	B, T := g.B, g.T
	N := B * T
	batch := Batch{B: B, T: T, Tokens: flat(g.Tokens), Targets: flat(g.Targets)}
	w := flat(g.Weights)
	dlogp, dent := make([]float32, N), make([]float32, N)
	for n := 0; n < N; n++ {
		dlogp[n] = -w[n]
		if batch.Targets[n] >= 0 {
			dent[n] = -g.EntCoef
		}
	}
	return batch, dlogp, dent
}

func lossOf(a *Acts, dlogp, dent []float32) float64 {
	var loss float64
	for n := range dlogp {
		loss += float64(dlogp[n])*float64(a.Logp[n]) + float64(dent[n])*float64(a.Entropy[n])
	}
	return loss
}

// TestLoRAGolden loads peft's saved adapters onto the tiny checkpoints and
// compares logits, loss, every adapter gradient and one clipped AdamW step
// over the adapters with peft + PyTorch autograd; the base weights must not
// move.
func TestLoRAGolden(t *testing.T) {
	for _, name := range families {
		t.Run(name, func(t *testing.T) {
			m := newTiny(t, name)
			if err := m.LoadLoRA(filepath.Join("testdata", name+"-lora")); err != nil {
				t.Fatal(err)
			}
			g := loadGolden(t, name)
			lg := loadLoRAGolden(t, name)
			var meta loraGoldenMeta
			b, err := os.ReadFile(filepath.Join("testdata", name+"-lora-golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &meta); err != nil {
				t.Fatal(err)
			}
			lo := m.LoRA()
			if lo.Config.Rank != meta.Rank || lo.Config.Alpha != meta.Alpha {
				t.Fatalf("rank/alpha %d/%v, want %d/%v", lo.Config.Rank, lo.Config.Alpha, meta.Rank, meta.Alpha)
			}
			var names []string
			for _, n := range lo.Names {
				names = append(names, n.Name)
			}
			if !slices.Equal(sorted(names), sorted(meta.Adapters)) {
				t.Fatalf("adapters %v, want %v", names, meta.Adapters)
			}

			batch, dlogp, dent := goldenLoss(g)
			a := m.NewActs(batch.B, batch.T)
			if err := m.Forward(a, batch); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "logits", a.Logits, lg.Get(t, "logits"), 1e-4)
			checkClose(t, "logp", a.Logp, lg.Get(t, "logp"), 1e-4)
			checkClose(t, "entropy", a.Entropy, lg.Get(t, "entropy"), 1e-4)
			checkClose(t, "loss", []float32{float32(lossOf(a, dlogp, dent))}, lg.Get(t, "loss"), 1e-4)
			// the adapters change the model: the base logits differ
			if e := maxRelErr(a.Logits, g.Get(t, "logits")); e < 1e-2 {
				t.Errorf("adapted logits within %.2g of the base's: the adapters have no effect", e)
			}

			m.ZeroGrads()
			if err := m.Backward(a, dlogp, dent); err != nil {
				t.Fatal(err)
			}
			if m.Grads != nil {
				t.Error("the frozen base has a gradient buffer")
			}
			for _, n := range lo.Names {
				off := offsetOf(&Params{Data: lo.Data}, n.Data)
				checkClose(t, "grad "+n.Name, lo.Grad[off:off+len(n.Data)], lg.Get(t, "grad."+n.Name), 1e-3)
			}

			base := slices.Clone(m.Params.Data)
			ac := g.AdamW
			opt := NewAdamW(m, AdamWConfig{LR: ac.LR, Beta1: ac.Beta1, Beta2: ac.Beta2, Eps: ac.Eps, WeightDecay: ac.WeightDecay, MaxGradNorm: ac.MaxNorm})
			if ms, _ := opt.Moments(); len(ms) != len(lo.Data) {
				t.Errorf("optimizer moments hold %d values, the adapters %d", len(ms), len(lo.Data))
			}
			norm, err := opt.Update(m)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(norm-meta.GradNorm) > 1e-3*meta.GradNorm {
				t.Errorf("grad norm %v, want %v", norm, meta.GradNorm)
			}
			if !slices.Equal(base, m.Params.Data) {
				t.Error("an AdamW step over the adapters changed the base weights")
			}
			for _, n := range lo.Names {
				// torch steps lr*sign(grad) on the first step; a gradient at float
				// noise level may move either way and is not counted
				want := lg.Get(t, "adamw."+n.Name)
				grad := lg.Get(t, "grad."+n.Name)
				var gmax float64
				for _, x := range grad {
					gmax = math.Max(gmax, math.Abs(float64(x)))
				}
				for i := range want {
					if math.Abs(float64(grad[i])) < 1e-4*gmax {
						continue
					}
					if d := math.Abs(float64(n.Data[i]) - float64(want[i])); d > 1e-3*float64(ac.LR) {
						t.Errorf("%s[%d] after AdamW = %v, want %v", n.Name, i, n.Data[i], want[i])
						break
					}
				}
			}
		})
	}
}

// loadLoRAGolden opens NAME-lora-golden.safetensors.
func loadLoRAGolden(t testing.TB, name string) *golden {
	return modeltest.Tensors(t, filepath.Join("testdata", name+"-lora-golden.safetensors"))
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestLoRAInitIsBase: freshly initialised adapters (B = 0) leave the model
// exactly the base, A follows peft's kaiming-uniform bound, and the seed
// decides A.
func TestLoRAInitIsBase(t *testing.T) {
	m := newTiny(t, "tiny-qwen2")
	g := loadGolden(t, "tiny-qwen2")
	batch, _, _ := goldenLoss(g)
	a := m.NewActs(batch.B, batch.T)
	if err := m.Forward(a, batch); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(a.Logits)
	if err := m.EnableLoRA(LoRAConfig{Rank: 8, Alpha: 16, Targets: []string{"all-linear"}, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(a, batch); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Logits, want) {
		t.Errorf("logits with B = 0 differ from the base's (max rel %.3g)", maxRelErr(a.Logits, want))
	}
	lo := m.LoRA()
	if len(lo.Names) != 2*7*m.Config.L {
		t.Errorf("%d adapter tensors, want %d", len(lo.Names), 2*7*m.Config.L)
	}
	for _, n := range lo.Names {
		isA := strings.Contains(n.Name, "lora_A")
		var mx float64
		for _, x := range n.Data {
			mx = math.Max(mx, math.Abs(float64(x)))
		}
		switch {
		case !isA && mx != 0:
			t.Errorf("%s is not zero", n.Name)
		case isA && (mx == 0 || mx > 1/math.Sqrt(float64(n.Shape[1]))):
			t.Errorf("%s: max |A| = %v, want in (0, 1/sqrt(%d)]", n.Name, mx, n.Shape[1])
		}
	}
	m2 := newTiny(t, "tiny-qwen2")
	if err := m2.EnableLoRA(LoRAConfig{Rank: 8, Alpha: 16, Targets: []string{"all-linear"}, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m2.LoRA().Data, lo.Data) {
		t.Error("the same seed gave different adapters")
	}
	m3 := newTiny(t, "tiny-qwen2")
	if err := m3.EnableLoRA(LoRAConfig{Rank: 8, Alpha: 16, Targets: []string{"all-linear"}, Seed: 8}); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(m3.LoRA().Data, lo.Data) {
		t.Error("different seeds gave the same adapters")
	}
}

// randomLoRA enables adapters on name with random A and B.
func randomLoRA(t *testing.T, name string, cfg LoRAConfig) *Model {
	t.Helper()
	m := newTiny(t, name)
	if err := m.EnableLoRA(cfg); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range m.LoRA().Data {
		m.LoRA().Data[i] = float32(rng.NormFloat64() * 0.1)
	}
	return m
}

// TestLoRAFiniteDifference checks the adapters' gradient against central
// differences of the loss along random directions (float64 loss sums of a
// float32 model: the tolerance is loose, a wrong gradient is off by O(1)).
func TestLoRAFiniteDifference(t *testing.T) {
	for _, name := range families {
		t.Run(name, func(t *testing.T) {
			m := randomLoRA(t, name, LoRAConfig{Rank: 2, Alpha: 3, Targets: []string{"all-linear"}})
			g := loadGolden(t, name)
			batch, dlogp, dent := goldenLoss(g)
			a := m.NewActs(batch.B, batch.T)
			loss := func() float64 {
				if err := m.Forward(a, batch); err != nil {
					t.Fatal(err)
				}
				return lossOf(a, dlogp, dent)
			}
			loss()
			m.ZeroGrads()
			if err := m.Backward(a, dlogp, dent); err != nil {
				t.Fatal(err)
			}
			lo := m.LoRA()
			grad := slices.Clone(lo.Grad)
			theta := slices.Clone(lo.Data)
			rng := rand.New(rand.NewPCG(3, 4))
			// one direction over everything, then one per adapter tensor
			dirs := [][2]int{{0, len(theta)}}
			for _, n := range lo.Names {
				off := offsetOf(&Params{Data: lo.Data}, n.Data)
				dirs = append(dirs, [2]int{off, off + len(n.Data)})
			}
			const eps = 3e-3 // truncation error ~eps^2 (1e-2 gives ~5%), float32 noise ~1e-5/eps
			for k, rg := range dirs {
				d := make([]float64, len(theta))
				var want float64
				for i := rg[0]; i < rg[1]; i++ {
					d[i] = rng.NormFloat64()
					want += d[i] * float64(grad[i])
				}
				set := func(s float64) {
					for i := range theta {
						lo.Data[i] = float32(float64(theta[i]) + s*d[i])
					}
				}
				set(eps)
				lp := loss()
				set(-eps)
				lm := loss()
				set(0)
				got := (lp - lm) / (2 * eps)
				e := math.Abs(got - want)
				if testing.Verbose() {
					t.Logf("direction %d: derivative %.6g, finite difference %.6g", k, want, got)
				}
				if e > 1e-2*math.Abs(want)+2e-3 {
					what := "all adapters"
					if k > 0 {
						what = lo.Names[k-1].Name
					}
					t.Errorf("%s: directional derivative %v, finite difference %v (|diff| %.3g)", what, want, got, e)
				}
			}
		})
	}
}

// TestLoRAMerge: the merged checkpoint computes what the adapted model
// computes, and generation with adapters (an extra low-rank product per
// layer) gives the merged model's greedy tokens.
func TestLoRAMerge(t *testing.T) {
	for _, name := range families {
		t.Run(name, func(t *testing.T) {
			m := randomLoRA(t, name, LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q_proj", "k_proj", "o_proj", "up_proj", "down_proj"}})
			base := slices.Clone(m.Params.Data)
			merged, err := New(cpu.New(), m.MergedCheckpoint())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(base, m.Params.Data) {
				t.Error("merging changed the model's base weights")
			}
			if slices.Equal(merged.Params.Data, base) {
				t.Error("the merged weights equal the base")
			}
			g := loadGolden(t, name)
			batch, _, _ := goldenLoss(g)
			a, b := m.NewActs(batch.B, batch.T), merged.NewActs(batch.B, batch.T)
			if err := m.Forward(a, batch); err != nil {
				t.Fatal(err)
			}
			if err := merged.Forward(b, batch); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "merged logits", b.Logits, a.Logits, 1e-5)

			var reqs []Request
			for _, gen := range g.Generate {
				reqs = append(reqs, Request{Prompt: gen.Prompt, Sample: SampleConfig{MaxTokens: 16, IgnoreEOS: true}})
			}
			gen := func(m *Model) []Result {
				gg, err := m.NewGenerator(2, 64)
				if err != nil {
					t.Fatal(err)
				}
				res, err := gg.Generate(reqs)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			ra, rb := gen(m), gen(merged)
			for i := range ra {
				if !slices.Equal(ra[i].Tokens, rb[i].Tokens) {
					t.Errorf("request %d: adapted %v, merged %v", i, ra[i].Tokens, rb[i].Tokens)
				}
				checkClose(t, "generation logprobs", ra[i].Logprobs, rb[i].Logprobs, 1e-4)
			}
			// and generation follows the training forward's log-probs
			if !slices.Equal(ra[0].Tokens, gen(m)[0].Tokens) {
				t.Error("generation is not deterministic")
			}
		})
	}
}

// TestLoRASaveLoad: SaveLoRA writes peft's layout and LoadLoRA reads it back
// exactly.
func TestLoRASaveLoad(t *testing.T) {
	m := randomLoRA(t, "tiny-llama", LoRAConfig{Rank: 3, Alpha: 6, Targets: []string{"v_proj", "gate_proj"}})
	dir := t.TempDir()
	if err := m.SaveLoRA(dir, "tiny-llama"); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(dir, AdapterModelFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ti, ok := f.Tensor("base_model.model.model.layers.1.mlp.gate_proj.lora_A.weight"); !ok || !slices.Equal(ti.Shape, []int{3, 48}) {
		t.Errorf("peft name missing or misshapen: %v", ti)
	}
	m2 := newTiny(t, "tiny-llama")
	if err := m2.LoadLoRA(dir); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m2.LoRA().Data, m.LoRA().Data) || m2.LoRA().Scale != 2 {
		t.Error("adapters differ after a save and load")
	}
	if got := m2.LoRA().Config.Targets; !slices.Equal(got, []string{"v_proj", "gate_proj"}) {
		t.Errorf("targets %v", got)
	}
}

// TestLoRAAdaptersOff: with the adapters off the adapted model computes the
// base (the reference policy), and turning them back on restores it.
func TestLoRAAdaptersOff(t *testing.T) {
	m := newTiny(t, "tiny-llama")
	if err := m.LoadLoRA(filepath.Join("testdata", "tiny-llama-lora")); err != nil {
		t.Fatal(err)
	}
	g := loadGolden(t, "tiny-llama")
	batch, _, _ := goldenLoss(g)
	a := m.NewActs(batch.B, batch.T)
	m.SetAdaptersActive(false)
	if err := m.Forward(a, batch); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "base logits with the adapters off", a.Logits, g.Get(t, "logits"), 1e-4)
	m.SetAdaptersActive(true)
	if err := m.Forward(a, batch); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "adapted logits", a.Logits, loadLoRAGolden(t, "tiny-llama").Get(t, "logits"), 1e-4)
}

// TestLoRAResumeLoad: LoadLoRA on a model with the same adapters enabled
// replaces their values in place (an optimizer over Trainable stays valid);
// a different shape is refused and changes nothing.
func TestLoRAResumeLoad(t *testing.T) {
	src := randomLoRA(t, "tiny-llama", LoRAConfig{Rank: 3, Alpha: 6, Targets: []string{"v_proj", "gate_proj"}})
	dir := t.TempDir()
	if err := src.SaveLoRA(dir, ""); err != nil {
		t.Fatal(err)
	}
	m := newTiny(t, "tiny-llama")
	if err := m.EnableLoRA(LoRAConfig{Rank: 3, Alpha: 6, Targets: []string{"gate_proj", "v_proj"}, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	params, _ := m.Trainable()
	if err := m.LoadLoRA(dir); err != nil {
		t.Fatal(err)
	}
	if p2, _ := m.Trainable(); &p2[0] != &params[0] || !slices.Equal(p2, src.LoRA().Data) {
		t.Error("resume did not load the adapters in place")
	}
	other := newTiny(t, "tiny-llama")
	if err := other.EnableLoRA(LoRAConfig{Rank: 2, Alpha: 6, Targets: []string{"v_proj", "gate_proj"}, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	before := slices.Clone(other.LoRA().Data)
	if err := other.LoadLoRA(dir); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Errorf("rank mismatch: error %v", err)
	}
	if !slices.Equal(before, other.LoRA().Data) {
		t.Error("a refused load changed the adapters")
	}
}

// TestLoRABadInput: bad configs and adapter files are errors naming the file
// and the key or tensor.
func TestLoRABadInput(t *testing.T) {
	m := newTiny(t, "tiny-llama")
	for _, cfg := range []struct {
		c      LoRAConfig
		substr string
	}{
		{LoRAConfig{Rank: 0, Alpha: 1, Targets: []string{"all-linear"}}, "rank 0"},
		{LoRAConfig{Rank: 2, Alpha: 0, Targets: []string{"all-linear"}}, "alpha 0"},
		{LoRAConfig{Rank: 2, Alpha: 1}, "needs target modules"},
		{LoRAConfig{Rank: 2, Alpha: 1, Targets: []string{"lm_head"}}, `unknown LoRA target module "lm_head"`},
	} {
		if err := m.EnableLoRA(cfg.c); err == nil || !strings.Contains(err.Error(), cfg.substr) {
			t.Errorf("%+v: error %v, want one containing %q", cfg.c, err, cfg.substr)
		}
	}
	if m.LoRA() != nil {
		t.Fatal("a failed EnableLoRA left adapters")
	}

	src := filepath.Join("testdata", "tiny-llama-lora")
	cfgJSON, err := os.ReadFile(filepath.Join(src, AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(map[string]any)) []byte {
		var c map[string]any
		if err := json.Unmarshal(cfgJSON, &c); err != nil {
			t.Fatal(err)
		}
		f(c)
		b, _ := json.Marshal(c)
		return b
	}
	good := randomLoRA(t, "tiny-llama", LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}})
	tensors, _, err := good.LoRACheckpoint("")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		config  []byte
		tensors []safetensors.Tensor
		substr  string
	}{
		{"not json", []byte("{"), tensors, "adapter_config.json"},
		{"dora", edit(func(c map[string]any) { c["use_dora"] = true }), tensors, "use_dora"},
		{"peft type", edit(func(c map[string]any) { c["peft_type"] = "IA3" }), tensors, `peft_type "IA3"`},
		{"rank", edit(func(c map[string]any) { c["r"] = 0 }), tensors, "r = 0"},
		{"module", edit(func(c map[string]any) { c["target_modules"] = []string{"model.layers.0.foo"} }), tensors, `"model.layers.0.foo"`},
		{"target type", edit(func(c map[string]any) { c["target_modules"] = 3 }), tensors, "target_modules"},
		{"wrong rank", edit(func(c map[string]any) { c["r"] = 5 }), tensors, "has shape [4 48], want [5 48]"},
		{"missing tensor", cfgJSON, tensors[1:], "adapter tensor " + tensors[0].Name + " is missing"},
		{"extra tensor", edit(func(c map[string]any) { c["target_modules"] = []string{"q_proj"} }), tensors, "unexpected tensors"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), tt.config, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := safetensors.Write(filepath.Join(dir, AdapterModelFile), tt.tensors, safetensors.F32, nil); err != nil {
			t.Fatal(err)
		}
		m := newTiny(t, "tiny-llama")
		err := m.LoadLoRA(dir)
		if err == nil || !strings.Contains(err.Error(), tt.substr) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.substr)
		} else if m.LoRA() != nil {
			t.Errorf("%s: a failed load left adapters", tt.name)
		}
	}
	if err := newTiny(t, "tiny-llama").LoadLoRA(t.TempDir()); err == nil || !strings.Contains(err.Error(), AdapterConfigFile) {
		t.Errorf("empty dir: error %v", err)
	}
}

// FuzzAdapterConfig: any bytes give a config or an error, never a panic, and
// an accepted config enables adapters or is refused with an error.
func FuzzAdapterConfig(f *testing.F) {
	for _, name := range families {
		b, err := os.ReadFile(filepath.Join("testdata", name+"-lora", AdapterConfigFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":"all-linear"}`))
	f.Add([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":[""]}`))
	f.Add([]byte(`{"peft_type":"LORA","r":-1,"lora_alpha":4,"target_modules":["."]}`))
	f.Add([]byte(`null`))
	ck := loadCheckpoint(f, filepath.Join("testdata", "tiny-llama"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseAdapterConfig("adapter_config.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "model: adapter_config.json") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		if cfg.Rank > 64 {
			return // a valid but large allocation
		}
		m, err := New(cpu.New(), ck)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.EnableLoRA(cfg); err != nil {
			t.Errorf("accepted config %+v refused: %v", cfg, err)
		}
	})
}
