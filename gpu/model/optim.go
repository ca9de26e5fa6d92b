package model

import (
	"fmt"

	"github.com/rlhost/rlhost/gpu"
)

// AdamWConfig are torch.optim.AdamW's settings plus gradient-norm clipping.
type AdamWConfig struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	MaxGradNorm                        float32 // <= 0: no clipping
}

// AdamW is the optimizer state of a model: first and second moments in the
// parameters' flat layout, tensors of the model's backend.
type AdamW struct {
	Config AdamWConfig
	Step   int
	MomentPair
}

// NewAdamW returns a fresh optimizer for m's trainable parameters
// (m.Trainable: the adapters once LoRA is enabled, otherwise every parameter).
func NewAdamW(m *Model, cfg AdamWConfig) *AdamW {
	params, _ := m.Trainable()
	n := len(params)
	return &AdamW{Config: cfg, MomentPair: NewMomentPair(m.be, n, "AdamW")}
}

// Update clips the gradients of m.Trainable to the configured global norm
// and applies one AdamW step to those parameters. It returns the gradient
// norm before clipping. On a backend with gpu.ClippedAdamW the clipping is
// applied as the update reads the gradients, which are left unscaled.
func (o *AdamW) Update(m *Model) (float64, error) {
	params, grads := m.Trainable()
	if grads == nil {
		return 0, fmt.Errorf("model: AdamW update without gradients")
	}
	if len(o.m) != len(params) {
		return 0, fmt.Errorf("model: optimizer state has %d values, the model's trainable parameters %d", len(o.m), len(params))
	}
	be, c := m.be, o.Config
	o.Step++
	var norm float64
	if ca, ok := be.(gpu.ClippedAdamW); ok { // the clipping inside the update's pass (the same values; grads unscaled)
		norm = ca.ClipAdamW(params, grads, o.m, o.v, o.Step, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay, c.MaxGradNorm)
	} else {
		norm = gpu.ClipGradNorm(be, grads, c.MaxGradNorm)
		be.AdamW(params, grads, o.m, o.v, o.Step, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay)
	}
	if m.lora == nil { // the base weights moved: generator copies are refreshed (lowp.go)
		m.Params.Changed()
	} else {
		m.lora.Changed() // the adapters moved: generators forget their cached prompts
	}
	return norm, nil
}
