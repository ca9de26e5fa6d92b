package model

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/weights"
)

// TestGoldenGreedy: greedy generation of 32 tokens equals transformers'
// generate for every prompt, with fewer slots than requests so that finished
// requests hand their slot (and stale cache) to the next one, and the
// returned log-probabilities match the full forward's.
func TestGoldenGreedy(t *testing.T) {
	for _, name := range allFamilies {
		t.Run(name, func(t *testing.T) {
			m := newTiny(t, name)
			g := loadGolden(t, name)
			for _, slots := range []int{1, 2, 3} {
				gen, err := m.NewGenerator(slots, 64)
				if err != nil {
					t.Fatal(err)
				}
				var reqs []Request
				for _, want := range g.Generate {
					reqs = append(reqs, Request{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: len(want.Tokens), IgnoreEOS: true}})
				}
				res, err := gen.Generate(reqs)
				if err != nil {
					t.Fatal(err)
				}
				for i, want := range g.Generate {
					if !slices.Equal(res[i].Tokens, want.Tokens) {
						t.Fatalf("slots=%d request %d: tokens\n got %v\nwant %v", slots, i, res[i].Tokens, want.Tokens)
					}
					if res[i].FinishReason != "length" {
						t.Errorf("request %d finished by %q, want length", i, res[i].FinishReason)
					}
					for j, lp := range want.Logprobs {
						if d := math.Abs(float64(res[i].Logprobs[j]) - lp); d > 1e-4*(1+math.Abs(lp)) {
							t.Fatalf("slots=%d request %d token %d: logprob %v, want %v", slots, i, j, res[i].Logprobs[j], lp)
						}
					}
				}
			}
		})
	}
}

func TestGenerateStops(t *testing.T) {
	m := newTiny(t, "tiny-llama")
	g := loadGolden(t, "tiny-llama")
	want := g.Generate[0]
	gen, err := m.NewGenerator(2, 40)
	if err != nil {
		t.Fatal(err)
	}
	stopTok := want.Tokens[4]
	first := slices.Index(want.Tokens, stopTok)
	calls := 0
	res, err := gen.Generate([]Request{
		{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: 32, IgnoreEOS: true, StopTokens: []int32{stopTok}}},
		{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: 32, IgnoreEOS: true, Stop: func(gen []int32) bool { calls++; return len(gen) == 3 }}},
		{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: 5, IgnoreEOS: true}},
		{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: 100, IgnoreEOS: true}}, // the slot ends first
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[0]; !slices.Equal(got.Tokens, want.Tokens[:first+1]) || got.FinishReason != "stop" {
		t.Errorf("stop token: got %v (%s), want %v (stop)", got.Tokens, got.FinishReason, want.Tokens[:first+1])
	}
	if got := res[1]; len(got.Tokens) != 3 || got.FinishReason != "stop" || calls != 3 {
		t.Errorf("stop func: got %v (%s) after %d calls, want 3 tokens (stop)", got.Tokens, got.FinishReason, calls)
	}
	if got := res[2]; !slices.Equal(got.Tokens, want.Tokens[:5]) || got.FinishReason != "length" {
		t.Errorf("max tokens: got %v (%s)", got.Tokens, got.FinishReason)
	}
	if got := res[3]; len(got.Tokens) != 40-len(want.Prompt)+1 || got.FinishReason != "length" {
		t.Errorf("slot length: got %d tokens (%s), want %d", len(got.Tokens), got.FinishReason, 40-len(want.Prompt)+1)
	}

	// eos stops unless ignored: make the model's eos the first greedy token.
	m.Config.EOS = int(want.Tokens[0])
	res, err = gen.Generate([]Request{{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: 8}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].Tokens) != 1 || res[0].FinishReason != "stop" {
		t.Errorf("eos: got %v (%s)", res[0].Tokens, res[0].FinishReason)
	}
}

// eosCheckpoint copies tiny-llama with config.json's eos_token_id set to eos (JSON) and
// generation_config.json's text set to gen ("": no generation_config.json), and loads it.
func eosCheckpoint(t *testing.T, eos, gen string) *Model {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("testdata", "tiny-llama")
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["eos_token_id"] = json.RawMessage(eos)
	b, _ = json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	if gen != "" {
		os.WriteFile(filepath.Join(dir, weights.GenerationConfigFile), []byte(gen), 0o644)
	}
	st, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors"), st, 0o644)
	return newModelAt(t, dir)
}

func newModelAt(t *testing.T, dir string) *Model {
	t.Helper()
	m, err := New(cpu.New(), loadCheckpoint(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Generation stops at every eos id the checkpoint declares, as transformers' generate
// does (it stops at any id of generation_config.eos_token_id): config.json's list past
// its first id (Llama 3 Instruct's [128001, 128008, 128009]) and generation_config.json's
// ids (Qwen2.5's [151645, 151643]); IgnoreEOS ignores them all. The greedy tokens are
// transformers' (tiny-llama-golden.json, made with eos 2, which they never reach), so the
// stop is at the first of them in the eos set.
func TestGenerateStopsAtEveryEOS(t *testing.T) {
	want := loadGolden(t, "tiny-llama").Generate[1] // 109 98 109 98 109 63 ...; no 2 or 127
	for _, tt := range []struct {
		name, eos, gen string
		stop           int // index of the token generation stops after; -1: none
	}{
		{"third id of config.json's list", `[2, 127, 63]`, "", 5},
		{"second id of config.json's list", `[127, 98, 2]`, "", 1},
		{"generation_config.json's second id", `2`, `{"eos_token_id": [2, 98]}`, 1},
		{"generation_config.json beside a list", `[2, 127]`, `{"eos_token_id": [127, 63]}`, 5},
		{"ids never generated", `[2, 127]`, `{"eos_token_id": 2}`, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := eosCheckpoint(t, tt.eos, tt.gen)
			gen, err := m.NewGenerator(2, 64)
			if err != nil {
				t.Fatal(err)
			}
			res, err := gen.Generate([]Request{
				{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: len(want.Tokens)}},
				{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: len(want.Tokens), IgnoreEOS: true}},
			})
			if err != nil {
				t.Fatal(err)
			}
			wantTokens, reason := want.Tokens, "length"
			if tt.stop >= 0 {
				wantTokens, reason = want.Tokens[:tt.stop+1], "stop"
			}
			if got := res[0]; !slices.Equal(got.Tokens, wantTokens) || got.FinishReason != reason {
				t.Errorf("eos ids %v: got %v (%s), want %v (%s)", m.Config.EOSIDs(), got.Tokens, got.FinishReason, wantTokens, reason)
			}
			if got := res[1]; !slices.Equal(got.Tokens, want.Tokens) || got.FinishReason != "length" {
				t.Errorf("IgnoreEOS: got %v (%s), want all %d tokens (length)", got.Tokens, got.FinishReason, len(want.Tokens))
			}
		})
	}
}

// TestGoldenEOS: greedy generation on tiny-llama with the eos_token_id settings of
// testdata/eos-golden.json (scripts/goldens/model/make_eos_goldens.py) against where
// transformers' generate stops. transformers stops at generation_config.json's ids when the
// file exists, else at config.json's; rlhost stops at the union. Where the two sets give the
// same first stop (every case but a generation_config.json without config.json's ids, or
// with eos_token_id null) the tokens are transformers' exactly; elsewhere rlhost stops at the
// first union id, on transformers' tokens.
func TestGoldenEOS(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "eos-golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		MaxNewTokens int `json:"max_new_tokens"`
		Cases        []struct {
			Name      string  `json:"name"`
			ConfigEOS string  `json:"config_eos"`
			GenEOS    *string `json:"generation_config_eos"`
			Results   []struct {
				Prompt  []int32 `json:"prompt"`
				Tokens  []int32 `json:"tokens"`
				Stopped bool    `json:"stopped"`
			} `json:"results"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	ids := func(js string) []int32 { // an id, a list or null
		var v any
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		var out []int32
		switch v := v.(type) {
		case float64:
			out = append(out, int32(v))
		case []any:
			for _, x := range v {
				out = append(out, int32(x.(float64)))
			}
		}
		return out
	}
	full := loadGolden(t, "tiny-llama").Generate // greedy, never stopping
	cut := func(toks []int32, stop []int32) []int32 {
		for i, tok := range toks {
			if slices.Contains(stop, tok) {
				return toks[:i+1]
			}
		}
		return toks
	}
	differ := 0
	for _, c := range golden.Cases {
		t.Run(c.Name, func(t *testing.T) {
			gen, hfSet := "", ids(c.ConfigEOS)
			union := slices.Clone(hfSet)
			if c.GenEOS != nil {
				gen = `{"eos_token_id": ` + *c.GenEOS + `}`
				hfSet = ids(*c.GenEOS)
				union = append(union, hfSet...)
			}
			m := eosCheckpoint(t, c.ConfigEOS, gen)
			g, err := m.NewGenerator(len(c.Results), 64)
			if err != nil {
				t.Fatal(err)
			}
			var reqs []Request
			for _, r := range c.Results {
				reqs = append(reqs, Request{Prompt: r.Prompt, Sample: SampleConfig{MaxTokens: golden.MaxNewTokens}})
			}
			res, err := g.Generate(reqs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range c.Results {
				if !slices.Equal(full[i].Prompt, r.Prompt) || !slices.Equal(cut(full[i].Tokens, hfSet), r.Tokens) {
					t.Fatalf("prompt %d: transformers' tokens %v are not its plain greedy ones cut at %v", i, r.Tokens, hfSet)
				}
				want := cut(full[i].Tokens, union)
				if len(want) != len(r.Tokens) {
					differ++
				}
				got := res[i]
				if !slices.Equal(got.Tokens, want) || (got.FinishReason == "stop") != (len(want) < golden.MaxNewTokens) {
					t.Errorf("prompt %d, eos ids %v: got %v (%s), want %v; transformers %v", i, m.Config.EOSIDs(), got.Tokens, got.FinishReason, want, r.Tokens)
				}
			}
		})
	}
	if differ != 2 {
		t.Errorf("%d results differ from transformers' stop; want 2 (the union's extra stops)", differ)
	}
}

// A checkpoint without an eos id (null, no generation_config.json) stops at none, not at
// id 0 (which tiny-llama generates as its 7th token for the first golden prompt), until
// FallBackEOS gives it the tokenizer's; a checkpoint with an eos id keeps its own.
func TestGenerateNoEOS(t *testing.T) {
	want := loadGolden(t, "tiny-llama").Generate[0] // 49 49 49 78 7 44 0 49 ...
	m := eosCheckpoint(t, `null`, "")
	if ids := m.Config.EOSIDs(); m.Config.EOS != -1 || len(ids) != 0 {
		t.Fatalf("EOS %d, ids %v; want -1, none", m.Config.EOS, ids)
	}
	gen, err := m.NewGenerator(1, 64)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gen.Generate([]Request{{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: len(want.Tokens)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[0]; !slices.Equal(got.Tokens, want.Tokens) || got.FinishReason != "length" {
		t.Errorf("no eos: got %v (%s), want all %d tokens (length)", got.Tokens, got.FinishReason, len(want.Tokens))
	}
	if !m.FallBackEOS(44) || m.FallBackEOS(45) || m.Config.EOS != 44 {
		t.Fatalf("FallBackEOS: EOS %d; want 44, set once", m.Config.EOS)
	}
	res, err = gen.Generate([]Request{{Prompt: want.Prompt, Sample: SampleConfig{MaxTokens: len(want.Tokens)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res[0]; !slices.Equal(got.Tokens, want.Tokens[:6]) || got.FinishReason != "stop" {
		t.Errorf("tokenizer's eos 44: got %v (%s), want %v (stop)", got.Tokens, got.FinishReason, want.Tokens[:6])
	}
	if m := eosCheckpoint(t, `[]`, `{"eos_token_id": [63, 98]}`); m.FallBackEOS(44) || !slices.Equal(m.Config.EOSIDs(), []int32{63, 98}) {
		t.Errorf("generation_config.json's ids: EOS %d, ids %v; want 63, [63 98], no fallback", m.Config.EOS, m.Config.EOSIDs())
	}
}

func TestGenerateBadRequests(t *testing.T) {
	m := newTiny(t, "tiny-qwen2")
	gen, err := m.NewGenerator(1, 8)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  Request
	}{
		{"empty prompt", Request{Sample: SampleConfig{MaxTokens: 1}}},
		{"prompt too long", Request{Prompt: make([]int32, 8), Sample: SampleConfig{MaxTokens: 1}}},
		{"token outside vocabulary", Request{Prompt: []int32{5, 128}, Sample: SampleConfig{MaxTokens: 1}}},
		{"negative token", Request{Prompt: []int32{-1}, Sample: SampleConfig{MaxTokens: 1}}},
		{"no max tokens", Request{Prompt: []int32{5}}},
	}
	for _, tt := range tests {
		if _, err := gen.Generate([]Request{tt.req}); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	if _, err := m.NewGenerator(1, 1<<20); err == nil {
		t.Error("generator longer than the model's positions: no error")
	}
}

// TestSampleDistribution: with temperature, top-k and top-p, sampled
// frequencies follow the filtered, renormalised softmax.
func TestSampleDistribution(t *testing.T) {
	logits := []float32{2, 1.5, 1, 0.2, -1, -3, 0.9, 1.4}
	tests := []struct {
		name string
		sc   SampleConfig
	}{
		{"temperature", SampleConfig{Temperature: 0.7}},
		{"top-k 3", SampleConfig{Temperature: 1, TopK: 3}},
		{"top-p 0.6", SampleConfig{Temperature: 1.3, TopP: 0.6}},
		{"top-k 4 top-p 0.9", SampleConfig{Temperature: 1, TopK: 4, TopP: 0.9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// expected distribution, computed directly
			temp := float64(tt.sc.Temperature)
			p := make([]float64, len(logits))
			var s float64
			for i, z := range logits {
				p[i] = math.Exp(float64(z) / temp)
				s += p[i]
			}
			order := make([]int, len(p))
			for i := range order {
				order[i] = i
				p[i] /= s
			}
			slices.SortFunc(order, func(a, b int) int {
				if p[a] > p[b] {
					return -1
				}
				return 1
			})
			keep := map[int]bool{}
			var cum float64
			for j, i := range order {
				if tt.sc.TopK > 0 && j >= tt.sc.TopK {
					break
				}
				keep[i] = true
				cum += p[i]
				if tt.sc.TopP > 0 && cum >= float64(tt.sc.TopP) {
					break
				}
			}
			var mass float64
			for i := range keep {
				mass += p[i]
			}
			rng := rand.New(rand.NewPCG(1, 2))
			const draws = 40000
			counts := make([]int, len(logits))
			for range draws {
				tok, lp := sampleToken(logits, &tt.sc, rng)
				counts[tok]++
				if math.Abs(float64(lp)-math.Log(p[tok])) > 1e-5 {
					t.Fatalf("logprob of %d = %v, want %v", tok, lp, math.Log(p[tok]))
				}
			}
			for i, n := range counts {
				want := 0.0
				if keep[i] {
					want = p[i] / mass
				}
				got := float64(n) / draws
				if math.Abs(got-want) > 4*math.Sqrt(want*(1-want)/draws)+1e-9 {
					t.Errorf("token %d: frequency %.4f, want %.4f", i, got, want)
				}
			}
		})
	}
	// Same seed, same stream; top-k 1 is greedy.
	a, _ := sampleToken(logits, &SampleConfig{Temperature: 5, TopK: 1}, rand.New(rand.NewPCG(9, 9)))
	if a != 0 {
		t.Errorf("top-k 1 picked %d, want the argmax 0", a)
	}
}

// TestGenerateBatchIndependentFloat32Small is TestGenerateBatchIndependent in float32 on every
// CPU, with batches small enough that no forward reaches SmallMatmulMaxN rows: there every
// product runs on the small-batch kernel (AVX2 CPUs included, whose longer prefills go to
// sgemm), so a request samples the same tokens and log-probs alone or batched.
func TestGenerateBatchIndependentFloat32Small(t *testing.T) {
	m := newTiny(t, "tiny-llama")
	r := rand.New(rand.NewPCG(23, 24))
	var reqs []Request
	for i, n := range []int{3, 9, 1, 5, 7} { // at most 25 prompt rows in one forward
		p := make([]int32, n)
		for j := range p {
			p[j] = int32(r.IntN(m.Config.V))
		}
		reqs = append(reqs, Request{Prompt: p, Sample: SampleConfig{MaxTokens: 10, Temperature: 1, Seed: uint64(300 + i), IgnoreEOS: true}})
	}
	var runs [][]Result
	for _, slots := range []int{1, 2, 5} {
		g, err := m.NewGenerator(slots, 32)
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Generate(reqs)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, res)
	}
	sameAsAlone(t, "float32", runs)
}

// sameAsAlone fails unless every run's results equal the first run's (each request alone),
// tokens and log-probs bit for bit.
func sameAsAlone(t *testing.T, what string, runs [][]Result) {
	t.Helper()
	for s := 1; s < len(runs); s++ {
		for i := range runs[0] {
			a, b := runs[0][i], runs[s][i]
			if !slices.Equal(a.Tokens, b.Tokens) || !slices.EqualFunc(a.Logprobs, b.Logprobs, func(x, y float32) bool {
				return math.Float32bits(x) == math.Float32bits(y)
			}) {
				t.Fatalf("%s request %d: alone %v %v, batched (run %d) %v %v", what, i, a.Tokens, a.Logprobs, s, b.Tokens, b.Logprobs)
			}
		}
	}
}

// TestGenerateBatchIndependent: a request samples the same tokens with the same
// log-probabilities (bit for bit) whether it runs alone or batched with others, its prompt
// prefilled in the same forward as their decode tokens or its prefix copied from another
// slot's cache, for every rollout dtype: each row
// of a product is computed the same way whatever else is in the batch (cpu.DecodeMatmul and
// the reduced-precision kernels; on CPUs without AVX-512 fp32 generation uses sgemm, which
// does not promise it, and is skipped).
func TestGenerateBatchIndependent(t *testing.T) {
	m := newTiny(t, "tiny-llama")
	r := rand.New(rand.NewPCG(21, 22))
	var reqs []Request
	for i := 0; i < 7; i++ {
		p := make([]int32, []int{3, 40, 9, 33, 1, 17, 45}[i]) // some prompts above 32 rows
		for j := range p {
			p[j] = int32(r.IntN(m.Config.V))
		}
		reqs = append(reqs, Request{Prompt: p, Sample: SampleConfig{MaxTokens: 12, Temperature: 1, Seed: uint64(100 + i), IgnoreEOS: true}})
	}
	// prompts that share prefixes (GRPO's samples of one prompt; a longer conversation):
	// their keys and values are copied from the slot that holds them
	for i, src := range []int{1, 1, 3, 6, 1} {
		p := slices.Clone(reqs[src].Prompt)
		if i >= 3 {
			p = append(p[:len(p)-2], 5, 6, 7, 8) // diverges before the end
		}
		reqs = append(reqs, Request{Prompt: p, Sample: SampleConfig{MaxTokens: 12, Temperature: 1, Seed: uint64(200 + i), IgnoreEOS: true}})
	}
	for _, dt := range []cpu.Dtype{cpu.Float32, cpu.BFloat16, cpu.Int8} {
		if dt == cpu.Float32 && cpu.BestLowpISA < cpu.ISAAVX512 {
			t.Log("float32 skipped: no AVX-512 (sgemm rows depend on the batch)")
			continue
		}
		var runs [][]Result
		for k, slots := range []int{1, 1, 3, 7, 12} {
			g, err := m.NewGenerator(slots, 64)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.SetDtype(dt); err != nil {
				t.Fatal(err)
			}
			g.NoPrefixSharing = k == 0 // the reference: every prompt prefilled, one at a time
			res, err := g.Generate(reqs)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 && g.SharedTokens != 0 {
				t.Fatalf("NoPrefixSharing: %d prompt tokens copied", g.SharedTokens)
			}
			// one slot holds one request's tokens at a time: only neighbours share there
			if want := map[bool]int{true: 39, false: 40 + 40 + 33}[slots == 1]; k > 0 && g.SharedTokens < want {
				t.Errorf("%v slots=%d: %d prompt tokens copied, %d prefilled: the repeated prompts were not shared", dt, slots, g.SharedTokens, g.PrefillTokens)
			}
			runs = append(runs, res)
		}
		sameAsAlone(t, dt.String(), runs)
	}
}

// The keys and values of a call's prompts and generated tokens stay for the next call while
// the weights do not change: a second turn that extends a first turn's conversation
// prefills only its new tokens, with the result of a generator that never saw the first;
// after an optimizer step (or LoRA.Changed / Params.Changed) nothing is reused.
func TestGeneratePrefixAcrossCalls(t *testing.T) {
	m := newTiny(t, "tiny-llama")
	r := rand.New(rand.NewPCG(23, 24))
	prompt := make([]int32, 20)
	for j := range prompt {
		prompt[j] = int32(r.IntN(m.Config.V))
	}
	g, err := m.NewGenerator(4, 64)
	if err != nil {
		t.Fatal(err)
	}
	first, err := g.Generate([]Request{{Prompt: prompt, Sample: SampleConfig{MaxTokens: 10, IgnoreEOS: true}}})
	if err != nil {
		t.Fatal(err)
	}
	turn2 := append(append(slices.Clone(prompt), first[0].Tokens...), 7, 8, 9) // + an observation
	sample := SampleConfig{MaxTokens: 8, Temperature: 1, Seed: 3, IgnoreEOS: true}
	g.PrefillTokens, g.SharedTokens = 0, 0
	got, err := g.Generate([]Request{{Prompt: turn2, Sample: sample}})
	if err != nil {
		t.Fatal(err)
	}
	// the first turn ran prompt + 9 of its 10 tokens (the last was never fed back)
	if g.SharedTokens != len(prompt)+9 || g.PrefillTokens != len(turn2)-len(prompt)-9 {
		t.Errorf("second turn: %d tokens copied, %d prefilled; want %d and %d", g.SharedTokens, g.PrefillTokens, len(prompt)+9, len(turn2)-len(prompt)-9)
	}
	fresh, _ := m.NewGenerator(4, 64)
	want, _ := fresh.Generate([]Request{{Prompt: turn2, Sample: sample}})
	// Bit for bit where the fp32 products do not depend on the batch (AVX-512's small-batch
	// kernel); with sgemm (AVX2) the cached keys came from one-row decode steps and the fresh
	// ones from one prefill, so the log-probs agree to fp32 rounding.
	same := func(x, y float32) bool { return x == y }
	if cpu.BestLowpISA < cpu.ISAAVX512 {
		same = func(x, y float32) bool { return math.Abs(float64(x-y)) <= 1e-5*max(1, math.Abs(float64(y))) }
	}
	if !slices.Equal(got[0].Tokens, want[0].Tokens) || !slices.EqualFunc(got[0].Logprobs, want[0].Logprobs, same) {
		t.Fatalf("second turn with the cached first: %v %v; a fresh generator: %v %v", got[0].Tokens, got[0].Logprobs, want[0].Tokens, want[0].Logprobs)
	}
	m.Params.Changed()
	g.PrefillTokens, g.SharedTokens = 0, 0
	if _, err := g.Generate([]Request{{Prompt: turn2, Sample: sample}}); err != nil {
		t.Fatal(err)
	}
	if g.SharedTokens != 0 {
		t.Errorf("after Params.Changed %d prompt tokens were copied from the old weights' cache", g.SharedTokens)
	}
}

// Stream takes requests while others run: each fed request gives the tokens
// and log-probs it gives alone, done reports a request as soon as it
// finishes (a short request fed late returns before a long one that started
// first), and an invalid request is reported without stopping the others.
func TestGenerateStream(t *testing.T) {
	m := newTiny(t, "tiny-llama")
	r := rand.New(rand.NewPCG(23, 24))
	prompt := func(n int) []int32 {
		p := make([]int32, n)
		for j := range p {
			p[j] = int32(r.IntN(m.Config.V))
		}
		return p
	}
	long := Request{Prompt: prompt(9), Sample: SampleConfig{MaxTokens: 40, Temperature: 1, Seed: 1, IgnoreEOS: true}}
	var fed []Request
	for i := 0; i < 5; i++ {
		fed = append(fed, Request{Prompt: prompt(3 + 7*i), Sample: SampleConfig{MaxTokens: 3 + i, Temperature: 1, Seed: uint64(10 + i), IgnoreEOS: true}})
	}
	fed[2] = Request{Prompt: append(slices.Clone(long.Prompt), 4, 5), Sample: SampleConfig{MaxTokens: 6, Temperature: 0.7, Seed: 7, IgnoreEOS: true}} // shares long's prompt
	bad := Request{Prompt: []int32{int32(m.Config.V)}, Sample: SampleConfig{MaxTokens: 4}}
	for _, dt := range []cpu.Dtype{cpu.Float32, cpu.BFloat16, cpu.Int8} {
		if dt == cpu.Float32 && cpu.BestLowpISA < cpu.ISAAVX512 {
			continue // sgemm rows depend on the batch
		}
		alone := func(req Request) Result {
			g, _ := m.NewGenerator(1, 64)
			if err := g.SetDtype(dt); err != nil {
				t.Fatal(err)
			}
			g.NoPrefixSharing = true
			res, err := g.Generate([]Request{req})
			if err != nil {
				t.Fatal(err)
			}
			return res[0]
		}
		g, _ := m.NewGenerator(3, 64)
		if err := g.SetDtype(dt); err != nil {
			t.Fatal(err)
		}
		step := 0
		// one fed request every 4 steps, the invalid one in between
		feed := func() []Request {
			step++
			switch {
			case step == 6:
				return []Request{bad}
			case step%4 == 0 && step/4 <= len(fed):
				return []Request{fed[step/4-1]}
			}
			return nil
		}
		var order []int
		got := map[int]Result{}
		errs := map[int]error{}
		err := g.Stream([]Request{long}, feed, func(i int, res Result, err error) {
			order = append(order, i)
			got[i], errs[i] = res, err
		})
		if err != nil {
			t.Fatal(err)
		}
		// numbering: long 0, fed[0] 1 (step 4), bad 2 (step 6), fed[1..4] 3..6
		if len(order) != 7 || errs[2] == nil || !strings.Contains(errs[2].Error(), "vocabulary") {
			t.Fatalf("%v: done order %v, errors %v", dt, order, errs)
		}
		if order[len(order)-1] != 0 {
			t.Errorf("%v: the long request (40 tokens) finished before fed ones: order %v", dt, order)
		}
		want := map[int]Request{0: long, 1: fed[0], 3: fed[1], 4: fed[2], 5: fed[3], 6: fed[4]}
		for i, req := range want {
			a, b := alone(req), got[i]
			if errs[i] != nil || !slices.Equal(a.Tokens, b.Tokens) || !slices.EqualFunc(a.Logprobs, b.Logprobs, func(x, y float32) bool {
				return math.Float32bits(x) == math.Float32bits(y)
			}) {
				t.Fatalf("%v request %d: alone %v %v, streamed %v %v (%v)", dt, i, a.Tokens, a.Logprobs, b.Tokens, b.Logprobs, errs[i])
			}
		}
		if g.SharedTokens < len(long.Prompt)-1 {
			t.Errorf("%v: %d prompt tokens shared: the fed request did not reuse the running one's prompt", dt, g.SharedTokens)
		}
	}
}

// sampleToken samples one row of logits as the generator does: the request's
// settings and the next draw of its stream, through the CPU backend.
func sampleToken(logits []float32, sc *SampleConfig, rng *rand.Rand) (int32, float32) {
	var tok [1]int32
	var lp [1]float32
	p := sampleParams(sc, rng, len(logits))
	cpu.New().SampleTokens(tok[:], lp[:], logits, []gpu.SampleParams{p}, 1, len(logits))
	return tok[0], lp[0]
}

// decodeFusedCPU is gpu/cpu with generation's fused ops (gpu.DecodeFused)
// made of its separate ops, counting the calls, as the CUDA backend
// offers them.
type decodeFusedCPU struct {
	cpu.Backend
	qkv, ropeCache, gateUp int
}

func (*decodeFusedCPU) DecodeFusion() bool { return true }

func (d *decodeFusedCPU) QKVRopeCacheForward(q, kcache, vcache, qkv, bias []float32, pos, rows []int32, cos, sin []float32,
	N, NH, NKV, HD int, layout gpu.RopeLayout) {
	d.qkv++
	QD, KD := NH*HD, NKV*HD
	k, v := make([]float32, N*KD), make([]float32, N*KD)
	unstack(qkv, N, [][]float32{q, k, v}, []int{QD, KD, KD})
	if bias != nil {
		for n := range N {
			for i := range QD {
				q[n*QD+i] += bias[i]
			}
			for i := range KD {
				k[n*KD+i] += bias[QD+i]
				v[n*KD+i] += bias[QD+KD+i]
			}
		}
	}
	d.RopeQKForward(q, k, pos, cos, sin, N, NH, NKV, HD, layout)
	d.ScatterRows(kcache, k, rows, N, KD)
	d.ScatterRows(vcache, v, rows, N, KD)
}

func (d *decodeFusedCPU) RopeCacheForward(q, kcache, vcache, k, v []float32, pos, rows []int32, cos, sin []float32,
	N, NH, NKV, HD int, layout gpu.RopeLayout) {
	d.ropeCache++
	k = slices.Clone(k[:N*NKV*HD])
	d.RopeQKForward(q, k, pos, cos, sin, N, NH, NKV, HD, layout)
	d.ScatterRows(kcache, k, rows, N, NKV*HD)
	d.ScatterRows(vcache, v, rows, N, NKV*HD)
}

func (d *decodeFusedCPU) SwiGLURowsForward(out, gu []float32, N, F int) {
	d.gateUp++
	gate, up := make([]float32, N*F), make([]float32, N*F)
	unstack(gu, N, [][]float32{gate, up}, []int{F, F})
	d.SwiGLUForward(out, gate, up, N*F)
}

// TestGenerateDecodeFused: on a backend with the fused decode ops the
// generator runs q/k/v and gate/up as one product each over the views of
// the parameters (Qwen2-shaped: biases; Llama-shaped: none) and gives the
// CPU's tokens and log-probs (within 1e-5: the wider product may sum in
// another order); a forward of more than fusedGateUpMaxRows rows (the
// prefill, with the bound lowered) runs gate and up apart; layers with
// LoRA adapters on those products run the products apart, then
// RopeCacheForward for RoPE and the cache writes.
func TestGenerateDecodeFused(t *testing.T) {
	defer func(n int) { fusedGateUpMaxRows = n }(fusedGateUpMaxRows)
	for name, c := range map[string]Config{
		"qwen2": {Family: "qwen2", V: 97, C: 64, F: 160, L: 2, NH: 4, NKV: 2, HD: 16, MaxPos: 64, Eps: 1e-6,
			RopeTheta: 10000, QKVBias: true, BOS: 1, EOS: 2},
		"llama": {Family: "llama", V: 97, C: 64, F: 128, L: 2, NH: 4, NKV: 1, HD: 16, MaxPos: 64, Eps: 1e-5,
			RopeTheta: 10000, Tied: true, BOS: 1, EOS: 2},
	} {
		r := rand.New(rand.NewPCG(28, 6))
		init := make([]float32, c.NumParams())
		for i := range init {
			init[i] = float32(r.NormFloat64() * 0.3)
		}
		reqs := []Request{
			{Prompt: []int32{3, 5, 7, 9, 11}, Sample: SampleConfig{MaxTokens: 5, IgnoreEOS: true}},
			{Prompt: []int32{4, 6, 8}, Sample: SampleConfig{MaxTokens: 5, IgnoreEOS: true, Temperature: 0.9, Seed: 3}},
		}
		for _, tc := range []struct {
			maxRows                int
			lora                   bool
			qkv, ropeCache, gateUp int // calls per layer
		}{{1024, false, 5, 0, 5}, {4, false, 5, 0, 4}, {1024, true, 0, 5, 0}} {
			fusedGateUpMaxRows = tc.maxRows
			var res [2][]Result
			var fused *decodeFusedCPU
			for k := range 2 {
				var be gpu.Backend = cpu.New()
				if k == 1 {
					fused = &decodeFusedCPU{}
					be = fused
				}
				m := NewZero(be, c)
				m.Params.Upload(init)
				if tc.lora {
					if err := m.EnableLoRA(LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"all-linear"}, Seed: 1}); err != nil {
						t.Fatal(err)
					}
				}
				g, err := m.NewGenerator(2, 16)
				if err != nil {
					t.Fatal(err)
				}
				if res[k], err = g.Generate(reqs); err != nil {
					t.Fatal(err)
				}
			}
			what := fmt.Sprintf("%s, gate/up fused up to %d rows, LoRA %v", name, tc.maxRows, tc.lora)
			for i := range reqs {
				if !slices.Equal(res[1][i].Tokens, res[0][i].Tokens) {
					t.Errorf("%s: request %d: tokens %v fused, %v on the CPU", what, i, res[1][i].Tokens, res[0][i].Tokens)
				}
				for j, lp := range res[1][i].Logprobs {
					if d := math.Abs(float64(lp - res[0][i].Logprobs[j])); d > 1e-5 {
						t.Errorf("%s: request %d token %d: log-prob %g fused, %g on the CPU", what, i, j, lp, res[0][i].Logprobs[j])
					}
				}
			}
			// 5 forwards: the prefill of 8 rows, then 4 decode steps of 2
			if fused.qkv != tc.qkv*c.L || fused.ropeCache != tc.ropeCache*c.L || fused.gateUp != tc.gateUp*c.L {
				t.Errorf("%s: %d q/k/v, %d RoPE + cache and %d gate/up fused ops, want %d, %d and %d", what,
					fused.qkv, fused.ropeCache, fused.gateUp, tc.qkv*c.L, tc.ropeCache*c.L, tc.gateUp*c.L)
			}
		}
	}
}
