package model

import (
	"math"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/weights"
)

// Model is a Llama/Qwen2 decoder with its parameters and their gradients.
type Model struct {
	Config Config
	HF     weights.Config // the config it was built from, for saving
	Params *Params
	Grads  *Params // same layout as Params; nil until EnableGrads, and always nil with LoRA
	Rope   gpu.RopeLayout
	be     gpu.Backend
	cos    []float32 // [MaxPos, HD/2] tensor of be
	sin    []float32 // [MaxPos, HD/2] tensor of be
	lora   *LoRA     // adapters on the frozen Params; nil: every parameter trains
}

// New builds a model from a checkpoint, copying its weights to the
// backend (one upload). A backend out of memory is an error (*gpu.MemoryError).
func New(be gpu.Backend, ck *weights.Checkpoint) (m *Model, err error) {
	defer gpu.RecoverMemory(&err)
	c, err := ConfigFrom(ck.Config)
	if err != nil {
		if ck.Source != "" {
			return nil, &sourceError{ck.Source, err}
		}
		return nil, err
	}
	m = NewZero(be, c)
	m.HF = ck.Config
	if err := m.Params.Load(ck); err != nil {
		return nil, err
	}
	return m, nil
}

type sourceError struct {
	src string
	err error
}

func (e *sourceError) Error() string { return e.err.Error() + " (in " + e.src + ")" }
func (e *sourceError) Unwrap() error { return e.err }

// NewZero builds a model with zeroed parameters (for benchmarks and for
// filling in by hand).
func NewZero(be gpu.Backend, c Config) *Model {
	m := &Model{Config: c, Params: NewParams(be, c, "parameters"), be: be, Rope: gpu.RopeHalf}
	cos, sin := ropeTables(c.MaxPos, c.HD, c.RopeTheta)
	m.cos, m.sin = be.Alloc("RoPE cos table", len(cos)), be.Alloc("RoPE sin table", len(sin))
	be.Upload(m.cos, cos)
	be.Upload(m.sin, sin)
	return m
}

// Backend is the backend the model computes on.
func (m *Model) Backend() gpu.Backend { return m.be }

// EnableGrads allocates the gradient buffers (zeroed). With LoRA enabled the
// base is frozen and only the adapters have gradients (LoRA.Grad).
func (m *Model) EnableGrads() {
	if m.Grads == nil && m.lora == nil {
		m.Grads = NewParams(m.be, m.Config, "gradients")
	}
}

// ZeroGrads clears the gradients (the adapters' with LoRA enabled).
func (m *Model) ZeroGrads() {
	if m.lora != nil {
		m.be.Zero(m.lora.Grad)
		return
	}
	m.EnableGrads()
	m.be.Zero(m.Grads.Data)
}

// ropeTables computes cos and sin [P, HD/2] of pos*inv_freq[i] the way
// transformers does in float32: inv_freq = 1/theta^(2i/HD), angle = pos*inv_freq.
func ropeTables(P, HD int, theta float64) (cos, sin []float32) {
	half := HD / 2
	cos, sin = make([]float32, P*half), make([]float32, P*half)
	inv := make([]float32, half)
	for i := range inv {
		e := float32(2*i) / float32(HD)
		inv[i] = 1 / float32(math.Pow(theta, float64(e)))
	}
	for p := 0; p < P; p++ {
		for i, f := range inv {
			a := float64(float32(p) * f)
			cos[p*half+i] = float32(math.Cos(a))
			sin[p*half+i] = float32(math.Sin(a))
		}
	}
	return cos, sin
}

// FallBackEOS makes id (a tokenizer's eos; < 0: none) the end-of-sequence id when the
// checkpoint declares none (config.json's and generation_config.json's eos_token_id
// absent, null or [], a GGUF without tokenizer.ggml.eos_token_id), and reports whether it
// did: without it generation would stop at no id but a request's own stop tokens.
func (m *Model) FallBackEOS(id int) bool {
	if m.Config.EOS >= 0 || len(m.Config.MoreEOS) > 0 {
		return false
	}
	m.Config.EOS = id
	return true
}
