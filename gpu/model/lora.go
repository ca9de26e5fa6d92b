package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// LoRA target modules, in the order of a layer's matmuls.
const (
	modQ = iota
	modK
	modV
	modO
	modGate
	modUp
	modDown
	numMods
)

// LoRAModules are the names of the linear layers LoRA can adapt (peft's
// target_modules); "all-linear" selects every one of them (not lm_head, as in peft).
var LoRAModules = [numMods]string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// LoRAConfig configures low-rank adapters on a frozen base model.
type LoRAConfig struct {
	Rank    int      // r > 0
	Alpha   float32  // the adapter output is scaled by Alpha/Rank
	Targets []string // module names from LoRAModules, or {"all-linear"}
	Seed    uint64   // seeds the initialisation of A
}

// loraAdapter is the adapter of one linear layer out = inp W^T: A [R,In] and
// B [Out,R] are views into LoRA.Data, DA and DB the same views into LoRA.Grad.
type loraAdapter struct {
	A, B, DA, DB []float32
	In, Out      int
}

// LoRA holds every adapter of a model in one flat buffer, with their
// gradients in a second buffer of the same layout, so that the gradient norm
// and AdamW run over the adapters alone (the base gets neither gradients nor
// optimizer moments).
type LoRA struct {
	Config LoRAConfig
	Scale  float32   // Alpha / Rank
	Data   []float32 // every A and B
	Grad   []float32 // their gradients, same layout
	Names  []ParamInfo
	layers [][numMods]*loraAdapter // nil where a module is not targeted
	off    bool                    // SetAdaptersActive(false)

	version uint64 // bumped by AdamW.Update and Changed: generators' cached prompts are stale
}

// Changed records that the adapters were modified in place (AdamW.Update records its
// own): generators drop the prompts they cached with the old adapters. Code that writes
// Data directly must call it.
func (l *LoRA) Changed() { l.version++ }

func (c Config) linearShape(mod int) (in, out int) {
	switch mod {
	case modQ:
		return c.C, c.NH * c.HD
	case modK, modV:
		return c.C, c.NKV * c.HD
	case modO:
		return c.NH * c.HD, c.C
	case modGate, modUp:
		return c.C, c.F
	default:
		return c.F, c.C
	}
}

func modulePrefix(mod int) string {
	if mod <= modO {
		return "self_attn."
	}
	return "mlp."
}

// loraName is the peft name of an adapter tensor, e.g.
// base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight.
func loraName(l, mod int, ab string) string {
	return fmt.Sprintf("base_model.model.model.layers.%d.%s%s.lora_%s.weight", l, modulePrefix(mod), LoRAModules[mod], ab)
}

// targetSet resolves Targets to module indexes.
func targetSet(targets []string) ([numMods]bool, error) {
	var on [numMods]bool
	if len(targets) == 0 {
		return on, fmt.Errorf("model: LoRA needs target modules (%q or some of %v)", "all-linear", LoRAModules)
	}
	for _, t := range targets {
		if t == "all-linear" {
			for i := range on {
				on[i] = true
			}
			continue
		}
		i := slices.Index(LoRAModules[:], t)
		if i < 0 {
			return on, fmt.Errorf("model: unknown LoRA target module %q (want %q or some of %v)", t, "all-linear", LoRAModules)
		}
		on[i] = true
	}
	return on, nil
}

// EnableLoRA freezes the base weights and adds adapters: every targeted
// linear layer computes out = inp W^T (+ b) + (Alpha/Rank) (inp A^T) B^T.
// A is initialised like peft (kaiming_uniform_ with a=sqrt(5), i.e. uniform
// in [-1/sqrt(In), 1/sqrt(In)]) from a stream seeded by Seed; B is zero, so
// the adapted model starts equal to the base. From then on Backward computes
// gradients for the adapters only, Trainable returns the adapters, and
// generation uses them. Any base gradient buffer is released.
func (m *Model) EnableLoRA(cfg LoRAConfig) error {
	lo, err := m.newLoRA(cfg)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x243f6a8885a308d3))
	for _, ads := range lo.layers {
		for _, ad := range ads {
			if ad == nil {
				continue
			}
			bound := 1 / math.Sqrt(float64(ad.In))
			for i := range ad.A {
				ad.A[i] = float32((2*rng.Float64() - 1) * bound)
			}
		}
	}
	m.lora = lo
	m.Grads = nil
	return nil
}

// newLoRA allocates zeroed adapters for cfg.
func (m *Model) newLoRA(cfg LoRAConfig) (*LoRA, error) {
	if m.lora != nil {
		return nil, fmt.Errorf("model: LoRA is already enabled")
	}
	if cfg.Rank <= 0 {
		return nil, fmt.Errorf("model: LoRA rank %d, want > 0", cfg.Rank)
	}
	if !(cfg.Alpha > 0) {
		return nil, fmt.Errorf("model: LoRA alpha %v, want > 0", cfg.Alpha)
	}
	on, err := targetSet(cfg.Targets)
	if err != nil {
		return nil, err
	}
	c := m.Config
	r := cfg.Rank
	n := 0
	for mod := range on {
		if on[mod] {
			in, out := c.linearShape(mod)
			n += c.L * r * (in + out)
		}
	}
	lo := &LoRA{Config: cfg, Scale: cfg.Alpha / float32(r), Data: make([]float32, n), Grad: make([]float32, n)}
	lo.Config.Targets = slices.Clone(cfg.Targets)
	lo.layers = make([][numMods]*loraAdapter, c.L)
	off := 0
	take := func(name string, rows, cols int) ([]float32, []float32) {
		k := rows * cols
		d, g := lo.Data[off:off+k:off+k], lo.Grad[off:off+k:off+k]
		off += k
		lo.Names = append(lo.Names, ParamInfo{Name: name, Shape: []int{rows, cols}, Data: d})
		return d, g
	}
	for l := 0; l < c.L; l++ {
		for mod := range on {
			if !on[mod] {
				continue
			}
			in, out := c.linearShape(mod)
			ad := &loraAdapter{In: in, Out: out}
			ad.A, ad.DA = take(loraName(l, mod, "A"), r, in)
			ad.B, ad.DB = take(loraName(l, mod, "B"), out, r)
			lo.layers[l][mod] = ad
		}
	}
	return lo, nil
}

// LoRA returns the model's adapters, or nil when the whole model trains.
func (m *Model) LoRA() *LoRA { return m.lora }

// Trainable returns the flat buffers AdamW updates and their gradients: the
// adapters with LoRA enabled, otherwise every parameter (grads is nil until
// EnableGrads).
func (m *Model) Trainable() (params, grads []float32) {
	if m.lora != nil {
		return m.lora.Data, m.lora.Grad
	}
	if m.Grads == nil {
		return m.Params.Data, nil
	}
	return m.Params.Data, m.Grads.Data
}

// loraScratch are the buffers of the low-rank products, grown on demand.
type loraScratch struct {
	u, du   []float32 // [N,R]
	tmp, dx []float32 // [N,max(In,Out)]
}

// loraForward adds the adapter's contribution scale*(inp A^T) B^T to out
// [N,Out]. keep, when not nil, receives u = scale*(inp A^T) [N,R] for the
// backward (it is small: R values per token).
func (m *Model) loraForward(s *loraScratch, keep *[]float32, out, inp []float32, ad *loraAdapter, N int) {
	if ad == nil {
		return
	}
	be, r := m.be, m.lora.Config.Rank
	u := &s.u
	if keep != nil {
		u = keep
	}
	*u, s.tmp = grow(*u, N*r), grow(s.tmp, N*ad.Out)
	be.MatmulForward(*u, inp, ad.A, nil, N, ad.In, r)
	be.Scale(*u, m.lora.Scale)
	be.MatmulForward(s.tmp, *u, ad.B, nil, N, r, ad.Out)
	be.ResidualForward(out, out, s.tmp, N*ad.Out)
}

// loraBackward accumulates the adapter's gradients for the output gradient
// dout [N,Out] of the layer whose input was inp [N,In] and whose forward kept
// u = scale*(inp A^T) [N,R], and adds the LoRA path's input gradient to dinp
// [N,In] (which holds the base path's).
func (m *Model) loraBackward(s *loraScratch, dinp, dout, inp, u []float32, ad *loraAdapter, N int) {
	if ad == nil {
		return
	}
	be, r, sc := m.be, m.lora.Config.Rank, m.lora.Scale
	s.du, s.dx = grow(s.du, N*r), grow(s.dx, N*ad.In)
	be.MatmulBackward(s.du, ad.DB, nil, dout, u, ad.B, N, r, ad.Out) // dB += dout^T u; du = dout B
	be.Scale(s.du, sc)
	be.MatmulBackward(s.dx, ad.DA, nil, s.du, inp, ad.A, N, ad.In, r) // dA += du^T inp; dx = du A
	be.ResidualForward(dinp, dinp, s.dx, N*ad.In)
}

// SetAdaptersActive turns the adapters off (false) or back on (true) for
// Forward and generation: with them off the model computes its frozen base,
// which is the reference policy of a LoRA run, so no second copy of the base
// is needed (peft's disable_adapter). The base stays frozen either way; run
// Backward only after a Forward with the adapters on.
func (m *Model) SetAdaptersActive(on bool) {
	if m.lora != nil {
		m.lora.off = !on
	}
}

// adapter returns layer l's adapter of mod, or nil.
func (m *Model) adapter(l, mod int) *loraAdapter {
	if m.lora == nil || m.lora.off {
		return nil
	}
	return m.lora.layers[l][mod]
}
