package model

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/weights"
)

// TestFamilyConfigs: each family's options, derived from the config.json transformers
// wrote (make_family_goldens.py), are what its modeling code computes with.
func TestFamilyConfigs(t *testing.T) {
	sqrt := func(x float64) float32 { return float32(math.Sqrt(x)) }
	tests := []struct {
		name string
		want func(c Config) []string // what differs from the expectation
	}{
		{"tiny-qwen3", func(c Config) (bad []string) {
			if c.Family != "qwen3" || !c.QKNorm || c.HD != 16 || c.C/c.NH == c.HD || !c.Tied || c.Windows != nil || c.Sandwich {
				bad = append(bad, "qwen3: QK-norm, head_dim 16 != 48/4, tied, no windows")
			}
			return bad
		}},
		{"tiny-qwen3-yarn", func(c Config) (bad []string) {
			if c.RopeScaling == nil || c.RopeScaling.Type != "yarn" || c.RopeScaling.Factor != 4 || c.NKV != 1 || c.Tied {
				bad = append(bad, "yarn scaling, factor 4, one key/value head, untied")
			}
			return bad
		}},
		{"tiny-llama3", func(c Config) (bad []string) {
			if s := c.RopeScaling; s == nil || s.Type != "llama3" || s.Factor != 8 || s.LowFreqFactor != 1 || s.HighFreqFactor != 4 ||
				s.OriginalMaxPositionEmbeddings != 32 || c.RopeTheta != 500000 || c.QKNorm {
				bad = append(bad, "llama3 scaling 8/1/4/32, theta 500000")
			}
			return bad
		}},
		{"tiny-mistral", func(c Config) (bad []string) {
			if !slices.Equal(c.Windows, []int{4, 4}) || c.HD != 8 || c.LocalRopeTheta != 0 {
				bad = append(bad, "windows [4 4] on every layer, head_dim 8")
			}
			return bad
		}},
		{"tiny-gemma3", func(c Config) (bad []string) {
			if !slices.Equal(c.Windows, []int{4, 0, 4}) || c.LocalRopeTheta != 10000 || c.RopeTheta != 1e6 || c.NormOffset != 1 ||
				!c.Sandwich || !c.QKNorm || c.Act != GELUTanh || c.EmbedScale != sqrt(48) || c.QScale != sqrt(16.0/24) || !c.Tied ||
				c.FinalSoftcap != 0 {
				bad = append(bad, "gemma3: windows [4 0 4], local base 1e4, global 1e6, (1+w) norms, sandwich, QK-norm, GeGLU, sqrt(48) embedding, query scale sqrt(16/24)")
			}
			return bad
		}},
		{"tiny-gemma3-capped", func(c Config) (bad []string) {
			if c.FinalSoftcap != 4 || c.RopeScaling == nil || c.RopeScaling.Type != "linear" || c.RopeScaling.Factor != 2 ||
				!slices.Equal(c.Windows, []int{5, 0}) || c.Tied || c.QScale != 1 {
				bad = append(bad, "soft-cap 4, linear RoPE x2 on the global layer, windows [5 0], untied, query scale 1")
			}
			return bad
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTiny(t, tt.name)
			if bad := tt.want(m.Config); len(bad) > 0 {
				t.Errorf("%+v\nwant %v", m.Config, bad)
			}
			if !strings.HasPrefix(m.Config.Describe(), m.Config.Family+":") {
				t.Errorf("Describe() = %q, want it to name the family first", m.Config.Describe())
			}
		})
	}
}

// TestRollingCache: a sliding-window model's generator keeps window+chunk-1 rows a slot for
// those layers (memory in the window, not the length), prefills a prompt longer than the
// chunk over several steps, and still generates transformers' tokens; a cache one row
// short (a planted off-by-one of the rolling window) does not.
func TestRollingCache(t *testing.T) {
	const maxT = 64
	for _, name := range []string{"tiny-mistral", "tiny-gemma3"} {
		t.Run(name, func(t *testing.T) {
			m := newTiny(t, name)
			g := loadGolden(t, name)
			c := m.Config
			KD := c.NKV * c.HD
			run := func(plant bool) ([]Result, *Generator) {
				gen, err := m.NewGenerator(2, maxT)
				if err != nil {
					t.Fatal(err)
				}
				for l := 0; l < c.L; l++ {
					w := c.Window(l)
					want := maxT
					if w > 0 {
						want = w + gen.chunk - 1
					}
					if gen.rows[l] != want || len(gen.kc[l]) != 2*want*KD {
						t.Fatalf("layer %d (window %d): %d rows a slot, %d floats of keys; want %d rows", l, w, gen.rows[l], len(gen.kc[l]), want)
					}
					if plant && w > 0 {
						gen.rows[l]-- // the rolling window one position short
					}
				}
				var reqs []Request
				for _, want := range g.Generate {
					reqs = append(reqs, Request{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: len(want.Tokens), IgnoreEOS: true}})
				}
				res, err := gen.Generate(reqs)
				if err != nil {
					t.Fatal(err)
				}
				return res, gen
			}
			res, gen := run(false)
			if gen.chunk != slices.Min(slices.DeleteFunc(slices.Clone(c.Windows), func(w int) bool { return w == 0 })) {
				t.Errorf("chunk %d, want the shortest window of %v", gen.chunk, c.Windows)
			}
			if longest := len(g.Generate[0].Prompt); longest <= gen.chunk {
				t.Fatalf("the longest prompt (%d tokens) fits one chunk of %d: chunked prefill is not exercised", longest, gen.chunk)
			}
			for i, want := range g.Generate {
				if !slices.Equal(res[i].Tokens, want.Tokens) {
					t.Fatalf("request %d: tokens\n got %v\nwant %v", i, res[i].Tokens, want.Tokens)
				}
			}
			// every position of the longest prompt: its first n tokens, one token generated,
			// whose log-prob is the golden forward's at position n-1; prefills of n > chunk
			// run in chunks, the sampled position at each place of its chunk
			logits := g.Get(t, "logits")
			toks := g.Tokens[0]
			checkPrefixes := func(plant bool) (bad int) {
				gen, err := m.NewGenerator(len(toks), maxT)
				if err != nil {
					t.Fatal(err)
				}
				gen.NoPrefixSharing = true
				if plant {
					for l := range gen.rows {
						if c.Window(l) > 0 {
							gen.rows[l]--
						}
					}
				}
				var reqs []Request
				for n := 1; n <= len(toks); n++ {
					reqs = append(reqs, Request{Prompt: toks[:n], Sample: SampleConfig{MaxTokens: 1, IgnoreEOS: true}})
				}
				res, err := gen.Generate(reqs)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					row := logits[i*c.V : (i+1)*c.V] // position i of sequence 0
					mx := slices.Max(row)
					var sum float64
					for _, x := range row {
						sum += math.Exp(float64(x - mx))
					}
					want := float64(row[r.Tokens[0]]-mx) - math.Log(sum)
					if d := math.Abs(float64(r.Logprobs[0]) - want); d > 1e-4 {
						if !plant {
							t.Errorf("prompt of %d tokens: log-prob %v, want %v", i+1, r.Logprobs[0], want)
						}
						bad++
					}
				}
				return bad
			}
			checkPrefixes(false)
			planted, _ := run(true)
			same := true
			for i, want := range g.Generate {
				same = same && slices.Equal(planted[i].Tokens, want.Tokens)
			}
			bad := checkPrefixes(true)
			t.Logf("planted: %d of %d prompts' log-probs off, generations equal %v", bad, len(toks), same)
			if same && bad == 0 {
				t.Error("a rolling cache one row short gives transformers' tokens and log-probs: the test cannot see the window")
			}
		})
	}
}

// TestRollingCachePrefixSharing: prompts that share a prefix with a slot's rolling cache
// copy it only while the window before the prefix is still in its rows; with sharing on or
// off every request gets the same tokens and log-probs (GRPO's n samples of a long prompt,
// and a next turn that extends a finished conversation).
func TestRollingCachePrefixSharing(t *testing.T) {
	m := newTiny(t, "tiny-mistral")
	g := loadGolden(t, "tiny-mistral")
	long := append(slices.Clone(g.Generate[0].Prompt), g.Generate[1].Prompt...) // 15 tokens: 4 chunks
	var first []Request
	for k := 0; k < 3; k++ { // n = 3 samples of one prompt
		first = append(first, Request{Prompt: long, Sample: SampleConfig{MaxTokens: 6, Temperature: 0.8, Seed: uint64(k + 1), IgnoreEOS: true}})
	}
	run := func(share bool) (res [][]Result, shared int) {
		gen, err := m.NewGenerator(3, 48)
		if err != nil {
			t.Fatal(err)
		}
		gen.NoPrefixSharing = !share
		r1, err := gen.Generate(first)
		if err != nil {
			t.Fatal(err)
		}
		// the next turns: each conversation extended by its answer and a short reply, and one
		// that goes back to the start of the prompt (too far behind the window to share)
		var next []Request
		for k, r := range r1 {
			p := append(append(slices.Clone(long), r.Tokens...), 5, 7)
			next = append(next, Request{Prompt: p, Sample: SampleConfig{MaxTokens: 5, Temperature: 0.8, Seed: uint64(10 + k), IgnoreEOS: true}})
		}
		next = append(next, Request{Prompt: append(slices.Clone(long[:6]), 9), Sample: SampleConfig{MaxTokens: 5, IgnoreEOS: true}})
		r2, err := gen.Generate(next)
		if err != nil {
			t.Fatal(err)
		}
		return [][]Result{r1, r2}, gen.SharedTokens
	}
	on, shared := run(true)
	off, none := run(false)
	if shared == 0 || none != 0 {
		t.Errorf("shared tokens %d with sharing, %d without; want some and none", shared, none)
	}
	// the same tokens, and log-probs to rounding: the rows prefilled after a copied prefix
	// run in forwards of other sizes, which the products of CPUs without AVX-512 (OpenBLAS)
	// round differently
	for k := range on {
		for i := range on[k] {
			if !slices.Equal(on[k][i].Tokens, off[k][i].Tokens) || !slices.EqualFunc(on[k][i].Logprobs, off[k][i].Logprobs,
				func(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-5 }) {
				t.Errorf("call %d request %d: %v %v shared, %v %v alone", k, i, on[k][i].Tokens, on[k][i].Logprobs, off[k][i].Tokens, off[k][i].Logprobs)
			}
		}
	}
}

// TestFamiliesSaveLoad: a model's checkpoint of every family saves (weights.Save) to a
// config.json and safetensors that load back to the same config and tensors, and the saved
// config.json carries what transformers needs to build the same model (the family's keys).
func TestFamiliesSaveLoad(t *testing.T) {
	for _, name := range newFamilies {
		t.Run(name, func(t *testing.T) {
			m := newTiny(t, name)
			dir := filepath.Join(t.TempDir(), name)
			if err := weights.Save(dir, m.Params.Checkpoint(m.HF)); err != nil {
				t.Fatal(err)
			}
			back, err := New(cpu.New(), loadCheckpoint(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			c1, c2 := m.Config, back.Config
			if c1.Describe() != c2.Describe() || !slices.Equal(c1.Windows, c2.Windows) || c1.QScale != c2.QScale ||
				c1.LocalRopeTheta != c2.LocalRopeTheta || c1.FinalSoftcap != c2.FinalSoftcap || c1.Tied != c2.Tied ||
				(c1.RopeScaling == nil) != (c2.RopeScaling == nil) || (c1.RopeScaling != nil && *c1.RopeScaling != *c2.RopeScaling) {
				t.Errorf("config after the round trip\n%+v\nwant\n%+v", c2, c1)
			}
			if !slices.Equal(back.Params.Host(), m.Params.Host()) {
				t.Error("parameters differ after the round trip")
			}
			b, err := os.ReadFile(filepath.Join(dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range map[string][]string{
				"tiny-mistral":       {`"sliding_window": 4`, `"model_type": "mistral"`},
				"tiny-gemma3":        {`"sliding_attention"`, `"query_pre_attn_scalar": 24`, `"Gemma3ForCausalLM"`, `"rope_theta": 10000`},
				"tiny-gemma3-capped": {`"final_logit_softcapping": 4.0`, `"rope_type": "linear"`},
				"tiny-llama3":        {`"rope_type": "llama3"`, `"low_freq_factor": 1`},
				"tiny-qwen3-yarn":    {`"rope_type": "yarn"`, `"Qwen3ForCausalLM"`},
			}[name] {
				if !strings.Contains(string(b), key) {
					t.Errorf("config.json lacks %s:\n%s", key, b)
				}
			}
		})
	}
}

// TestSavedLoadsInTransformers: a checkpoint rlhost writes after a training step loads in
// transformers unchanged (every weight used, none missing; scripts/goldens/model/load_saved.py)
// and computes the logits rlhost computes with the trained weights, to 1e-4, for every family.
// It needs torch and transformers: RLHOST_TORCH_PYTHON names their Python (make
// test-save-transformers sets it to the reference virtualenv of setup-trl); without it the test
// is skipped.
func TestSavedLoadsInTransformers(t *testing.T) {
	py := os.Getenv("RLHOST_TORCH_PYTHON")
	if py == "" {
		t.Skip("RLHOST_TORCH_PYTHON is not set (make test-save-transformers sets it)")
	}
	script, err := filepath.Abs("../../scripts/goldens/model/load_saved.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range allFamilies {
		t.Run(name, func(t *testing.T) {
			m := newTiny(t, name)
			g := loadGolden(t, name)
			B, T := g.B, g.T
			batch := Batch{B: B, T: T, Tokens: flat(g.Tokens), Targets: flat(g.Targets)}
			// One clipped AdamW step, so that the weights saved are not the ones transformers wrote.
			a := m.NewActs(B, T)
			if err := m.Forward(a, batch); err != nil {
				t.Fatal(err)
			}
			dlogp := make([]float32, B*T)
			for n := range dlogp {
				if batch.Targets[n] >= 0 {
					dlogp[n] = -1
				}
			}
			m.ZeroGrads()
			if err := m.Backward(a, dlogp, make([]float32, B*T)); err != nil {
				t.Fatal(err)
			}
			if _, err := NewAdamW(m, AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MaxGradNorm: 1}).Update(m); err != nil {
				t.Fatal(err)
			}
			if err := m.Forward(a, batch); err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(a.Logits, g.Get(t, "logits")); d < 1e-3 {
				t.Fatalf("the step moved the logits by %g only: the comparison would not tell the saved weights from the originals", d)
			}

			dir := t.TempDir()
			ckpt := filepath.Join(dir, "ckpt")
			if err := weights.Save(ckpt, m.Params.Checkpoint(m.HF)); err != nil {
				t.Fatal(err)
			}
			in, out := filepath.Join(dir, "in.json"), filepath.Join(dir, "out.json")
			raw, _ := json.Marshal(map[string]any{"tokens": g.Tokens})
			if err := os.WriteFile(in, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			if b, err := exec.Command(py, script, ckpt, in, out).CombinedOutput(); err != nil {
				t.Fatalf("transformers on the saved checkpoint: %v\n%s", err, b)
			}
			var got struct {
				Class     string    `json:"class"`
				ModelType string    `json:"model_type"`
				Logits    []float32 `json:"logits"`
			}
			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			t.Logf("transformers loaded %s (model_type %s)", got.Class, got.ModelType)
			if got.ModelType != m.Config.Family {
				t.Errorf("transformers read model_type %q, rlhost's family is %q", got.ModelType, m.Config.Family)
			}
			checkClose(t, "logits in transformers", got.Logits, a.Logits, 1e-4)
		})
	}
}

// maxAbsDiff is the largest |a[i] - b[i]|.
func maxAbsDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}
