package sft

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/model/modeltest"
	"github.com/rlhost/rlhost/gpu/safetensors"
	"github.com/rlhost/rlhost/gpu/tokenizer"
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

// sftGolden is testdata/sft-golden.json, written by scripts/goldens/sft/make_goldens.py.
type sftGolden struct {
	Conversations []struct {
		Messages  any       `json:"messages"`
		Tools     any       `json:"tools"`
		InputIDs  []int32   `json:"input_ids"`
		LossMask  []int     `json:"loss_mask"`
		TokenLoss []float64 `json:"token_loss"`
	} `json:"conversations"`
	Loss       float64 `json:"loss"`
	LossTokens int     `json:"loss_tokens"`
}

const tinyChat = "testdata/tiny-chat"

func loadSFTGolden(t *testing.T) *sftGolden {
	t.Helper()
	b, err := os.ReadFile("testdata/sft-golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g sftGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func tinyTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tk, err := tokenizer.Load(tinyChat)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tk.Close() })
	return tk
}

// goldenExamples encodes the golden conversations with the Encoder and checks the tokens and
// the loss mask against the Hugging Face layout.
func goldenExamples(t *testing.T, g *sftGolden) []*Example {
	t.Helper()
	enc := &Encoder{Tok: tinyTokenizer(t)}
	var exs []*Example
	for i, c := range g.Conversations {
		conv, err := ParseConversation(c.Messages, c.Tools)
		if err != nil {
			t.Fatalf("conversation %d: %v", i, err)
		}
		ex, sk := enc.Encode(conv)
		if sk != nil {
			t.Fatalf("conversation %d: skipped: %v", i, sk)
		}
		if len(ex.IDs) != len(c.InputIDs) {
			t.Fatalf("conversation %d: %d tokens, transformers %d:\n got %q\nwant %q", i, len(ex.IDs), len(c.InputIDs),
				enc.Tok.Decode(i32s(ex.IDs), false), enc.Tok.Decode(i32s(c.InputIDs), false))
		}
		for j := range ex.IDs {
			if ex.IDs[j] != c.InputIDs[j] || ex.Mask[j] != (c.LossMask[j] == 1) {
				t.Fatalf("conversation %d: token %d is %d (loss %v), transformers %d (mask %d)", i, j, ex.IDs[j], ex.Mask[j], c.InputIDs[j], c.LossMask[j])
			}
		}
		exs = append(exs, ex)
	}
	return exs
}

func i32s(x []int32) []int {
	out := make([]int, len(x))
	for i, v := range x {
		out[i] = int(v)
	}
	return out
}

// TestSFTStepGolden: the tokens and loss mask of two conversations (one with a tool call and
// a tool result, one with two user turns), the per-token loss, the step's loss and every
// parameter's gradient equal what transformers and PyTorch autograd compute on a tiny random
// Llama (scripts/goldens/sft/make_goldens.py). The step runs in micro-batches of one
// conversation, so this also checks that the loss is normalised over the whole batch.
func TestSFTStepGolden(t *testing.T) {
	g := loadSFTGolden(t)
	exs := goldenExamples(t, g)
	ck, err := weights.Load(tinyChat)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cpu.New(), ck)
	if err != nil {
		t.Fatal(err)
	}
	m.ZeroGrads()
	res, err := accumulate(m, model.NewActsCache(m, 3), exs, 1, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tokens != g.LossTokens {
		t.Errorf("%d loss tokens, transformers %d", res.Tokens, g.LossTokens)
	}
	if d := math.Abs(res.Loss - g.Loss); d > 1e-5*math.Abs(g.Loss) {
		t.Errorf("loss %.7f, transformers %.7f", res.Loss, g.Loss)
	}
	var worst float64
	for i, c := range g.Conversations {
		for j, want := range c.TokenLoss {
			worst = math.Max(worst, math.Abs(float64(res.TokenLoss[i][j])-want))
		}
	}
	if worst > 2e-5 {
		t.Errorf("per-token loss differs from transformers' by up to %.2g", worst)
	}
	gf, err := safetensors.Open("testdata/sft-golden.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	for _, p := range m.Grads.Names {
		want, _, err := gf.Float32s("grad." + p.Name)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if e := modeltest.MaxRelErr(p.Data, want); e > 2e-5 {
			t.Errorf("grad %s: max relative error %.2g", p.Name, e)
		}
	}
	t.Logf("loss %.6f (transformers %.6f), per-token loss within %.2g", res.Loss, g.Loss, worst)
}

// TestMicroBatchesAccumulate: the gradient of a batch does not depend on the micro-batch
// size (the loss is the token mean over the whole batch).
func TestMicroBatchesAccumulate(t *testing.T) {
	g := loadSFTGolden(t)
	exs := goldenExamples(t, g)
	grads := func(micro int) []float32 {
		ck, err := weights.Load(tinyChat)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.New(cpu.New(), ck)
		if err != nil {
			t.Fatal(err)
		}
		m.ZeroGrads()
		if _, err := accumulate(m, model.NewActsCache(m, 3), exs, micro, true, false); err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), m.Grads.Data...)
	}
	if e := modeltest.MaxRelErr(grads(2), grads(1)); e > 1e-5 {
		t.Errorf("micro-batch 2 vs 1: max relative gradient difference %.2g", e)
	}
}

var _ = filepath.Join
