package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
)

// graphMarker is gpu/cpu with gpu.DecodeGraph (on when on): it records the
// regions the generator marks, and fails (bad) on an upload, a download or
// a sampling inside one, a nested or unbalanced region, or a region that
// is not one decode step of the batch its key names.
type graphMarker struct {
	cpu.Backend
	on       bool
	open     bool
	keys     []uint64
	regions  int // forwards whose ops ran in a region
	forwards int // SampleTokens calls (one a forward)
	marked   bool
	bad      []string
}

func (g *graphMarker) DecodeGraphs() bool { return g.on }

// MatmulForward runs one row at a time, so that a row's result does not depend on the
// rows beside it: OpenBLAS's sgemm on CPUs without AVX-512 rounds a row differently in
// products of different heights, which is not what TestGenerateDecodePadding checks.
func (g *graphMarker) MatmulForward(out, inp, weight, bias []float32, N, C, OC int) {
	for n := 0; n < N; n++ {
		g.Backend.MatmulForward(out[n*OC:(n+1)*OC], inp[n*C:(n+1)*C], weight, bias, 1, C, OC)
	}
}

func (g *graphMarker) BeginDecodeGraph(key uint64) {
	if g.open {
		g.bad = append(g.bad, "a region begun inside another")
	}
	g.open, g.marked = true, true
	g.keys = append(g.keys, key)
}

func (g *graphMarker) EndDecodeGraph() {
	if !g.open {
		g.bad = append(g.bad, "a region ended that was not begun")
	}
	g.open = false
}

func (g *graphMarker) inside(what string) {
	if g.open {
		g.bad = append(g.bad, what+" inside a region")
	}
}

func (g *graphMarker) UploadInt32(dst, src []int32) {
	g.inside("UploadInt32")
	g.Backend.UploadInt32(dst, src)
}

func (g *graphMarker) Upload(dst, src []float32) {
	g.inside("Upload")
	g.Backend.Upload(dst, src)
}

func (g *graphMarker) Download(dst, src []float32) {
	g.inside("Download")
	g.Backend.Download(dst, src)
}

func (g *graphMarker) EmbeddingForward(out []float32, tokens []int32, wte []float32, N, C int) {
	if g.open && g.keys[len(g.keys)-1]&0xffffffff != uint64(N) {
		g.bad = append(g.bad, fmt.Sprintf("a region of key %#x embeds %d tokens", g.keys[len(g.keys)-1], N))
	}
	g.Backend.EmbeddingForward(out, tokens, wte, N, C)
}

func (g *graphMarker) SampleTokens(tokens []int32, logp []float32, logits []float32, params []gpu.SampleParams, M, V int) {
	g.inside("SampleTokens")
	g.forwards++
	if g.marked {
		g.regions++
		g.marked = false
	}
	g.Backend.SampleTokens(tokens, logp, logits, params, M, V)
}

// TestGenerateDecodeGraphRegions: on a backend with gpu.DecodeGraph the
// generator marks the decode steps (every row a decode token) and no
// prefill step, each region one step of the batch its key names, with
// every input uploaded before it and the sampling after it; two
// generators' keys differ; the results are those of the same backend with
// the regions off. (The CUDA backend's replay of a region is tested on the
// emulator, gpu/cuda/graph_emu_test.go.)
func TestGenerateDecodeGraphRegions(t *testing.T) {
	c := Config{Family: "llama", V: 61, C: 32, F: 64, L: 2, NH: 4, NKV: 2, HD: 8, MaxPos: 64, Eps: 1e-5,
		RopeTheta: 10000, BOS: 1, EOS: 2}
	r := rand.New(rand.NewPCG(5, 5))
	init := make([]float32, c.NumParams())
	for i := range init {
		init[i] = float32(r.NormFloat64() * 0.3)
	}
	var reqs []Request
	for i, n := range []int{3, 6, 4} {
		p := make([]int32, n)
		for j := range p {
			p[j] = int32(3 + r.IntN(c.V-3))
		}
		reqs = append(reqs, Request{Prompt: p, Sample: SampleConfig{MaxTokens: 5 + i, IgnoreEOS: true, Temperature: 0.8, Seed: uint64(i)}})
	}
	var res [2][]Result
	var keys [][]uint64
	for k, on := range []bool{false, true} {
		be := &graphMarker{on: on}
		m := NewZero(be, c)
		m.Params.Upload(init)
		for range 2 {
			g, err := m.NewGenerator(2, 32)
			if err != nil {
				t.Fatal(err)
			}
			be.keys = nil
			if res[k], err = g.Generate(reqs); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, be.keys)
		}
		if len(be.bad) > 0 {
			t.Errorf("regions on=%v: %v", on, be.bad)
		}
		// 3 requests over 2 slots: the first step of a generation prefills
		// two prompts, a later one the third; every other step decodes
		if want := be.forwards - 2*2; on && be.regions != want {
			t.Errorf("%d of %d forwards in regions, want %d (all but the 2 prefills of each generation)", be.regions, be.forwards, want)
		}
		if !on && (be.regions != 0 || len(be.keys) != 0) {
			t.Errorf("regions off: %d regions marked", be.regions)
		}
	}
	for i := range res[0] {
		if !slices.Equal(res[0][i].Tokens, res[1][i].Tokens) || !slices.Equal(res[0][i].Logprobs, res[1][i].Logprobs) {
			t.Errorf("request %d: %v %v with regions, %v %v without", i, res[1][i].Tokens, res[1][i].Logprobs, res[0][i].Tokens, res[0][i].Logprobs)
		}
	}
	if a, b := keys[2], keys[3]; len(a) == 0 || len(b) == 0 || a[0]>>32 == b[0]>>32 {
		t.Errorf("two generators' keys %x and %x: the same generator part", a, b)
	}
}

// TestDecodeBucket: the sizes a decode step is padded to: 1, 2, 4, then
// multiples of 8, never below the rows nor above the slots.
func TestDecodeBucket(t *testing.T) {
	for _, c := range []struct{ n, slots, want int }{
		{1, 256, 1}, {2, 256, 2}, {3, 256, 4}, {4, 256, 4}, {5, 256, 8}, {8, 256, 8}, {9, 256, 16},
		{249, 256, 256}, {256, 256, 256}, {3, 3, 3}, {11, 12, 12}, {5, 6, 6}, {7, 7, 7},
	} {
		if got := decodeBucket(c.n, c.slots); got != c.want {
			t.Errorf("decodeBucket(%d, %d) = %d, want %d", c.n, c.slots, got, c.want)
		}
	}
	for _, slots := range []int{1, 2, 3, 4, 7, 12, 64, 256, 1000} {
		sizes := map[int]bool{}
		for n := 1; n <= slots; n++ {
			b := decodeBucket(n, slots)
			if b < n || b > slots || b-n > 7 {
				t.Errorf("decodeBucket(%d, %d) = %d", n, slots, b)
			}
			sizes[b] = true
		}
		if len(sizes) > 3+(slots+7)/8 {
			t.Errorf("%d slots: %d sizes, want at most %d", slots, len(sizes), 3+(slots+7)/8)
		}
	}
}

// TestGenerateDecodePadding: on a backend with decode graphs on, a batch
// that shrinks one row at a time through 12 sizes runs its decode steps
// as the buckets' sizes (decodeBucket: 12, 8, 4, 2, 1 for 12 slots), the
// padding in the generator's extra slot; every request's tokens and
// log-probs are those of the same backend with graphs off (no padding),
// bit for bit. (On the CUDA emulator with graphs captured and replayed:
// gpu/cuda/graph_emu_test.go, with planted defects.)
func TestGenerateDecodePadding(t *testing.T) {
	c := Config{Family: "qwen2", V: 61, C: 32, F: 64, L: 2, NH: 4, NKV: 2, HD: 8, MaxPos: 64, Eps: 1e-5,
		RopeTheta: 10000, BOS: 1, EOS: 2, QKVBias: true}
	const slots = 12
	r := rand.New(rand.NewPCG(7, 7))
	init := make([]float32, c.NumParams())
	for i := range init {
		init[i] = float32(r.NormFloat64() * 0.3)
	}
	reqs := shrinkingRequests(r, c.V, slots, 2)
	var res [2][]Result
	for k, on := range []bool{false, true} {
		be := &graphMarker{on: on}
		m := NewZero(be, c)
		m.Params.Upload(init)
		g, err := m.NewGenerator(slots, 48)
		if err != nil {
			t.Fatal(err)
		}
		if !g.padSlot || len(g.kc[0]) != (slots+1)*48*c.NKV*c.HD {
			t.Fatalf("padding slot %v, a KV cache of %d floats", g.padSlot, len(g.kc[0]))
		}
		if res[k], err = g.Generate(reqs); err != nil {
			t.Fatal(err)
		}
		if len(be.bad) > 0 {
			t.Errorf("on=%v: %v", on, be.bad)
		}
		var sizes []int
		for _, key := range be.keys {
			if n := int(key & 0xffffffff); len(sizes) == 0 || sizes[len(sizes)-1] != n {
				sizes = append(sizes, n)
			}
		}
		if want := []int{12, 8, 4, 2, 1}; on && !slices.Equal(sizes, want) {
			t.Errorf("decode steps of batches %v, want %v", sizes, want)
		}
	}
	for i := range res[0] {
		if !slices.Equal(res[0][i].Tokens, res[1][i].Tokens) || !slices.Equal(res[0][i].Logprobs, res[1][i].Logprobs) {
			t.Errorf("request %d: %v %v padded, %v %v unpadded", i, res[1][i].Tokens, res[1][i].Logprobs, res[0][i].Tokens, res[0][i].Logprobs)
		}
		if len(res[0][i].Tokens) != reqs[i].Sample.MaxTokens {
			t.Errorf("request %d: %d tokens, want %d", i, len(res[0][i].Tokens), reqs[i].Sample.MaxTokens)
		}
	}
	// the CPU backend (no decode graphs) has no padding slot
	g, err := NewZero(cpu.Backend{}, c).NewGenerator(slots, 48)
	if err != nil {
		t.Fatal(err)
	}
	if g.padSlot || len(g.kc[0]) != slots*48*c.NKV*c.HD {
		t.Errorf("gpu/cpu: padding slot %v, a KV cache of %d floats", g.padSlot, len(g.kc[0]))
	}
}

// shrinkingRequests are n sampled requests (temperature 0.9, top-k 20) of
// 3 to 6 prompt tokens for n slots, request i generating steps*(n-i)
// tokens: admitted together, the batch shrinks by one row every steps
// decode steps, request 0 (slot 0) running to the end.
func shrinkingRequests(r *rand.Rand, V, n, steps int) []Request {
	var reqs []Request
	for i := range n {
		p := make([]int32, 3+r.IntN(4))
		for j := range p {
			p[j] = int32(3 + r.IntN(V-3))
		}
		reqs = append(reqs, Request{Prompt: p, Sample: SampleConfig{MaxTokens: steps * (n - i), IgnoreEOS: true,
			Temperature: 0.9, TopK: 20, Seed: uint64(100 + i)}})
	}
	return reqs
}
