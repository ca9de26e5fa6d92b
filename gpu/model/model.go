package model

import (
	"fmt"
	"math"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/weights"
)

// Model is a decoder (one of weights.Families) with its parameters and their gradients.
type Model struct {
	Config Config
	HF     weights.Config // the config it was built from, for saving
	Params *Params
	Grads  *Params // same layout as Params; nil until EnableGrads, and always nil with LoRA
	Rope   gpu.RopeLayout
	be     gpu.Backend
	cos    []float32 // [MaxPos, HD/2] tensor of be
	sin    []float32 // [MaxPos, HD/2] tensor of be
	// the sliding-window layers' tables where their RoPE base differs (gemma3_text's
	// rope_local_base_freq); nil otherwise
	cosL, sinL []float32
	lora       *LoRA // adapters on the frozen Params; nil: every parameter trains
	// norms holds the weights the RMSNorms multiply by when the family offsets them
	// (Config.NormOffset: gemma3_text's 1 + weight), kept current with Params
	norms *normWeights
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
// A RoPE scaling the models do not compute panics (ConfigFrom rejects it first).
func NewZero(be gpu.Backend, c Config) *Model {
	m := &Model{Config: c, Params: NewParams(be, c, "parameters"), be: be, Rope: gpu.RopeHalf}
	upload := func(theta float64, scaling *weights.RopeScaling, what string) (cosD, sinD []float32) {
		cos, sin, err := ropeTables(c.MaxPos, c.HD, theta, scaling, c.MaxPos)
		if err != nil {
			panic(err)
		}
		cosD, sinD = be.Alloc("RoPE cos table"+what, len(cos)), be.Alloc("RoPE sin table"+what, len(sin))
		be.Upload(cosD, cos)
		be.Upload(sinD, sin)
		return cosD, sinD
	}
	m.cos, m.sin = upload(c.RopeTheta, c.RopeScaling, "")
	if c.LocalRopeTheta > 0 {
		m.cosL, m.sinL = upload(c.LocalRopeTheta, nil, " (sliding-window layers)")
	}
	return m
}

// rope is layer l's RoPE tables: the sliding-window layers' own where the family has
// them (gemma3_text), else the model's.
func (m *Model) rope(l int) (cos, sin []float32) {
	if m.Config.localRope(l) {
		return m.cosL, m.sinL
	}
	return m.cos, m.sin
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
// transformers does in float32 (angle = pos*inv_freq, cos and sin times the
// scaling's attention factor), inv_freq from ropeInvFreq.
func ropeTables(P, HD int, theta float64, scaling *weights.RopeScaling, maxPos int) (cos, sin []float32, err error) {
	inv, attn, err := ropeInvFreq(HD, theta, scaling, maxPos)
	if err != nil {
		return nil, nil, err
	}
	half := HD / 2
	cos, sin = make([]float32, P*half), make([]float32, P*half)
	for p := 0; p < P; p++ {
		for i, f := range inv {
			a := float64(float32(p) * f)
			cos[p*half+i] = float32(math.Cos(a)) * attn
			sin[p*half+i] = float32(math.Sin(a)) * attn
		}
	}
	return cos, sin, nil
}

// ropeInvFreq is transformers' inverse frequencies of RoPE (modeling_rope_utils.py) for a
// head of HD channels and base theta, in float32: 1/theta^(2i/HD), rescaled by scaling
// (llama3, linear, yarn; nil: none), and the factor cos and sin are multiplied by (yarn's
// attention factor; 1 otherwise). maxPos is the config's max_position_embeddings, yarn's
// original context when its parameters leave it out.
func ropeInvFreq(HD int, theta float64, scaling *weights.RopeScaling, maxPos int) (inv []float32, attn float32, err error) {
	half := HD / 2
	inv = make([]float32, half)
	for i := range inv {
		e := float32(2*i) / float32(HD)
		inv[i] = 1 / float32(math.Pow(theta, float64(e)))
	}
	if scaling == nil {
		return inv, 1, nil
	}
	s := *scaling
	factor := s.Factor
	switch s.Type {
	case "linear":
		for i := range inv {
			inv[i] = float32(float64(inv[i]) / factor)
		}
		return inv, 1, nil
	case "llama3":
		old := float64(s.OriginalMaxPositionEmbeddings)
		lowWave, highWave := old/s.LowFreqFactor, old/s.HighFreqFactor
		for i, f := range inv {
			wave := float32(2 * math.Pi / float64(f))
			scaled := f
			if float64(wave) > lowWave {
				scaled = float32(float64(f) / factor)
			}
			if float64(wave) >= highWave && float64(wave) <= lowWave { // the band between: smooth
				smooth := float32((old/float64(wave) - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor))
				scaled = (1-smooth)*float32(float64(scaled)/factor) + smooth*scaled
			}
			inv[i] = scaled
		}
		return inv, 1, nil
	case "yarn":
		orig := float64(s.OriginalMaxPositionEmbeddings)
		if orig == 0 {
			orig = float64(maxPos)
		}
		mscale := func(scale, m float64) float64 {
			if scale <= 1 {
				return 1
			}
			return 0.1*m*math.Log(scale) + 1
		}
		attnF := s.AttentionFactor
		if attnF == 0 {
			if s.Mscale != 0 && s.MscaleAllDim != 0 {
				attnF = mscale(factor, s.Mscale) / mscale(factor, s.MscaleAllDim)
			} else {
				attnF = mscale(factor, 1)
			}
		}
		betaFast, betaSlow := s.BetaFast, s.BetaSlow
		if betaFast == 0 {
			betaFast = 32
		}
		if betaSlow == 0 {
			betaSlow = 1
		}
		dim := float64(HD)
		corr := func(rot float64) float64 {
			return dim * math.Log(orig/(rot*2*math.Pi)) / (2 * math.Log(theta))
		}
		low, high := corr(betaFast), corr(betaSlow)
		if s.Truncate == nil || *s.Truncate {
			low, high = math.Floor(low), math.Ceil(high)
		}
		low, high = max(low, 0), min(high, dim-1)
		if low == high {
			high += 0.001
		}
		for i, f := range inv {
			ramp := float32((float64(float32(i)) - low) / (high - low))
			ramp = min(max(ramp, 0), 1)
			extra := 1 - ramp                                                  // the share of the extrapolated (unscaled) frequency
			pos := float32(math.Pow(theta, float64(float32(2*i)/float32(HD)))) // theta^(2i/HD)
			interp := 1 / (float32(factor) * pos)
			inv[i] = interp*(1-extra) + f*extra
		}
		return inv, float32(attnF), nil
	}
	return nil, 0, fmt.Errorf("model: rope_scaling rope_type %q is not supported (supported: %v)", s.Type, weights.RopeTypes)
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
