package config

import (
	"errors"
	"strings"
	"testing"
)

// Each row: overrides over the defaults, and the error Load must give (every
// message names its keys). A row with no error must load.
func TestValidate(t *testing.T) {
	tests := []struct {
		overrides []string
		err       string
	}{
		{nil, ""},
		{[]string{"data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16"}, ""},
		{[]string{"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"},
			"actor_rollout_ref.actor.ppo_mini_batch_size * actor_rollout_ref.rollout.n (4 * 4 = 16 trajectories) must be divisible by actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (3)"},
		{[]string{"actor_rollout_ref.rollout.n=3", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=5"}, "(4 * 3 = 12 trajectories) must be divisible"},
		// micro-batches by token budget: the micro-batch size is not used, so not checked (veRL alike)
		{[]string{"actor_rollout_ref.rollout.n=3", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=5", "actor_rollout_ref.actor.use_dynamic_bsz=true"}, ""},
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=5", "actor_rollout_ref.actor.use_dynamic_bsz=true"}, ""},
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=5", "actor_rollout_ref.actor.use_dynamic_bsz=true", "critic.use_dynamic_bsz=false"},
			"must be divisible by critic.ppo_micro_batch_size_per_gpu (5)"},
		{[]string{"actor_rollout_ref.rollout.n=3", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"}, ""},
		{[]string{"actor_rollout_ref.actor.ppo_mini_batch_size=8"},
			"data.train_batch_size (4) must be >= actor_rollout_ref.actor.ppo_mini_batch_size (8)"},
		{[]string{"data.train_batch_size=0"}, "data.train_batch_size must be >= 1, got 0"},
		{[]string{"actor_rollout_ref.rollout.n=1"}, ""}, // veRL runs it; Warnings says so
		{[]string{"actor_rollout_ref.rollout.n=1", "algorithm.adv_estimator=reinforce_plus_plus"}, ""},
		{[]string{"actor_rollout_ref.rollout.n=0"}, "actor_rollout_ref.rollout.n must be >= 1, got 0"},
		{[]string{"task.timeouts.obs=0.5", "task.timeouts.score=2", "trainer.max_failed_fraction=0", "trainer.max_consecutive_failed_steps=1"}, ""},
		{[]string{"task.timeouts.obs=0"}, "task.timeouts.obs must be > 0, got 0"},
		{[]string{"task.timeouts.end=-1"}, "task.timeouts.end must be > 0, got -1"},
		{[]string{"task.timeouts.score=0"}, "task.timeouts.score must be > 0, got 0"},
		{[]string{"trainer.max_failed_fraction=1.5"}, "trainer.max_failed_fraction must be in [0, 1], got 1.5"},
		{[]string{"trainer.max_consecutive_failed_steps=0"}, "trainer.max_consecutive_failed_steps must be >= 1, got 0"},
		{[]string{"actor_rollout_ref.rollout.val_kwargs.n=0"}, "actor_rollout_ref.rollout.val_kwargs.n must be >= 1, got 0"},
		{[]string{"algorithm.adv_estimator=gae", "critic.enable=false"}, "algorithm.adv_estimator=gae needs a critic: set critic.enable=true (or null)"},
		{[]string{"algorithm.adv_estimator=gae"}, ""},
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_micro_batch_size_per_gpu=5"}, "must be divisible by critic.ppo_micro_batch_size_per_gpu (5)"},
		{[]string{"critic.ppo_micro_batch_size_per_gpu=5"}, ""}, // no critic, not checked
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_mini_batch_size=2", "critic.ppo_micro_batch_size_per_gpu=8"}, ""},
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_mini_batch_size=2", "critic.ppo_micro_batch_size_per_gpu=16"},
			"critic.ppo_mini_batch_size * actor_rollout_ref.rollout.n (8 trajectories) must be divisible by critic.ppo_micro_batch_size_per_gpu (16)"},
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_mini_batch_size=8"}, "8 prompts per critic mini-batch, but data.train_batch_size is 4"},
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_mini_batch_size=0"}, "critic.ppo_mini_batch_size must be >= 1"},
		{[]string{"algorithm.adv_estimator=gae", "critic.ppo_epochs=0"}, "critic.ppo_epochs must be >= 1"},
		{[]string{"algorithm.adv_estimator=gae", "critic.optim.lr=0"}, "critic.optim.lr must be > 0, got 0"},
		{[]string{"actor_rollout_ref.actor.optim.lr=-1e-5"}, "actor_rollout_ref.actor.optim.lr must be > 0"},
		{[]string{"actor_rollout_ref.actor.optim.betas=[0.9]"}, "actor_rollout_ref.actor.optim.betas must be a list of two numbers, got 1"},
		{[]string{"actor_rollout_ref.actor.optim.betas=[0.9,1.0]"}, "actor_rollout_ref.actor.optim.betas[1] must be in [0, 1), got 1"},
		{[]string{"actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=2"}, "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio must be in [0, 1], got 2"},
		{[]string{"actor_rollout_ref.actor.fsdp_config.fsdp_size=0"}, "actor_rollout_ref.actor.fsdp_config.fsdp_size must be -1 (every rank) or >= 1, got 0"},
		{[]string{"actor_rollout_ref.actor.fsdp_config={fsdp_size: 8, param_offload: true}"}, ""},
		{[]string{"critic.fsdp.fsdp_size=-2"}, "critic.fsdp.fsdp_size must be -1 (every rank) or >= 1, got -2"},
		{[]string{"critic.fsdp={fsdp_size: 1, param_offload: true}"}, ""},
		{[]string{"actor_rollout_ref.actor.clip_ratio=0"}, "actor_rollout_ref.actor.clip_ratio must be > 0, got 0"},
		{[]string{"actor_rollout_ref.actor.clip_ratio_low=1.2"}, "actor_rollout_ref.actor.clip_ratio_low must be < 1"},
		{[]string{"actor_rollout_ref.actor.clip_ratio_high=-0.1"}, "actor_rollout_ref.actor.clip_ratio_high must be > 0"},
		{[]string{"actor_rollout_ref.actor.clip_ratio_c=1"}, "actor_rollout_ref.actor.clip_ratio_c must be > 1 (dual clip), got 1"},
		{[]string{"actor_rollout_ref.rollout.temperature=-1"}, "actor_rollout_ref.rollout.temperature must be >= 0"},
		{[]string{"actor_rollout_ref.rollout.top_p=0"}, "actor_rollout_ref.rollout.top_p must be in (0, 1], got 0"},
		{[]string{"actor_rollout_ref.rollout.val_kwargs.top_k=-2"}, "actor_rollout_ref.rollout.val_kwargs.top_k must be -1 or 0 (off) or >= 1, got -2"},
		{[]string{"actor_rollout_ref.rollout.multi_turn.max_assistant_turns=0"}, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns must be >= 1 or null, got 0"},
		{[]string{"actor_rollout_ref.rollout.multi_turn.max_user_turns=0"}, ""},
		{[]string{"actor_rollout_ref.rollout.multi_turn.max_parallel_calls=0"}, "actor_rollout_ref.rollout.multi_turn.max_parallel_calls must be >= 1, got 0"},
		{[]string{"actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent", "actor_rollout_ref.rollout.multi_turn.enable=false"},
			"actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent needs actor_rollout_ref.rollout.multi_turn.enable=true"},
		{[]string{"actor_rollout_ref.rollout.trace.backend=['']"}, "actor_rollout_ref.rollout.trace.backend[0] is empty"},
		{[]string{"data.train_files=[]"}, "data.train_files is empty"},
		{[]string{"data.val_files=[]"}, "data.val_files is empty but validation is on"},
		{[]string{"data.val_files=[]", "trainer.val_before_train=false"}, ""},
		{[]string{"data.val_max_samples=0"}, "data.val_max_samples must be -1 or null (all rows) or >= 1, got 0"},
		{[]string{"data.val_max_samples=-1"}, ""},
		{[]string{"data.val_max_samples=-2"}, "data.val_max_samples must be -1 or null (all rows) or >= 1, got -2"},
		{[]string{"data.max_response_length=0"}, "data.max_response_length must be >= 1, got 0"},
		{[]string{"actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_alpha=0"}, "actor_rollout_ref.model.lora_alpha must be > 0"},
		{[]string{"actor_rollout_ref.model.lora_rank=-1"}, "actor_rollout_ref.model.lora_rank must be >= 0"},
		{[]string{"reward_model.enable=true"}, "reward_model.enable=true needs reward_model.model.path"},
		{[]string{"reward_model.judge.backend=openai"}, "reward_model.judge.backend=openai needs reward_model.judge.base_url"},
		{[]string{"reward_model.judge.backend=model"}, "reward_model.judge.backend=model needs reward_model.judge.model_path"},
		{[]string{"reward_model.judge.backend=openai", "reward_model.judge.base_url=http://127.0.0.1:1/v1"}, ""},
		{[]string{"reward_model.judge.backend=gpt"}, `reward_model.judge.backend: "gpt" is not one of none, policy, model, openai`},
		{[]string{"reward_model.enable=true", "reward_model.model.path=/rm"}, ""},
		{[]string{"reward_model.enable=true", "reward_model.model.path=/rm", "reward_model.model.input_tokenizer=/actor"}, "re-templating the response for the reward model is not available"},
		{[]string{"reward_model.enable=true", "reward_model.model.path=/rm", "reward_model.micro_batch_size_per_gpu=0"}, "reward_model.micro_batch_size_per_gpu must be >= 1 or null, got 0"},
		{[]string{"reward_model.timeout=0"}, "reward_model.timeout must be > 0, got 0"},
		{[]string{"reward_model.reward_kwargs.overlong_buffer_cfg.enable=true"},
			"reward_model.reward_kwargs.overlong_buffer_cfg.len must be in [1, response length 256) when the overlong buffer is enabled, got 0"},
		{[]string{"reward_model.reward_kwargs.overlong_buffer_cfg.enable=true", "reward_model.reward_kwargs.overlong_buffer_cfg.len=64"}, ""},
		{[]string{"reward_model.reward_kwargs.overlong_buffer_cfg.enable=yes"}, "reward_model.reward_kwargs.overlong_buffer_cfg.enable must be true or false, got a string"},
		{[]string{"reward_model.reward_kwargs.overlong_buffer_cfg.lenn=3"}, `reward_model.reward_kwargs.overlong_buffer_cfg: unknown key "lenn"`},
		{[]string{"reward_model.reward_weights.format=high"}, "reward_model.reward_weights.format must be a number, got a string"},
		{[]string{"algorithm.gamma=1.5"}, "algorithm.gamma must be in [0, 1], got 1.5"},
		{[]string{"algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.target_kl=0"}, "algorithm.kl_ctrl.target_kl must be > 0"},
		{[]string{"trainer.test_freq=0"}, "trainer.test_freq must be -1 (never) or >= 1, got 0"},
		{[]string{"trainer.save_freq=-5"}, "trainer.save_freq must be -1 (never) or >= 1, got -5"},
		{[]string{"trainer.total_training_steps=0"}, "trainer.total_training_steps must be >= 1 or null, got 0"},
		{[]string{"trainer.resume_mode=resume_path"}, "trainer.resume_mode=resume_path needs trainer.resume_from_path"},
		{[]string{"trainer.resume_mode=resume_path", "trainer.resume_from_path=runs/x/global_step_5"}, ""},
		{[]string{"trainer.experiment_name=a/b"}, `trainer.experiment_name "a/b" must be a plain name`},
		{[]string{"trainer.experiment_name=a/b", "trainer.run_dir=out"}, ""},
		{[]string{"trainer.logger=[console, '']"}, "trainer.logger[1] is empty"},
		{[]string{"algorithm.filter_groups.enable=true"}, "algorithm.filter_groups.enable=true: DAPO's dynamic sampling (filter_groups) is not available in rlhost"},
		{[]string{"algorithm.filter_groups={enable: false, metric: acc}"}, ""},
		{[]string{"+algorithm.use_pf_ppo=True"}, "algorithm.use_pf_ppo=true: PF-PPO is not available"},
		{[]string{"reward.reward_model.enable=true"}, "reward.reward_model.enable=true: veRL 0.9's reward.reward_model section"},
	}
	for _, tt := range tests {
		_, err := Load(nil, tt.overrides)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%q: %v", tt.overrides, err)
		case tt.err != "" && err == nil:
			t.Errorf("%q: no error, want %q", tt.overrides, tt.err)
		case tt.err != "" && !strings.Contains(err.Error(), tt.err):
			t.Errorf("%q:\n got  %v\n want %s", tt.overrides, err, tt.err)
		}
	}
}

// Validate reports every problem, and checks enum values set in Go too.
func TestValidateAll(t *testing.T) {
	c := Default()
	c.Data.Truncation = "sideways"
	c.Algorithm.AdvEstimator = "ppo"
	c.Data.TrainBatchSize = 0
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{
		`data.truncation: "sideways" is not one of error, left, right, middle`,
		`algorithm.adv_estimator: "ppo" is not one of gae, grpo,`,
		"data.train_batch_size must be >= 1, got 0",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("missing %q in\n%v", s, err)
		}
	}
	var e *Error
	if !errors.As(err, &e) || e.Key == "" {
		t.Errorf("not an *Error with a key: %#v", err)
	}
}
