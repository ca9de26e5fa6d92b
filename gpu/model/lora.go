package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rlhost/rlhost/gpu"
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
// B [Out,R] are views into LoRA.Data, DA and DB the same views into LoRA.Grad;
// offA and offB are the offsets of A and B in LoRA.Data.
type loraAdapter struct {
	A, B, DA, DB []float32
	In, Out      int
	offA, offB   int
}

// LoRA holds every adapter of a model in one flat tensor of the model's
// backend, with their gradients in a second tensor of the same layout, so
// that the gradient norm and AdamW run over the adapters alone (the base
// gets neither gradients nor optimizer moments). Both are allocated once
// (EnableLoRA, LoadLoRA) and stay on the backend: on a GPU the host reads
// them only through Host (checkpoints) and writes them through Upload.
type LoRA struct {
	Config LoRAConfig
	Scale  float32                 // Alpha / Rank
	Data   []float32               // every A and B; a backend tensor
	Grad   []float32               // their gradients, same layout; a backend tensor
	Names  []ParamInfo             // views of Data (backend memory), in the order of Data
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
	init := make([]float32, len(lo.Data)) // built on the host, uploaded once
	for _, ads := range lo.layers {
		for _, ad := range ads {
			if ad == nil {
				continue
			}
			bound := 1 / math.Sqrt(float64(ad.In))
			a := init[ad.offA : ad.offA+len(ad.A)]
			for i := range a {
				a[i] = float32((2*rng.Float64() - 1) * bound)
			}
		}
	}
	m.be.Upload(lo.Data, init)
	m.lora = lo
	m.dropGrads()
	return nil
}

// newLoRA allocates zeroed adapters for cfg on the model's backend (out of
// device memory is its error; free releases them).
func (m *Model) newLoRA(cfg LoRAConfig) (lo *LoRA, err error) {
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
	defer gpu.RecoverMemory(&err)
	lo = &LoRA{Config: cfg, Scale: cfg.Alpha / float32(r), Data: m.be.Alloc("LoRA adapters", n)}
	lo.Grad = m.be.Alloc("LoRA gradients", n)
	lo.Config.Targets = slices.Clone(cfg.Targets)
	lo.layers = make([][numMods]*loraAdapter, c.L)
	off := 0
	take := func(name string, rows, cols int) ([]float32, []float32, int) {
		k, at := rows*cols, off
		d, g := lo.Data[off:off+k:off+k], lo.Grad[off:off+k:off+k]
		off += k
		lo.Names = append(lo.Names, ParamInfo{Name: name, Shape: []int{rows, cols}, Data: d})
		return d, g, at
	}
	for l := 0; l < c.L; l++ {
		for mod := range on {
			if !on[mod] {
				continue
			}
			in, out := c.linearShape(mod)
			ad := &loraAdapter{In: in, Out: out}
			ad.A, ad.DA, ad.offA = take(loraName(l, mod, "A"), r, in)
			ad.B, ad.DB, ad.offB = take(loraName(l, mod, "B"), out, r)
			lo.layers[l][mod] = ad
		}
	}
	return lo, nil
}

// free gives the adapters' tensors back to the backend.
func (l *LoRA) free(be gpu.Backend) {
	be.Free(l.Data)
	be.Free(l.Grad)
}

// Host returns a host copy of the adapters (Data's layout): one download.
func (l *LoRA) Host(be gpu.Backend) []float32 {
	h := make([]float32, len(l.Data))
	be.Download(h, l.Data)
	return h
}

// dropGrads releases the base gradients (the base is frozen under LoRA).
func (m *Model) dropGrads() {
	if m.Grads != nil {
		m.be.Free(m.Grads.Data)
		m.Grads = nil
	}
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

// loraScratch are the buffers of the low-rank products: tensors of the
// model's backend, grown on demand (doubling, so a generator's steps stop
// allocating once warm) and given back by free.
type loraScratch struct {
	be    gpu.Backend
	u, du []float32 // [N,R]
	tmp   []float32 // [N,Out] (the forward's B product; the backward adds into dinp directly)
	kept  [][]float32
}

// tensor returns *b with n floats, replacing it by a larger backend tensor
// when it is too small.
func (s *loraScratch) tensor(b *[]float32, n int, name string) []float32 {
	if cap(*b) < n {
		if *b != nil {
			s.be.Free((*b)[:cap(*b)])
		}
		*b = s.be.Alloc("LoRA scratch: "+name, max(n, 2*cap(*b)))
	}
	return (*b)[:n]
}

// keep returns *b with n floats, replacing it by a tensor of n when it is
// too small (the per-layer products a training forward keeps for its
// backward; *b stays the whole tensor, so a smaller batch reuses it).
func (s *loraScratch) keep(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		if *b != nil {
			s.be.Free((*b)[:cap(*b)])
			s.kept = slices.DeleteFunc(s.kept, func(x []float32) bool { return &x[0] == &(*b)[0] })
		}
		*b = s.be.Alloc("LoRA activations: inp A^T", n)
		s.kept = append(s.kept, *b)
	}
	return (*b)[:n]
}

// free gives every scratch tensor back.
func (s *loraScratch) free() {
	if s.be == nil {
		return
	}
	for _, b := range []*[]float32{&s.u, &s.du, &s.tmp} {
		if *b != nil {
			s.be.Free((*b)[:cap(*b)])
			*b = nil
		}
	}
	for _, x := range s.kept {
		s.be.Free(x)
	}
	s.kept = nil
}

// loraForward adds the adapter's contribution scale*(inp A^T) B^T to out
// [N,Out]. keep, when not nil, receives u = scale*(inp A^T) [N,R] for the
// backward (it is small: R values per token).
func (m *Model) loraForward(s *loraScratch, keep *[]float32, out, inp []float32, ad *loraAdapter, N int) {
	if ad == nil {
		return
	}
	be, r := m.be, m.lora.Config.Rank
	s.be = be
	var u []float32
	if keep != nil {
		u = s.keep(keep, N*r)
	} else {
		u = s.tensor(&s.u, N*r, "u")
	}
	tmp := s.tensor(&s.tmp, N*ad.Out, "tmp")
	be.MatmulForward(u, inp, ad.A, nil, N, ad.In, r)
	be.Scale(u, m.lora.Scale)
	be.MatmulForward(tmp, u, ad.B, nil, N, r, ad.Out)
	be.ResidualForward(out, out, tmp, N*ad.Out)
}

// loraBackward accumulates the adapter's gradients for the output gradient
// dout [N,Out] of the layer whose input was inp [N,In] and whose forward kept
// u = scale*(inp A^T) [N,R], and adds the LoRA path's input gradient to dinp
// [N,In] (which holds the base path's).
func (m *Model) loraBackward(s *loraScratch, dinp, dout, inp, u []float32, ad *loraAdapter, N int) {
	if ad == nil {
		return
	}
	du := m.loraDU(s, dout, u, ad, N)
	m.be.MatmulBackward(dinp, ad.DA, nil, du, inp, ad.A, N, ad.In, m.lora.Config.Rank, true) // dA += du^T inp; dinp += du A
}

// loraDU accumulates dB += dout^T u and returns du = scale * dout B [N,R]
// (in the scratch, valid until the next adapter's backward).
func (m *Model) loraDU(s *loraScratch, dout, u []float32, ad *loraAdapter, N int) []float32 {
	be, r := m.be, m.lora.Config.Rank
	s.be = be
	du := s.tensor(&s.du, N*r, "du")
	be.MatmulBackward(du, ad.DB, nil, dout, u, ad.B, N, r, ad.Out, false) // dB += dout^T u; du = dout B
	be.Scale(du, m.lora.Scale)
	return du
}

// loraBackwardInput is loraBackward without dA += du^T inp, the one part
// that reads the layer's input: it accumulates dB, adds the LoRA path's
// input gradient to dinp and returns du [N,R] (in the scratch, valid until
// the next adapter's backward) for loraBackwardA, once inp is at hand. The
// training step's down projection needs it: its input h is recomputed
// after its input gradient (SwiGLUBackwardH). nil without an adapter.
func (m *Model) loraBackwardInput(s *loraScratch, dinp, dout, u []float32, ad *loraAdapter, N int) []float32 {
	if ad == nil {
		return nil
	}
	du := m.loraDU(s, dout, u, ad, N)
	m.be.MatmulBackward(dinp, nil, nil, du, nil, ad.A, N, ad.In, m.lora.Config.Rank, true) // dinp += du A
	return du
}

// loraBackwardA is the rest of loraBackward after loraBackwardInput (du
// its result): dA += du^T inp.
func (m *Model) loraBackwardA(du, inp []float32, ad *loraAdapter, N int) {
	if ad == nil {
		return
	}
	m.be.MatmulBackward(nil, ad.DA, nil, du, inp, ad.A, N, ad.In, m.lora.Config.Rank, false)
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
