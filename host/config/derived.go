package config

import (
	"fmt"
	"path/filepath"
	"strings"
)

// CriticEnabled reports whether a critic is trained: critic.enable, or when it is
// null, whether algorithm.adv_estimator is gae.
func (c *Config) CriticEnabled() bool {
	if c.Critic.Enable != nil {
		return *c.Critic.Enable
	}
	return c.Algorithm.AdvEstimator == "gae"
}

// ClipRatioLow is actor_rollout_ref.actor.clip_ratio_low, or clip_ratio when null.
func (c *Config) ClipRatioLow() float64 {
	if p := c.ActorRolloutRef.Actor.ClipRatioLow; p != nil {
		return *p
	}
	return c.ActorRolloutRef.Actor.ClipRatio
}

// ClipRatioHigh is actor_rollout_ref.actor.clip_ratio_high, or clip_ratio when null.
func (c *Config) ClipRatioHigh() float64 {
	if p := c.ActorRolloutRef.Actor.ClipRatioHigh; p != nil {
		return *p
	}
	return c.ActorRolloutRef.Actor.ClipRatio
}

// PromptLength is actor_rollout_ref.rollout.prompt_length, or
// data.max_prompt_length when null.
func (c *Config) PromptLength() int {
	if p := c.ActorRolloutRef.Rollout.PromptLength; p != nil {
		return *p
	}
	return c.Data.MaxPromptLength
}

// ResponseLength is actor_rollout_ref.rollout.response_length, or
// data.max_response_length when null: the token budget of one trajectory.
func (c *Config) ResponseLength() int {
	if p := c.ActorRolloutRef.Rollout.ResponseLength; p != nil {
		return *p
	}
	return c.Data.MaxResponseLength
}

// RolloutSeed is actor_rollout_ref.rollout.seed, or trainer.seed when null.
func (c *Config) RolloutSeed() int {
	if p := c.ActorRolloutRef.Rollout.Seed; p != nil {
		return *p
	}
	return c.Trainer.Seed
}

// AgentWorkers is actor_rollout_ref.rollout.agent.num_workers, or
// actor_rollout_ref.rollout.max_num_seqs when null.
func (c *Config) AgentWorkers() int {
	if p := c.ActorRolloutRef.Rollout.Agent.NumWorkers; p != nil {
		return *p
	}
	return c.ActorRolloutRef.Rollout.MaxNumSeqs
}

// Experiment is trainer.experiment_name, or when it is empty the task's name (task.name; of a
// path to a plugin binary, its name: /x/rlhost-task-arith -> arith); the names of a mixed
// run's tasks joined by "+" (gsm8k+arith).
func (c *Config) Experiment() string {
	names := c.TaskNames()
	if c.Trainer.ExperimentName != "" || len(names) == 0 {
		return c.Trainer.ExperimentName
	}
	for i, n := range names {
		names[i] = strings.TrimPrefix(filepath.Base(n), "rlhost-task-")
	}
	return strings.Join(names, "+")
}

// RunDir is trainer.run_dir, or default_local_dir/project_name/experiment_name
// when null, so that resume_mode=auto finds the checkpoints of an earlier run of
// the same experiment.
func (c *Config) RunDir() string {
	if p := c.Trainer.RunDir; p != nil {
		return *p
	}
	return filepath.Join(c.Trainer.DefaultLocalDir, c.Trainer.ProjectName, c.Experiment())
}

// WarmupSteps is the number of learning-rate warm-up steps for a run of
// totalSteps optimiser steps: lr_warmup_steps, or when it is 0 or negative
// int(lr_warmup_steps_ratio * totalSteps), as in veRL's FSDP engine.
func (o Optim) WarmupSteps(totalSteps int) int {
	if o.LRWarmupSteps > 0 {
		return o.LRWarmupSteps
	}
	return int(o.LRWarmupStepsRatio * float64(totalSteps))
}

// OverlongBuffer is DAPO's overlong penalty (reward_model.reward_kwargs.overlong_buffer_cfg):
// a response longer than ResponseLength - Len gets
// min(-(length - (ResponseLength - Len)) / Len * PenaltyFactor, 0) added to its score.
type OverlongBuffer struct {
	Enable        bool
	Len           int
	PenaltyFactor float64
	Log           bool
}

// OverlongBuffer reads reward_model.reward_kwargs.overlong_buffer_cfg; absent
// keys take the defaults (off, len 0, penalty_factor 1, log false).
func (c *Config) OverlongBuffer() (OverlongBuffer, error) {
	const prefix = "reward_model.reward_kwargs.overlong_buffer_cfg"
	ob := OverlongBuffer{PenaltyFactor: 1}
	raw, ok := c.RewardModel.RewardKwargs["overlong_buffer_cfg"]
	if !ok || raw == nil {
		return ob, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return ob, &Error{Key: prefix, Msg: fmt.Sprintf("%s must be a mapping, got %s", prefix, kindOf(raw))}
	}
	bad := func(k, want string, v any) error {
		return &Error{Key: prefix + "." + k, Msg: fmt.Sprintf("%s.%s must be %s, got %s", prefix, k, want, kindOf(v))}
	}
	for k, v := range m {
		switch k {
		case "enable", "log":
			b, ok := v.(bool)
			if !ok {
				return ob, bad(k, "true or false", v)
			}
			if k == "enable" {
				ob.Enable = b
			} else {
				ob.Log = b
			}
		case "len":
			n, ok := v.(int)
			if !ok || n < 0 {
				return ob, bad(k, "an int >= 0", v)
			}
			ob.Len = n
		case "penalty_factor":
			f, ok := number(v)
			if !ok || f < 0 {
				return ob, bad(k, "a number >= 0", v)
			}
			ob.PenaltyFactor = f
		default:
			return ob, &Error{Key: prefix + "." + k, Msg: fmt.Sprintf("%s: unknown key %q (known: enable, len, penalty_factor, log)", prefix, k)}
		}
	}
	return ob, nil
}

// CriticMiniBatchSize is critic.ppo_mini_batch_size, or the actor's when null.
func (c *Config) CriticMiniBatchSize() int {
	if p := c.Critic.PPOMiniBatchSize; p != nil {
		return *p
	}
	return c.ActorRolloutRef.Actor.PPOMiniBatchSize
}

// CriticPPOEpochs is critic.ppo_epochs, or the actor's when null.
func (c *Config) CriticPPOEpochs() int {
	if p := c.Critic.PPOEpochs; p != nil {
		return *p
	}
	return c.ActorRolloutRef.Actor.PPOEpochs
}

// LogProbBudget is the token budget of a log-prob pass (old = rollout's, else ref's), 0 for
// fixed micro-batches: log_prob_use_dynamic_bsz (null = actor.use_dynamic_bsz) and
// log_prob_max_token_len_per_gpu (null = actor.ppo_max_token_len_per_gpu). key names the
// budget key for errors.
func (c *Config) LogProbBudget(ref bool) (budget int, key string) {
	a := c.ActorRolloutRef.Actor
	use, max, key := c.ActorRolloutRef.Rollout.LogProbUseDynamicBsz, c.ActorRolloutRef.Rollout.LogProbMaxTokenLenPerGPU, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu"
	if ref {
		use, max, key = c.ActorRolloutRef.Ref.LogProbUseDynamicBsz, c.ActorRolloutRef.Ref.LogProbMaxTokenLenPerGPU, "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu"
	}
	on := a.UseDynamicBsz
	if use != nil {
		on = *use
	}
	if !on {
		return 0, key
	}
	if max != nil {
		return *max, key
	}
	return a.PPOMaxTokenLenPerGPU, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
}

// criticDynamic is critic.use_dynamic_bsz, or the actor's when null.
func (c *Config) criticDynamic() bool {
	if p := c.Critic.UseDynamicBsz; p != nil {
		return *p
	}
	return c.ActorRolloutRef.Actor.UseDynamicBsz
}

// CriticUpdateBudget is the token budget of the critic update's micro-batches
// (critic.ppo_max_token_len_per_gpu), 0 for fixed micro-batches.
func (c *Config) CriticUpdateBudget() int {
	if !c.criticDynamic() {
		return 0
	}
	return c.Critic.PPOMaxTokenLenPerGPU
}

// CriticForwardBudget is the token budget of the critic's value forward
// (critic.forward_max_token_len_per_gpu, null = ppo_max_token_len_per_gpu), 0 for fixed
// micro-batches.
func (c *Config) CriticForwardBudget() int {
	if !c.criticDynamic() {
		return 0
	}
	if p := c.Critic.ForwardMaxTokenLenPerGPU; p != nil {
		return *p
	}
	return c.Critic.PPOMaxTokenLenPerGPU
}
