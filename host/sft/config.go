package sft

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/sdk/suggest"
	"gopkg.in/yaml.v3"
)

// Config is the configuration of rlhost sft, with the keys of veRL's SFT trainer
// (verl/trainer/config/sft_trainer.yaml) where veRL has them.
type Config struct {
	Data    DataConfig    `yaml:"data"`
	Model   ModelConfig   `yaml:"model"`
	Optim   OptimConfig   `yaml:"optim"`
	Trainer TrainerConfig `yaml:"trainer"`
}

// DataConfig is the data section.
type DataConfig struct {
	TrainFiles              StringList      `yaml:"train_files" doc:"SFT parquet files: a messages column (and optionally tools), or input_ids + loss_mask token rows"`
	ValFiles                StringList      `yaml:"val_files" doc:"validation parquet files (same formats); empty: no validation loss"`
	TrainBatchSize          int             `yaml:"train_batch_size" doc:"conversations per optimiser step"`
	MicroBatchSizePerGPU    int             `yaml:"micro_batch_size_per_gpu" doc:"conversations per forward/backward; gradients accumulate over the batch"`
	MaxLength               int             `yaml:"max_length" doc:"longest tokenised conversation; longer rows are skipped (reason too_long), never cut"`
	Truncation              string          `yaml:"truncation" enum:"error|skip" doc:"an over-long row: error stops with the file and row, skip skips and counts it (veRL: error, left, right)"`
	MessagesKey             string          `yaml:"messages_key" doc:"column of the conversation (newer veRL spelling of multiturn.messages_key; empty: use multiturn.messages_key)"`
	ToolsKey                string          `yaml:"tools_key" doc:"column of the tool schemas (empty: use multiturn.tools_key)"`
	Multiturn               MultiturnConfig `yaml:"multiturn"`
	Shuffle                 bool            `yaml:"shuffle" doc:"shuffle the training rows every epoch"`
	Seed                    int             `yaml:"seed" doc:"seed of the shuffle"`
	ValMaxSamples           int             `yaml:"val_max_samples" doc:"validate on the first N usable rows; 0 = all"`
	ApplyChatTemplateKwargs map[string]any  `yaml:"apply_chat_template_kwargs" doc:"free-form map: extra variables of the chat template, as rlhost train's data.apply_chat_template_kwargs (veRL passes them to apply_chat_template), e.g. {enable_thinking: false} for Qwen3"`
}

// Multiturn is data.multiturn.
type MultiturnConfig struct {
	Enable      bool   `yaml:"enable" doc:"accepted for veRL compatibility: rlhost always reads conversations"`
	MessagesKey string `yaml:"messages_key" doc:"column of the conversation: a list of {role, content, tool_calls, tool_call_id, name}"`
	ToolsKey    string `yaml:"tools_key" doc:"column of the OpenAI tool schemas (a list or a JSON string); rows without it declare no tools"`
	// ToolCallsAsText writes an assistant turn's tool_calls into its content as Hermes text
	// when the chat template does not render tool calls (SmolLM2's); off, such rows are skipped.
	ToolCallsAsText bool   `yaml:"tool_calls_as_text" doc:"when the chat template ignores tool_calls, write them into the content as text in data.multiturn.format (what the rollout's parser reads; hermes: <tool_call> blocks); false skips such rows"`
	Format          string `yaml:"format" enum:"auto|hermes|llama3_json|mistral" doc:"tool-call format of the model, as rlhost train's actor_rollout_ref.rollout.multi_turn.format: what tool calls written in an assistant's content are read as, and what tool_calls_as_text writes; auto = from the chat template and special tokens, hermes when they name no other format"`
}

// ModelConfig is the model section.
type ModelConfig struct {
	PartialPretrain string     `yaml:"partial_pretrain" doc:"the starting checkpoint: GGUF file or Hugging Face directory (the default is looked up where make model installs it)"`
	LoraRank        int        `yaml:"lora_rank" doc:"LoRA rank; 0 trains all weights"`
	LoraAlpha       float64    `yaml:"lora_alpha" doc:"LoRA alpha (the update is scaled by lora_alpha/lora_rank)"`
	TargetModules   StringList `yaml:"target_modules" doc:"modules that get LoRA adapters: all-linear or a list of projection names"`
	FSDPConfig      FSDPConfig `yaml:"fsdp_config"` // only mixed_precision.param_dtype has an effect
	// Accepted without effect (veRL's FSDP and kernel options).
	EnableGradientCheckpointing bool   `yaml:"enable_gradient_checkpointing" doc:"accepted for veRL compatibility; no effect"`
	TrustRemoteCode             bool   `yaml:"trust_remote_code" doc:"accepted for veRL compatibility; no effect"`
	UseLiger                    bool   `yaml:"use_liger" doc:"accepted for veRL compatibility; no effect"`
	Strategy                    string `yaml:"strategy" doc:"accepted for veRL compatibility; no effect"`
	ExternalLib                 string `yaml:"external_lib" doc:"accepted for veRL compatibility; no effect"`
}

// FSDPConfig is model.fsdp_config, veRL's FSDP options. Only
// mixed_precision.param_dtype has an effect: how the products compute on CUDA.
type FSDPConfig struct {
	MixedPrecision MixedPrecisionConfig `yaml:"mixed_precision"`
	// Other holds veRL's other FSDP options (model_dtype, wrap_policy, cpu_offload, ...).
	Other map[string]any `yaml:",inline" doc:"veRL's other FSDP options (model_dtype, wrap_policy, cpu_offload, offload_params, ...): accepted for veRL compatibility; no effect (the master weights are float32, as veRL's default model_dtype fp32)"`
}

// MixedPrecisionConfig is model.fsdp_config.mixed_precision.
type MixedPrecisionConfig struct {
	ParamDtype  string `yaml:"param_dtype" enum:"bfloat16|bf16|tf32|float32|fp32" doc:"how the matrix products compute on trainer.device=cuda, as rlhost train's actor_rollout_ref.actor.dtype (docs/gpu.md, Mixed precision): bfloat16 = cublasGemmEx on bfloat16 copies of the weights and activations, fp32 accumulation and output; tf32 = fp32 tensors on TF32 tensor cores; float32 = cublasSgemm. Master weights, gradients, AdamW moments, the loss and reductions stay float32 in every mode; the run prints the path. trainer.device=cpu computes in float32 whatever this says. veRL's FSDP param_dtype (the dtype FSDP casts the parameters to for forward and backward; its SFT trainer computes in bf16 over fp32 model_dtype weights); null reads as bfloat16, veRL's default"`
	ReduceDtype string `yaml:"reduce_dtype" doc:"accepted for veRL compatibility; no effect (gradients and reductions are float32)"`
	BufferDtype string `yaml:"buffer_dtype" doc:"accepted for veRL compatibility; no effect"`
}

// ParamDtypeKey is the key of the products' precision on CUDA.
const ParamDtypeKey = "model.fsdp_config.mixed_precision.param_dtype"

// OptimConfig is the optim section (AdamW).
type OptimConfig struct {
	LR               float64   `yaml:"lr" doc:"AdamW learning rate"`
	Betas            []float64 `yaml:"betas" doc:"AdamW (beta1, beta2)"`
	Eps              float64   `yaml:"eps" doc:"AdamW epsilon"`
	WeightDecay      float64   `yaml:"weight_decay" doc:"AdamW decoupled weight decay"`
	WarmupStepsRatio float64   `yaml:"warmup_steps_ratio" doc:"linear warm-up over this fraction of the training steps"`
	ClipGrad         float64   `yaml:"clip_grad" doc:"clip the global gradient norm to this value; 0 = no clipping"`
	LRScheduler      string    `yaml:"lr_scheduler" enum:"cosine|constant|wsd" doc:"after warm-up: cosine decay to min_lr_ratio, or constant (wsd is read as constant)"`
	MinLRRatio       float64   `yaml:"min_lr_ratio" doc:"cosine: the final learning rate as a fraction of lr"`
}

// TrainerConfig is the trainer section.
type TrainerConfig struct {
	DefaultLocalDir    string     `yaml:"default_local_dir" doc:"the run directory (metrics, curves, checkpoints); empty: runs/PROJECT/EXPERIMENT"`
	ProjectName        string     `yaml:"project_name" doc:"project name (the run directory's parent)"`
	ExperimentName     string     `yaml:"experiment_name" doc:"experiment name (the run directory's name)"`
	TotalEpochs        int        `yaml:"total_epochs" doc:"passes over the training rows"`
	TotalTrainingSteps *int       `yaml:"total_training_steps" doc:"optimiser steps; null = steps per epoch x total_epochs"`
	Logger             StringList `yaml:"logger" doc:"console and/or jsonl (RUN_DIR/metrics.jsonl)"`
	Seed               int        `yaml:"seed" doc:"seed of the LoRA initialisation"`
	SaveFreq           int        `yaml:"save_freq" doc:"checkpoint every N steps (and after the last); <= 0: after the last step only"`
	TestFreq           int        `yaml:"test_freq" doc:"validation loss every N steps (and after the last); <= 0: after the last step only"`
	MaxCkptToKeep      *int       `yaml:"max_ckpt_to_keep" doc:"keep the newest N checkpoints; null = all"`
	Device             string     `yaml:"device" enum:"cpu|cuda" doc:"cpu or cuda (a build with the cuda tag)"`
	// Accepted without effect.
	NNodes         int    `yaml:"nnodes" doc:"accepted for veRL compatibility; no effect"`
	NGPUsPerNode   int    `yaml:"n_gpus_per_node" doc:"accepted for veRL compatibility; no effect"`
	DefaultHDFSDir string `yaml:"default_hdfs_dir" doc:"accepted for veRL compatibility; no effect"`
	ResumeMode     string `yaml:"resume_mode" doc:"accepted for veRL compatibility; an SFT run always starts from model.partial_pretrain"`
}

// StringList is a key that takes a string or a list of strings (data.train_files, for
// example). A single string is a list of one.
type StringList []string

// UnmarshalYAML reads a string or a list of strings.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Tag == "!!null" {
			*l = nil
			return nil
		}
		*l = StringList{n.Value}
		return nil
	}
	var xs []string
	if err := n.Decode(&xs); err != nil {
		return err
	}
	*l = xs
	return nil
}

// Default is the configuration before any file or override: SmolLM2-135M-Instruct on a
// small CPU machine.
func Default() *Config {
	return &Config{
		Data: DataConfig{TrainBatchSize: 8, MicroBatchSizePerGPU: 2, MaxLength: 1024, Truncation: "skip",
			Multiturn: MultiturnConfig{Enable: true, MessagesKey: "messages", ToolsKey: "tools", Format: "auto"}, Shuffle: true},
		Model: ModelConfig{PartialPretrain: config.DefaultModelPath, LoraAlpha: 16,
			TargetModules: StringList{"all-linear"}, FSDPConfig: FSDPConfig{MixedPrecision: MixedPrecisionConfig{ParamDtype: "bfloat16"}}},
		Optim: OptimConfig{LR: 1e-5, Betas: []float64{0.9, 0.95}, Eps: 1e-8, WeightDecay: 0.01, WarmupStepsRatio: 0.1,
			ClipGrad: 1.0, LRScheduler: "cosine"},
		Trainer: TrainerConfig{ProjectName: "rlhost-sft", ExperimentName: "sft", TotalEpochs: 1,
			Logger: StringList{"console", "jsonl"}, Seed: 1, Device: "cpu"},
	}
}

// MessagesColumn is the column the conversations are read from.
func (c *Config) MessagesColumn() string {
	if c.Data.MessagesKey != "" {
		return c.Data.MessagesKey
	}
	return c.Data.Multiturn.MessagesKey
}

// ToolsColumn is the column the tool schemas are read from.
func (c *Config) ToolsColumn() string {
	if c.Data.ToolsKey != "" {
		return c.Data.ToolsKey
	}
	return c.Data.Multiturn.ToolsKey
}

// RunDir is where the run writes.
func (c *Config) RunDir() string {
	if c.Trainer.DefaultLocalDir != "" {
		return c.Trainer.DefaultLocalDir
	}
	return filepath.Join("runs", c.Trainer.ProjectName, c.Trainer.ExperimentName)
}

// keyInfo is one leaf key: its dotted name, Go type and documentation.
type keyInfo struct {
	name, typ, doc, enum string
}

// keys lists every leaf key of Config, sorted.
func keys() []keyInfo {
	var out []keyInfo
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if name == "" && f.Type.Kind() == reflect.Map { // ",inline": the section's other keys
				name = "*"
			}
			if prefix != "" {
				name = prefix + "." + name
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, name)
				continue
			}
			out = append(out, keyInfo{name: name, typ: f.Type.String(), doc: f.Tag.Get("doc"), enum: f.Tag.Get("enum")})
		}
	}
	walk(reflect.TypeFor[Config](), "")
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// KeysMarkdown is the table of keys for docs/sft.md.
func KeysMarkdown() string {
	var b strings.Builder
	b.WriteString("| key | default | meaning |\n|---|---|---|\n")
	d := Default()
	for _, k := range keys() {
		v, _ := d.get(k.name)
		dv, _ := json.Marshal(v)
		if sv, ok := v.(string); ok {
			dv = []byte(sv)
			if sv == "" {
				dv = []byte(`""`)
			}
		}
		doc := k.doc
		if k.enum != "" {
			doc += " (" + strings.ReplaceAll(k.enum, "|", ", ") + ")"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", k.name, dv, doc)
	}
	return b.String()
}

// get returns the value of a dotted key.
func (c *Config) get(name string) (any, bool) {
	v := reflect.ValueOf(c).Elem()
	for _, part := range strings.Split(name, ".") {
		found := false
		for i := 0; i < v.NumField(); i++ {
			if strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0] == part {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, true
	}
	return v.Interface(), true
}

// Load starts from Default, applies each YAML file in order, then each key=value override
// (+key=value is accepted), and validates the result. Unknown keys are errors that name the
// file or override and suggest the closest known key.
func Load(files, overrides []string) (*Config, error) {
	c := Default()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("sft: config: %w", err)
		}
		if err := c.apply(f, b); err != nil {
			return nil, err
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(strings.TrimPrefix(o, "+"), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("sft: config: override %q: want key=value", o)
		}
		var doc bytes.Buffer
		parts := strings.Split(k, ".")
		for i, p := range parts {
			fmt.Fprintf(&doc, "%s%s:", strings.Repeat("  ", i), p)
			if i < len(parts)-1 {
				doc.WriteString("\n")
			}
		}
		doc.WriteString(" " + v + "\n")
		if err := c.apply("override "+o, doc.Bytes()); err != nil {
			return nil, err
		}
	}
	if mp := &c.Model.FSDPConfig.MixedPrecision; mp.ParamDtype == "" { // null, as veRL's default
		mp.ParamDtype = Default().Model.FSDPConfig.MixedPrecision.ParamDtype
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// apply decodes one YAML document into c, after checking that every key is known.
func (c *Config) apply(name string, b []byte) error {
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("sft: config: %s: %v", name, err)
	}
	if len(n.Content) == 0 {
		return nil
	}
	known := map[string]bool{}
	var names []string
	for _, k := range keys() {
		known[k.name] = true
		names = append(names, k.name)
	}
	if err := checkKeys(n.Content[0], "", name, known, names); err != nil {
		return err
	}
	if err := n.Decode(c); err != nil {
		return fmt.Errorf("sft: config: %s: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

func checkKeys(n *yaml.Node, prefix, src string, known map[string]bool, names []string) error {
	if n.Kind != yaml.MappingNode {
		if prefix == "" {
			return fmt.Errorf("sft: config: %s: want a mapping of keys", src)
		}
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		name := k
		if prefix != "" {
			name = prefix + "." + k
		}
		if known[name] {
			continue
		}
		isSection := false
		for _, kn := range names {
			if strings.HasPrefix(kn, name+".") {
				isSection = true
				break
			}
		}
		if !isSection && known[prefix+".*"] { // a key of a section that takes any other key
			continue
		}
		if !isSection {
			msg := fmt.Sprintf("sft: config: %s: line %d: unknown key %s", src, n.Content[i].Line, name)
			if s := closest(name, names); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", s)
			}
			return fmt.Errorf("%s", msg)
		}
		if err := checkKeys(n.Content[i+1], name, src, known, names); err != nil {
			return err
		}
	}
	return nil
}

func closest(want string, names []string) string {
	best, bestD := "", 1<<30
	for _, n := range names {
		d := suggest.EditDistance(want, n) // config keys are ASCII: runes are bytes
		if strings.HasSuffix(n, "."+want[strings.LastIndexByte(want, '.')+1:]) {
			d = min(d, 3)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	if bestD <= max(3, len(want)/3) {
		return best
	}
	return ""
}

// Validate checks ranges and enums, reporting every problem at once.
func (c *Config) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	d := c.Data
	if d.TrainBatchSize < 1 {
		bad("data.train_batch_size=%d: want >= 1", d.TrainBatchSize)
	}
	if d.MicroBatchSizePerGPU < 1 {
		bad("data.micro_batch_size_per_gpu=%d: want >= 1", d.MicroBatchSizePerGPU)
	}
	if d.MaxLength < 2 {
		bad("data.max_length=%d: want >= 2", d.MaxLength)
	}
	if c.MessagesColumn() == "" {
		bad("data.multiturn.messages_key is empty: name the column of the conversations")
	}
	if d.ValMaxSamples < 0 {
		bad("data.val_max_samples=%d: want >= 0", d.ValMaxSamples)
	}
	for _, k := range []string{"messages", "tools", "add_generation_prompt"} {
		if _, ok := d.ApplyChatTemplateKwargs[k]; ok {
			bad("data.apply_chat_template_kwargs.%s: %s comes from the row, not a template kwarg", k, k)
		}
	}
	for _, k := range keys() {
		if k.enum == "" {
			continue
		}
		v, _ := c.get(k.name)
		s, _ := v.(string)
		if !contains(strings.Split(k.enum, "|"), s) {
			bad("%s=%q: want one of %s", k.name, s, strings.ReplaceAll(k.enum, "|", ", "))
		}
	}
	o := c.Optim
	if o.LR <= 0 {
		bad("optim.lr=%g: want > 0", o.LR)
	}
	if len(o.Betas) != 2 {
		bad("optim.betas=%v: want two values", o.Betas)
	}
	if o.WarmupStepsRatio < 0 || o.WarmupStepsRatio >= 1 {
		bad("optim.warmup_steps_ratio=%g: want 0 <= ratio < 1", o.WarmupStepsRatio)
	}
	if o.MinLRRatio < 0 || o.MinLRRatio > 1 {
		bad("optim.min_lr_ratio=%g: want 0..1", o.MinLRRatio)
	}
	if o.ClipGrad < 0 {
		bad("optim.clip_grad=%g: want >= 0", o.ClipGrad)
	}
	m := c.Model
	if m.PartialPretrain == "" {
		bad("model.partial_pretrain is empty: name the starting checkpoint")
	}
	if m.LoraRank < 0 {
		bad("model.lora_rank=%d: want >= 0", m.LoraRank)
	}
	if m.LoraRank > 0 && m.LoraAlpha <= 0 {
		bad("model.lora_alpha=%g: want > 0 with LoRA", m.LoraAlpha)
	}
	t := c.Trainer
	if t.TotalEpochs < 1 && t.TotalTrainingSteps == nil {
		bad("trainer.total_epochs=%d: want >= 1 (or set trainer.total_training_steps)", t.TotalEpochs)
	}
	if t.TotalTrainingSteps != nil && *t.TotalTrainingSteps < 1 {
		bad("trainer.total_training_steps=%d: want >= 1", *t.TotalTrainingSteps)
	}
	for _, l := range t.Logger {
		if l != "console" && l != "jsonl" {
			bad("trainer.logger: unknown logger %q (known: console, jsonl)", l)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sft: config: %s", strings.Join(errs, "; "))
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// WriteYAML writes the configuration as YAML.
func (c *Config) WriteYAML(path string) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
