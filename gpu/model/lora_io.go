package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/safetensors"
	"github.com/rlhost/rlhost/gpu/weights"
)

// peft's file names in an adapter directory.
const (
	AdapterConfigFile = "adapter_config.json"
	AdapterModelFile  = "adapter_model.safetensors"
)

// adapterConfig is the part of peft's adapter_config.json this package reads
// and writes.
type adapterConfig struct {
	PeftType       string          `json:"peft_type"`
	TaskType       string          `json:"task_type,omitempty"`
	BaseModel      string          `json:"base_model_name_or_path,omitempty"`
	R              int             `json:"r"`
	LoraAlpha      float32         `json:"lora_alpha"`
	TargetModules  json.RawMessage `json:"target_modules"`
	LoraDropout    float32         `json:"lora_dropout"`
	Bias           string          `json:"bias"`
	FanInFanOut    bool            `json:"fan_in_fan_out"`
	UseRSLoRA      bool            `json:"use_rslora"`
	UseDoRA        bool            `json:"use_dora"`
	InferenceMode  bool            `json:"inference_mode"`
	InitLoraWeight bool            `json:"init_lora_weights"`
	RankPattern    map[string]any  `json:"rank_pattern"`
	AlphaPattern   map[string]any  `json:"alpha_pattern"`
	ModulesToSave  []string        `json:"modules_to_save"`
	LayersToTrans  any             `json:"layers_to_transform"`
}

// parseAdapterConfig reads an adapter_config.json into a LoRAConfig. It
// accepts what this package computes: plain LoRA (no DoRA, rsLoRA,
// fan_in_fan_out, per-module rank/alpha patterns, trained biases or extra
// saved modules) on every layer of the targeted Llama/Qwen2 linear modules.
// target_modules may be "all-linear", module names, or full module paths
// (peft writes the paths it resolved "all-linear" to).
func parseAdapterConfig(name string, data []byte) (LoRAConfig, error) {
	var ac adapterConfig
	if err := json.Unmarshal(data, &ac); err != nil {
		return LoRAConfig{}, fmt.Errorf("model: %s: %w", name, err)
	}
	bad := func(format string, args ...any) (LoRAConfig, error) {
		return LoRAConfig{}, fmt.Errorf("model: %s: "+format, append([]any{name}, args...)...)
	}
	switch {
	case ac.PeftType != "LORA":
		return bad("peft_type %q is not supported (want LORA)", ac.PeftType)
	case ac.R <= 0:
		return bad("r = %d, want > 0", ac.R)
	case !(ac.LoraAlpha > 0):
		return bad("lora_alpha = %v, want > 0", ac.LoraAlpha)
	case ac.UseDoRA:
		return bad("use_dora is not supported")
	case ac.UseRSLoRA:
		return bad("use_rslora is not supported")
	case ac.FanInFanOut:
		return bad("fan_in_fan_out is not supported (Llama/Qwen2 linear layers are [out,in])")
	case ac.Bias != "" && ac.Bias != "none":
		return bad("bias %q is not supported (want none)", ac.Bias)
	case len(ac.RankPattern) > 0 || len(ac.AlphaPattern) > 0:
		return bad("rank_pattern / alpha_pattern are not supported")
	case len(ac.ModulesToSave) > 0:
		return bad("modules_to_save %v is not supported", ac.ModulesToSave)
	case ac.LayersToTrans != nil:
		return bad("layers_to_transform is not supported")
	}
	var targets []string
	var one string
	if err := json.Unmarshal(ac.TargetModules, &one); err == nil {
		targets = []string{one}
	} else if err := json.Unmarshal(ac.TargetModules, &targets); err != nil {
		return bad("target_modules: want a string or a list of strings")
	}
	var mods []string
	for _, t := range targets {
		short := t[strings.LastIndex(t, ".")+1:]
		if t != "all-linear" && !slices.Contains(LoRAModules[:], short) {
			return bad("target module %q is not one of %q, %v", t, "all-linear", LoRAModules)
		}
		if t == "all-linear" {
			short = t
		}
		if !slices.Contains(mods, short) {
			mods = append(mods, short)
		}
	}
	if len(mods) == 0 {
		return bad("target_modules is empty")
	}
	return LoRAConfig{Rank: ac.R, Alpha: ac.LoraAlpha, Targets: mods}, nil
}

// LoadLoRA enables LoRA with the adapters of a peft directory
// (adapter_config.json + adapter_model.safetensors, as peft's save_pretrained
// writes them). Every adapter the config implies must be present with its
// shape, and no other tensor. With LoRA already enabled (resuming a run) the
// directory must have the same rank, alpha and target modules, and its values
// replace the adapters in place; on error nothing is changed.
func (m *Model) LoadLoRA(dir string) error {
	cpath := filepath.Join(dir, AdapterConfigFile)
	data, err := os.ReadFile(cpath)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	cfg, err := parseAdapterConfig(cpath, data)
	if err != nil {
		return err
	}
	// the values are read into a host copy of the adapters' layout and
	// uploaded once, after every tensor was checked
	names, resume := []ParamInfo(nil), m.lora != nil
	if resume {
		// resuming: load into the adapters in place (an optimizer built on
		// Trainable stays valid), if the directory has the same shape
		lo := m.lora
		want, _ := targetSet(lo.Config.Targets)
		got, _ := targetSet(cfg.Targets)
		if cfg.Rank != lo.Config.Rank || cfg.Alpha != lo.Config.Alpha || want != got {
			return fmt.Errorf("model: %s: adapters r=%d alpha=%v targets %v do not match the enabled r=%d alpha=%v targets %v",
				cpath, cfg.Rank, cfg.Alpha, cfg.Targets, lo.Config.Rank, lo.Config.Alpha, lo.Config.Targets)
		}
		names = lo.Names
	} else {
		// the names and shapes of cfg's adapters, without allocating them yet
		on, err := targetSet(cfg.Targets)
		if err != nil {
			return fmt.Errorf("%w (in %s)", err, cpath)
		}
		c := m.Config
		for l := 0; l < c.L; l++ {
			for mod := range on {
				if on[mod] {
					in, out := c.linearShape(mod)
					names = append(names, ParamInfo{Name: loraName(l, mod, "A"), Shape: []int{cfg.Rank, in}},
						ParamInfo{Name: loraName(l, mod, "B"), Shape: []int{out, cfg.Rank}})
				}
			}
		}
	}
	n := 0
	for _, p := range names {
		n += p.Shape[0] * p.Shape[1]
	}
	h := make([]float32, n)
	tpath := filepath.Join(dir, AdapterModelFile)
	f, err := safetensors.Open(tpath)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	off := 0 // the views are laid out in order
	for _, p := range names {
		ti, ok := f.Tensor(p.Name)
		if !ok {
			return fmt.Errorf("model: %s: adapter tensor %s is missing", tpath, p.Name)
		}
		if !slices.Equal(ti.Shape, p.Shape) {
			return fmt.Errorf("model: %s: adapter tensor %s has shape %v, want %v (r = %d)", tpath, p.Name, ti.Shape, p.Shape, cfg.Rank)
		}
		x, _, err := f.Float32s(p.Name)
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		k := p.Shape[0] * p.Shape[1]
		copy(h[off:off+k], x)
		off += k
	}
	if len(f.Tensors) != len(names) {
		var extra []string
		for _, ti := range f.Tensors {
			if !slices.ContainsFunc(names, func(p ParamInfo) bool { return p.Name == ti.Name }) {
				extra = append(extra, ti.Name)
			}
		}
		slices.Sort(extra)
		return fmt.Errorf("model: %s: unexpected tensors %v for target modules %v", tpath, extra, cfg.Targets)
	}
	if resume {
		m.be.Upload(m.lora.Data, h) // every tensor checked: commit
		m.lora.Changed()
		return nil
	}
	lo, err := m.newLoRA(cfg)
	if err != nil {
		return fmt.Errorf("%w (in %s)", err, cpath)
	}
	m.be.Upload(lo.Data, h)
	m.lora = lo
	m.dropGrads()
	return nil
}

// LoRACheckpoint returns the adapters under their peft names (a host copy,
// downloaded once) and the adapter_config.json
// content peft's PeftModel.from_pretrained loads them with. base names the
// base model (base_model_name_or_path; may be empty).
func (m *Model) LoRACheckpoint(base string) ([]safetensors.Tensor, []byte, error) {
	lo := m.lora
	if lo == nil {
		return nil, nil, fmt.Errorf("model: LoRA is not enabled")
	}
	on, err := targetSet(lo.Config.Targets)
	if err != nil {
		return nil, nil, err
	}
	var mods []string
	for i, ok := range on {
		if ok {
			mods = append(mods, LoRAModules[i])
		}
	}
	tm, _ := json.Marshal(mods)
	ac := adapterConfig{PeftType: "LORA", TaskType: "CAUSAL_LM", BaseModel: base, R: lo.Config.Rank,
		LoraAlpha: lo.Config.Alpha, TargetModules: tm, Bias: "none", InferenceMode: true, InitLoraWeight: true,
		RankPattern: map[string]any{}, AlphaPattern: map[string]any{}}
	cj, err := json.MarshalIndent(ac, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	h := lo.Host(m.be)
	ts := make([]safetensors.Tensor, len(lo.Names))
	off := 0
	for i, n := range lo.Names {
		ts[i] = safetensors.Tensor{Name: n.Name, Shape: n.Shape, Data: h[off : off+len(n.Data)]}
		off += len(n.Data)
	}
	return ts, append(cj, '\n'), nil
}

// SaveLoRA writes the adapters to dir in peft's layout
// (adapter_model.safetensors, F32, and adapter_config.json).
func (m *Model) SaveLoRA(dir, base string) error {
	ts, cj, err := m.LoRACheckpoint(base)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := safetensors.Write(filepath.Join(dir, AdapterModelFile), ts, safetensors.F32, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, AdapterConfigFile), cj, 0o644); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// MergedCheckpoint returns the parameters as a Hugging Face checkpoint (copies)
// with the adapters merged: W' = W + (Alpha/Rank) B A for every targeted
// layer. Without LoRA it is Params.Checkpoint.
func (m *Model) MergedCheckpoint() *weights.Checkpoint {
	ck := m.Params.Checkpoint(m.HF)
	lo := m.lora
	if lo == nil {
		return ck
	}
	r := lo.Config.Rank
	h := lo.Host(m.be) // the adapters, downloaded once; the merge runs on the host copy
	var at []float32
	for l, ads := range lo.layers {
		for mod, ad := range ads {
			if ad == nil {
				continue
			}
			name := fmt.Sprintf("model.layers.%d.%s%s.weight", l, modulePrefix(mod), LoRAModules[mod])
			w := ck.Tensors[name].Data
			// delta [Out,In] = B [Out,R] (A^T [In,R])^T, as one matmul
			A, B := h[ad.offA:ad.offA+len(ad.A)], h[ad.offB:ad.offB+len(ad.B)]
			at = grow(at, ad.In*r)
			for i := 0; i < r; i++ {
				for j := 0; j < ad.In; j++ {
					at[j*r+i] = A[i*ad.In+j]
				}
			}
			delta := make([]float32, ad.Out*ad.In)
			cpu.New().MatmulForward(delta, B, at, nil, ad.Out, r, ad.In)
			for i, d := range delta {
				w[i] += lo.Scale * d
			}
		}
	}
	return ck
}
