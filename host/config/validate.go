package config

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// Validate checks the values and how they fit together: ranges, enum values,
// batch sizes that divide, the critic GAE needs, and so on. It reports every
// problem it finds, each naming its keys.
func (c *Config) Validate() error {
	v := &validator{}
	c.validateEnums(v)

	c.validateTasks(v)
	to := &c.Task.Timeouts
	for _, k := range []struct {
		key string
		x   float64
	}{{"task.timeouts.configure", to.Configure}, {"task.timeouts.prompt", to.Prompt}, {"task.timeouts.start", to.Start},
		{"task.timeouts.obs", to.Obs}, {"task.timeouts.end", to.End}, {"task.timeouts.preprocess", to.Preprocess}} {
		v.positive(k.key, k.x)
	}
	if to.Score != nil {
		v.positive("task.timeouts.score", *to.Score)
	}
	d := &c.Data
	v.nonEmptyList("data.train_files", d.TrainFiles)
	for i, f := range d.ValFiles {
		if strings.TrimSpace(f) == "" {
			v.add("data.val_files", "data.val_files[%d] is empty", i)
		}
	}
	needVal := c.Trainer.ValBeforeTrain || c.Trainer.ValOnly || c.Trainer.TestFreq > 0
	if len(d.ValFiles) == 0 && needVal {
		v.add("data.val_files", "data.val_files is empty but validation is on (trainer.val_before_train, trainer.val_only or trainer.test_freq > 0)")
	}
	v.atLeast("data.train_batch_size", d.TrainBatchSize, 1)
	v.atLeastPtr("data.val_batch_size", d.ValBatchSize, 1)
	if n := d.ValMaxSamples; n != nil && *n != -1 && *n < 1 {
		v.add("data.val_max_samples", "data.val_max_samples must be -1 or null (all rows) or >= 1, got %d", *n)
	}
	v.atLeast("data.max_prompt_length", d.MaxPromptLength, 1)
	v.atLeast("data.max_response_length", d.MaxResponseLength, 1)
	v.nonEmpty("data.prompt_key", d.PromptKey)
	for _, k := range []string{"messages", "tools", "add_generation_prompt"} {
		if _, ok := d.ApplyChatTemplateKwargs[k]; ok {
			v.add("data.apply_chat_template_kwargs."+k, "data.apply_chat_template_kwargs.%s: %s is set by the rollout itself, not a template kwarg", k, k)
		}
	}

	m := &c.ActorRolloutRef.Model
	v.nonEmpty("actor_rollout_ref.model.path", m.Path)
	v.atLeast("actor_rollout_ref.model.lora_rank", m.LoraRank, 0)
	if m.LoraRank > 0 {
		v.positive("actor_rollout_ref.model.lora_alpha", m.LoraAlpha)
		v.nonEmptyList("actor_rollout_ref.model.target_modules", m.TargetModules)
	}

	a := &c.ActorRolloutRef.Actor
	r := &c.ActorRolloutRef.Rollout
	v.optim("actor_rollout_ref.actor.optim", a.Optim)
	c.validateEngine(v)
	v.atLeast("actor_rollout_ref.actor.ppo_mini_batch_size", a.PPOMiniBatchSize, 1)
	v.atLeast("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", a.PPOMicroBatchSizePerGPU, 1)
	v.atLeast("actor_rollout_ref.actor.ppo_epochs", a.PPOEpochs, 1)
	if a.PPOMiniBatchSize > d.TrainBatchSize && d.TrainBatchSize >= 1 {
		v.add("actor_rollout_ref.actor.ppo_mini_batch_size",
			"data.train_batch_size (%d) must be >= actor_rollout_ref.actor.ppo_mini_batch_size (%d): a step holds at least one mini-batch",
			d.TrainBatchSize, a.PPOMiniBatchSize)
	}
	// With use_dynamic_bsz the micro-batches are cut by token budget and
	// ppo_micro_batch_size_per_gpu is not used (veRL checks it only without).
	if !a.UseDynamicBsz && a.PPOMiniBatchSize >= 1 && r.N >= 1 && a.PPOMicroBatchSizePerGPU >= 1 && (a.PPOMiniBatchSize*r.N)%a.PPOMicroBatchSizePerGPU != 0 {
		v.add("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
			"actor_rollout_ref.actor.ppo_mini_batch_size * actor_rollout_ref.rollout.n (%d * %d = %d trajectories) must be divisible by actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (%d)",
			a.PPOMiniBatchSize, r.N, a.PPOMiniBatchSize*r.N, a.PPOMicroBatchSizePerGPU)
	}
	v.positive("actor_rollout_ref.actor.clip_ratio", a.ClipRatio)
	if a.ClipRatioLow != nil {
		v.positive("actor_rollout_ref.actor.clip_ratio_low", *a.ClipRatioLow)
		if *a.ClipRatioLow >= 1 {
			v.add("actor_rollout_ref.actor.clip_ratio_low", "actor_rollout_ref.actor.clip_ratio_low must be < 1 (the ratio is clipped at 1 - clip_ratio_low), got %g", *a.ClipRatioLow)
		}
	} else if a.ClipRatio >= 1 {
		v.add("actor_rollout_ref.actor.clip_ratio", "actor_rollout_ref.actor.clip_ratio must be < 1 (the ratio is clipped at 1 - clip_ratio), got %g", a.ClipRatio)
	}
	if a.ClipRatioHigh != nil {
		v.positive("actor_rollout_ref.actor.clip_ratio_high", *a.ClipRatioHigh)
	}
	if !(a.ClipRatioC > 1) {
		v.add("actor_rollout_ref.actor.clip_ratio_c", "actor_rollout_ref.actor.clip_ratio_c must be > 1 (dual clip), got %g", a.ClipRatioC)
	}
	if a.UseDynamicBsz {
		v.atLeast("actor_rollout_ref.actor.ppo_max_token_len_per_gpu", a.PPOMaxTokenLenPerGPU, 1)
	}
	v.atLeastPtr("actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", c.ActorRolloutRef.Ref.LogProbMaxTokenLenPerGPU, 1)
	v.atLeastPtr("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu", r.LogProbMaxTokenLenPerGPU, 1)
	for _, ref := range []bool{false, true} {
		if b, key := c.LogProbBudget(ref); b < 0 || (b == 0 && key == "actor_rollout_ref.actor.ppo_max_token_len_per_gpu") {
			v.add(key, "%s must be >= 1 when dynamic batches are on, got %d", key, b)
		}
	}
	v.nonNegative("actor_rollout_ref.actor.kl_loss_coef", a.KLLossCoef)
	v.nonNegative("actor_rollout_ref.actor.grad_clip", a.GradClip)
	for _, k := range []struct {
		key string
		fs  int
	}{{"actor_rollout_ref.actor.fsdp_config.fsdp_size", a.FSDPConfig.FSDPSize}, {"critic.fsdp.fsdp_size", c.Critic.FSDP.FSDPSize}} {
		if k.fs == 0 || k.fs < -1 {
			v.add(k.key, "%s must be -1 (every rank) or >= 1, got %d", k.key, k.fs)
		}
	}
	v.atLeast("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", c.ActorRolloutRef.Ref.LogProbMicroBatchSizePerGPU, 1)

	v.atLeast("actor_rollout_ref.rollout.n", r.N, 1)
	v.sampling("actor_rollout_ref.rollout", r.Temperature, r.TopP, r.TopK)
	v.atLeastPtr("actor_rollout_ref.rollout.prompt_length", r.PromptLength, 1)
	v.atLeastPtr("actor_rollout_ref.rollout.response_length", r.ResponseLength, 1)
	v.atLeast("actor_rollout_ref.rollout.max_num_seqs", r.MaxNumSeqs, 1)
	v.atLeast("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", r.LogProbMicroBatchSizePerGPU, 1)
	v.atLeast("actor_rollout_ref.rollout.val_kwargs.n", r.ValKwargs.N, 1)
	v.sampling("actor_rollout_ref.rollout.val_kwargs", r.ValKwargs.Temperature, r.ValKwargs.TopP, r.ValKwargs.TopK)
	mt := &r.MultiTurn
	v.atLeastPtr("actor_rollout_ref.rollout.multi_turn.max_assistant_turns", mt.MaxAssistantTurns, 1)
	v.atLeastPtr("actor_rollout_ref.rollout.multi_turn.max_user_turns", mt.MaxUserTurns, 0)
	v.atLeast("actor_rollout_ref.rollout.multi_turn.max_parallel_calls", mt.MaxParallelCalls, 1)
	v.atLeast("actor_rollout_ref.rollout.multi_turn.max_tool_response_length", mt.MaxToolResponseLength, 1)
	if r.Agent.DefaultAgentLoop == "tool_agent" && !mt.Enable {
		v.add("actor_rollout_ref.rollout.agent.default_agent_loop",
			"actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent needs actor_rollout_ref.rollout.multi_turn.enable=true")
	}
	v.atLeastPtr("actor_rollout_ref.rollout.agent.num_workers", r.Agent.NumWorkers, 1)
	for i, b := range r.Trace.Backend {
		if strings.TrimSpace(b) == "" {
			v.add("actor_rollout_ref.rollout.trace.backend", "actor_rollout_ref.rollout.trace.backend[%d] is empty", i)
		}
	}
	v.atLeastPtr("actor_rollout_ref.rollout.trace.max_samples_per_step", r.Trace.MaxSamplesPerStep, 1)

	cr := &c.Critic
	if cr.Enable != nil && !*cr.Enable && c.Algorithm.AdvEstimator == "gae" {
		v.add("critic.enable", "algorithm.adv_estimator=gae needs a critic: set critic.enable=true (or null)")
	}
	if c.CriticEnabled() {
		v.optim("critic.optim", cr.Optim)
		v.atLeast("critic.ppo_micro_batch_size_per_gpu", cr.PPOMicroBatchSizePerGPU, 1)
		v.atLeastPtr("critic.ppo_mini_batch_size", cr.PPOMiniBatchSize, 1)
		v.atLeastPtr("critic.ppo_epochs", cr.PPOEpochs, 1)
		mini, miniKey := c.CriticMiniBatchSize(), "critic.ppo_mini_batch_size"
		if cr.PPOMiniBatchSize == nil {
			miniKey = "actor_rollout_ref.actor.ppo_mini_batch_size"
		}
		if cr.PPOMiniBatchSize != nil && *cr.PPOMiniBatchSize > d.TrainBatchSize && d.TrainBatchSize >= 1 {
			v.add("critic.ppo_mini_batch_size", "%d prompts per critic mini-batch, but data.train_batch_size is %d", *cr.PPOMiniBatchSize, d.TrainBatchSize)
		}
		if !c.criticDynamic() && mini >= 1 && r.N >= 1 && cr.PPOMicroBatchSizePerGPU >= 1 && (mini*r.N)%cr.PPOMicroBatchSizePerGPU != 0 {
			v.add("critic.ppo_micro_batch_size_per_gpu",
				"%s * actor_rollout_ref.rollout.n (%d trajectories) must be divisible by critic.ppo_micro_batch_size_per_gpu (%d)",
				miniKey, mini*r.N, cr.PPOMicroBatchSizePerGPU)
		}
		if c.criticDynamic() {
			v.atLeast("critic.ppo_max_token_len_per_gpu", cr.PPOMaxTokenLenPerGPU, 1)
			v.atLeastPtr("critic.forward_max_token_len_per_gpu", cr.ForwardMaxTokenLenPerGPU, 1)
		}
		v.positive("critic.cliprange_value", cr.CliprangeValue)
		v.nonNegative("critic.grad_clip", cr.GradClip)
	}

	rm := &c.RewardModel
	if rm.Enable {
		if rm.Model.Path == "" {
			v.add("reward_model.model.path", "reward_model.enable=true needs reward_model.model.path: a Hugging Face XxxForSequenceClassification directory with one label")
		}
		if it := rm.Model.InputTokenizer; it != nil && *it != "" {
			v.add("reward_model.model.input_tokenizer", "reward_model.model.input_tokenizer=%s: re-templating the response for the reward model is not available; "+
				"set it to null (the reward model reads the policy's tokens, so it must share the policy's tokenizer)", *it)
		}
		v.atLeastPtr("reward_model.micro_batch_size_per_gpu", rm.MicroBatchSizePerGPU, 1)
		if w := rm.RewardWeight; w != nil && (math.IsNaN(*w) || math.IsInf(*w, 0)) {
			v.add("reward_model.reward_weight", "reward_model.reward_weight must be a finite number or null, got %g", *w)
		}
	}
	switch j := rm.Judge; j.Backend {
	case "model":
		if j.ModelPath == "" {
			v.add("reward_model.judge.model_path", "reward_model.judge.backend=model needs reward_model.judge.model_path")
		}
	case "openai":
		if j.BaseURL == "" {
			v.add("reward_model.judge.base_url", "reward_model.judge.backend=openai needs reward_model.judge.base_url")
		}
	}
	v.atLeast("reward_model.judge.max_tokens", rm.Judge.MaxTokens, 1)
	v.positive("reward_model.judge.timeout", rm.Judge.Timeout)
	v.atLeast("reward_model.num_workers", rm.NumWorkers, 1)
	v.positive("reward_model.timeout", rm.Timeout)
	if ob, err := c.OverlongBuffer(); err != nil {
		v.errs = append(v.errs, err)
	} else if ob.Enable {
		if ob.Len < 1 || ob.Len >= c.ResponseLength() {
			v.add("reward_model.reward_kwargs.overlong_buffer_cfg.len",
				"reward_model.reward_kwargs.overlong_buffer_cfg.len must be in [1, response length %d) when the overlong buffer is enabled, got %d",
				c.ResponseLength(), ob.Len)
		}
	}
	for name, w := range rm.RewardWeights {
		if _, ok := number(w); !ok {
			v.add("reward_model.reward_weights."+name, "reward_model.reward_weights.%s must be a number, got %s", name, kindOf(w))
		}
	}

	al := &c.Algorithm
	v.unit("algorithm.gamma", al.Gamma)
	v.unit("algorithm.lam", al.Lam)
	v.nonNegative("algorithm.kl_ctrl.kl_coef", al.KLCtrl.KLCoef)
	if al.KLCtrl.Type == "adaptive" {
		v.atLeast("algorithm.kl_ctrl.horizon", al.KLCtrl.Horizon, 1)
		v.positive("algorithm.kl_ctrl.target_kl", al.KLCtrl.TargetKL)
	}

	t := &c.Trainer
	v.atLeast("trainer.total_epochs", t.TotalEpochs, 1)
	v.atLeastPtr("trainer.total_training_steps", t.TotalTrainingSteps, 1)
	v.freq("trainer.test_freq", t.TestFreq)
	v.freq("trainer.save_freq", t.SaveFreq)
	for i, l := range t.Logger {
		if strings.TrimSpace(l) == "" {
			v.add("trainer.logger", "trainer.logger[%d] is empty", i)
		}
	}
	if t.RunDir == nil {
		v.nonEmpty("trainer.default_local_dir", t.DefaultLocalDir)
		v.pathPart("trainer.project_name", t.ProjectName)
		if c.Experiment() != "" { // empty only without a task, which the trainer refuses
			v.pathPart("trainer.experiment_name", c.Experiment())
		}
	} else {
		v.nonEmpty("trainer.run_dir", *t.RunDir)
	}
	if t.ResumeMode == "resume_path" && (t.ResumeFromPath == nil || *t.ResumeFromPath == "") {
		v.add("trainer.resume_from_path", "trainer.resume_mode=resume_path needs trainer.resume_from_path")
	}
	v.atLeast("trainer.critic_warmup", t.CriticWarmup, 0)
	v.atLeastPtr("trainer.max_actor_ckpt_to_keep", t.MaxActorCkptToKeep, 1)
	v.atLeast("trainer.n_gpus_per_node", t.NGPUsPerNode, 1)
	v.atLeast("trainer.nnodes", t.NNodes, 1)
	v.atLeast("trainer.log_val_generations", t.LogValGenerations, 0)
	v.unit("trainer.max_failed_fraction", t.MaxFailedFraction)
	v.atLeast("trainer.max_consecutive_failed_steps", t.MaxConsecutiveFailedSteps, 1)
	v.atLeast("actor_rollout_ref.nccl_timeout", c.ActorRolloutRef.NCCLTimeout, 1)

	for _, f := range unsupportedSwitches {
		if on, _ := lookupPath(c.compat, strings.Split(f.key, ".")); on == true {
			v.add(f.key, "%s=true: %s is not available in rlhost", f.key, f.feature)
		}
	}

	return errors.Join(v.errs...)
}

// unsupportedSwitches are veRL keys accepted without effect whose true would ask
// for a feature rlhost does not have: an error rather than a warning.
var unsupportedSwitches = []struct{ key, feature string }{
	{"algorithm.filter_groups.enable", "DAPO's dynamic sampling (filter_groups)"},
	{"algorithm.use_pf_ppo", "PF-PPO"},
	{"distillation.enabled", "distillation"},
	{"reward.reward_model.enable", "veRL 0.9's reward.reward_model section (set reward_model.enable and reward_model.model.path)"},
	{"actor_rollout_ref.rollout.ignore_eos", "generating past EOS"},
}

// validateEnums checks every enum key, whatever set it.
func (c *Config) validateEnums(v *validator) {
	for _, k := range keyList {
		if len(k.enum) == 0 {
			continue
		}
		s := c.field(k).String()
		if !contains(k.enum, s) {
			v.add(k.name, "%s: %q is not one of %s", k.name, s, strings.Join(k.enum, ", "))
		}
	}
}

type validator struct{ errs []error }

func (v *validator) add(key, format string, args ...any) {
	v.errs = append(v.errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) atLeast(key string, x, min int) {
	if x < min {
		v.add(key, "%s must be >= %d, got %d", key, min, x)
	}
}

func (v *validator) atLeastPtr(key string, x *int, min int) {
	if x != nil && *x < min {
		v.add(key, "%s must be >= %d or null, got %d", key, min, *x)
	}
}

func (v *validator) positive(key string, x float64) {
	if !(x > 0) || math.IsInf(x, 0) {
		v.add(key, "%s must be > 0, got %g", key, x)
	}
}

func (v *validator) nonNegative(key string, x float64) {
	if !(x >= 0) || math.IsInf(x, 0) {
		v.add(key, "%s must be >= 0, got %g", key, x)
	}
}

func (v *validator) unit(key string, x float64) {
	if !(x >= 0 && x <= 1) {
		v.add(key, "%s must be in [0, 1], got %g", key, x)
	}
}

func (v *validator) nonEmpty(key, s string) {
	if strings.TrimSpace(s) == "" {
		v.add(key, "%s is empty", key)
	}
}

func (v *validator) nonEmptyList(key string, l []string) {
	if len(l) == 0 {
		v.add(key, "%s is empty", key)
	}
	for i, s := range l {
		if strings.TrimSpace(s) == "" {
			v.add(key, "%s[%d] is empty", key, i)
		}
	}
}

// pathPart checks a name that becomes one directory of the run path.
func (v *validator) pathPart(key, s string) {
	switch {
	case strings.TrimSpace(s) == "":
		v.add(key, "%s is empty", key)
	case s == "." || s == ".." || strings.ContainsAny(s, `/\`) || filepath.Base(s) != s:
		v.add(key, "%s %q must be a plain name: it is a directory of the run path", key, s)
	}
}

func (v *validator) freq(key string, x int) {
	if x == 0 || x < -1 {
		v.add(key, "%s must be -1 (never) or >= 1, got %d", key, x)
	}
}

func (v *validator) sampling(prefix string, temp, topP float64, topK int) {
	v.nonNegative(prefix+".temperature", temp)
	if !(topP > 0 && topP <= 1) {
		v.add(prefix+".top_p", "%s.top_p must be in (0, 1], got %g", prefix, topP)
	}
	if topK < -1 {
		v.add(prefix+".top_k", "%s.top_k must be -1 or 0 (off) or >= 1, got %d", prefix, topK)
	}
}

func (v *validator) optim(prefix string, o Optim) {
	v.positive(prefix+".lr", o.LR)
	v.nonNegative(prefix+".weight_decay", o.WeightDecay)
	if len(o.Betas) != 2 {
		v.add(prefix+".betas", "%s.betas must be a list of two numbers, got %d", prefix, len(o.Betas))
	} else {
		for i, b := range o.Betas {
			if !(b >= 0 && b < 1) {
				v.add(prefix+".betas", "%s.betas[%d] must be in [0, 1), got %g", prefix, i, b)
			}
		}
	}
	v.positive(prefix+".eps", o.Eps)
	v.unit(prefix+".lr_warmup_steps_ratio", o.LRWarmupStepsRatio)
	v.unit(prefix+".min_lr_ratio", o.MinLRRatio)
}

func number(x any) (float64, bool) {
	switch x := x.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
