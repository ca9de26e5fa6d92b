package algo

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/safetensors"
	"github.com/rlhost/rlhost/gpu/weights"
)

// familyTestdata holds the tiny checkpoints of scripts/goldens/model/make_family_goldens.py.
const familyTestdata = "../../gpu/model/testdata"

// familyGolden is the part of NAME-golden.json the GRPO gradient needs.
type familyGolden struct {
	B, T    int
	Targets [][]int32 `json:"targets"`
	Tokens  [][]int32 `json:"tokens"`
	GRPO    struct {
		OldLogp  [][]float32 `json:"old_logp"`
		RefLogp  [][]float32 `json:"ref_logp"`
		Adv      [][]float32 `json:"adv"`
		Clip     float64     `json:"clip"`
		ClipC    float64     `json:"clip_c"`
		KLCoef   float64     `json:"kl_coef"`
		KLType   string      `json:"kl_type"`
		Agg      string      `json:"agg"`
		Loss     float64     `json:"loss"`
		LoRALoss float64     `json:"lora_loss"`
	} `json:"grpo"`
}

func flat32[T any](x [][]T) []T {
	var out []T
	for _, r := range x {
		out = append(out, r...)
	}
	return out
}

// TestGRPOGradientFamilies: for every family, the gradient of one GRPO actor loss (veRL's
// clipped ratio with dual clip and the low_var_kl loss, token-mean; ActorLoss, as the
// trainer computes it) through the model's backward equals PyTorch autograd's, parameter by
// parameter, with the whole model training and with LoRA adapters on every linear layer.
// Tolerance: 1e-3 of the tensor's largest gradient (float32 sums in a different order;
// a wrong gradient is off by O(1)).
func TestGRPOGradientFamilies(t *testing.T) {
	for _, name := range []string{"tiny-qwen3", "tiny-qwen3-yarn", "tiny-llama3", "tiny-mistral", "tiny-gemma3", "tiny-gemma3-capped"} {
		t.Run(name, func(t *testing.T) {
			var g familyGolden
			b, err := os.ReadFile(filepath.Join(familyTestdata, name+"-golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			gt, err := safetensors.Open(filepath.Join(familyTestdata, name+"-golden.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer gt.Close()
			want := func(key string) []float32 {
				x, _, err := gt.Float32s(key)
				if err != nil {
					t.Fatal(err)
				}
				return x
			}
			cfg := ActorLossConfig{
				Policy:    PolicyLossConfig{ClipLow: g.GRPO.Clip, ClipHigh: g.GRPO.Clip, ClipC: g.GRPO.ClipC, AggMode: g.GRPO.Agg},
				UseKLLoss: true, KLLossCoef: g.GRPO.KLCoef, KLLossType: g.GRPO.KLType,
			}
			if err := cfg.Check(); err != nil {
				t.Fatal(err)
			}
			targets := flat32(g.Targets)
			mask := make([]float32, len(targets))
			for i, tg := range targets {
				if tg >= 0 {
					mask[i] = 1
				}
			}
			N := g.B * g.T
			// step runs the loss on m's forward and its backward; it returns the loss
			step := func(m *model.Model) float64 {
				a := m.NewActs(g.B, g.T)
				defer a.Free()
				if err := m.Forward(a, model.Batch{B: g.B, T: g.T, Tokens: flat32(g.Tokens), Targets: targets}); err != nil {
					t.Fatal(err)
				}
				r := ActorLoss(a.Logp, a.Entropy, flat32(g.GRPO.OldLogp), flat32(g.GRPO.RefLogp), flat32(g.GRPO.Adv), mask, g.B, g.T, cfg)
				m.ZeroGrads()
				if err := m.Backward(a, r.DLogp, r.DEntropy[:N]); err != nil {
					t.Fatal(err)
				}
				return r.Loss
			}
			check := func(what string, got, want []float32) {
				t.Helper()
				var d, mx float64
				for i := range want {
					d = math.Max(d, math.Abs(float64(got[i])-float64(want[i])))
					mx = math.Max(mx, math.Abs(float64(want[i])))
				}
				if len(got) != len(want) || d > 1e-3*mx || math.IsNaN(d) {
					t.Errorf("%s: max error %.3g of %.3g", what, d, mx)
				}
			}
			load := func() *model.Model {
				ck, err := weights.Load(filepath.Join(familyTestdata, name))
				if err != nil {
					t.Fatal(err)
				}
				m, err := model.New(cpu.New(), ck)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}

			m := load()
			if loss := step(m); math.Abs(loss-g.GRPO.Loss) > 1e-5*math.Max(1, math.Abs(g.GRPO.Loss)) {
				t.Errorf("loss %v, want %v", loss, g.GRPO.Loss)
			}
			grads := m.Grads.Host()
			off := 0
			for _, p := range m.Grads.Names {
				check("grad "+p.Name, grads[off:off+len(p.Data)], want("grpo.grad."+p.Name))
				off += len(p.Data)
			}

			m = load()
			if err := m.LoadLoRA(filepath.Join(familyTestdata, name+"-lora")); err != nil {
				t.Fatal(err)
			}
			if loss := step(m); math.Abs(loss-g.GRPO.LoRALoss) > 1e-5*math.Max(1, math.Abs(g.GRPO.LoRALoss)) {
				t.Errorf("LoRA: loss %v, want %v", loss, g.GRPO.LoRALoss)
			}
			lo := m.LoRA()
			nlora := 0
			for _, ti := range gt.Tensors {
				if strings.HasPrefix(ti.Name, "lora.grpo.grad.") {
					nlora++
				}
			}
			if len(lo.Names) != nlora || nlora == 0 {
				t.Fatalf("LoRA: %d adapter tensors, the golden has %d", len(lo.Names), nlora)
			}
			lgrad := make([]float32, len(lo.Grad))
			m.Backend().Download(lgrad, lo.Grad)
			off = 0
			for _, p := range lo.Names {
				check("LoRA grad "+p.Name, lgrad[off:off+len(p.Data)], want("lora.grpo.grad."+p.Name))
				off += len(p.Data)
			}
		})
	}
}
