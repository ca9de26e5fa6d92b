package config

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("Default().Warnings() = %q, want none", w)
	}
}

// The defaults the run plan asks for, read back through Get by their veRL names.
func TestDefaults(t *testing.T) {
	want := map[string]any{
		"task.name":                                                        nil,
		"data.train_files":                                                 []string{"data/gsm8k/train.parquet"},
		"data.val_files":                                                   []string{"data/gsm8k/test.parquet"},
		"data.train_batch_size":                                            4,
		"data.val_batch_size":                                              nil,
		"data.val_max_samples":                                             16,
		"data.max_prompt_length":                                           512,
		"data.max_response_length":                                         256,
		"data.filter_overlong_prompts":                                     true,
		"data.truncation":                                                  "error",
		"data.shuffle":                                                     true,
		"data.seed":                                                        42,
		"data.prompt_key":                                                  "prompt",
		"actor_rollout_ref.model.path":                                     "models/SmolLM2-135M-Instruct.Q4_1.gguf",
		"actor_rollout_ref.model.lora_rank":                                0,
		"actor_rollout_ref.model.lora_alpha":                               16.0,
		"actor_rollout_ref.model.target_modules":                           []string{"all-linear"},
		"actor_rollout_ref.actor.optim.lr":                                 1e-5,
		"actor_rollout_ref.actor.optim.weight_decay":                       0.01,
		"actor_rollout_ref.actor.optim.betas":                              []float64{0.9, 0.999},
		"actor_rollout_ref.actor.optim.warmup_style":                       "constant",
		"actor_rollout_ref.actor.ppo_mini_batch_size":                      4,
		"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu":             2,
		"actor_rollout_ref.actor.ppo_epochs":                               1,
		"actor_rollout_ref.actor.clip_ratio":                               0.2,
		"actor_rollout_ref.actor.clip_ratio_low":                           nil,
		"actor_rollout_ref.actor.clip_ratio_high":                          nil,
		"actor_rollout_ref.actor.clip_ratio_c":                             3.0,
		"actor_rollout_ref.actor.loss_agg_mode":                            "token-mean",
		"actor_rollout_ref.actor.entropy_coeff":                            0.0,
		"actor_rollout_ref.actor.use_kl_loss":                              false,
		"actor_rollout_ref.actor.kl_loss_coef":                             0.001,
		"actor_rollout_ref.actor.kl_loss_type":                             "low_var_kl",
		"actor_rollout_ref.actor.grad_clip":                                1.0,
		"actor_rollout_ref.actor.shuffle":                                  false,
		"actor_rollout_ref.actor.policy_loss.loss_mode":                    "vanilla",
		"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu":          4,
		"actor_rollout_ref.rollout.name":                                   "cpu",
		"actor_rollout_ref.rollout.n":                                      4,
		"actor_rollout_ref.rollout.temperature":                            1.0,
		"actor_rollout_ref.rollout.top_p":                                  1.0,
		"actor_rollout_ref.rollout.top_k":                                  -1,
		"actor_rollout_ref.rollout.response_length":                        nil,
		"actor_rollout_ref.rollout.max_num_seqs":                           16,
		"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu":      4,
		"actor_rollout_ref.rollout.val_kwargs.n":                           1,
		"actor_rollout_ref.rollout.val_kwargs.temperature":                 0.0,
		"actor_rollout_ref.rollout.val_kwargs.top_p":                       1.0,
		"actor_rollout_ref.rollout.val_kwargs.top_k":                       -1,
		"actor_rollout_ref.rollout.val_kwargs.do_sample":                   false,
		"actor_rollout_ref.rollout.multi_turn.enable":                      true,
		"actor_rollout_ref.rollout.multi_turn.max_assistant_turns":         nil,
		"actor_rollout_ref.rollout.multi_turn.max_user_turns":              nil,
		"actor_rollout_ref.rollout.multi_turn.max_parallel_calls":          1,
		"actor_rollout_ref.rollout.multi_turn.max_tool_response_length":    256,
		"actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side": "middle",
		"actor_rollout_ref.rollout.multi_turn.format":                      "auto",
		"actor_rollout_ref.rollout.agent.default_agent_loop":               "single_turn_agent",
		"actor_rollout_ref.rollout.trace.backend":                          nil,
		"actor_rollout_ref.rollout.trace.token2text":                       nil,
		"actor_rollout_ref.rollout.trace.max_samples_per_step":             nil,
		"critic.enable":                                                    nil,
		"critic.optim.lr":                                                  1e-5,
		"critic.ppo_micro_batch_size_per_gpu":                              2,
		"critic.cliprange_value":                                           0.5,
		"critic.grad_clip":                                                 1.0,
		"reward_model.reward_manager":                                      "batch",
		"reward_model.num_workers":                                         2,
		"reward_model.timeout":                                             300.0,
		"reward_model.reward_kwargs":                                       map[string]any{},
		"algorithm.adv_estimator":                                          "grpo",
		"algorithm.gamma":                                                  1.0,
		"algorithm.lam":                                                    1.0,
		"algorithm.norm_adv_by_std_in_grpo":                                true,
		"algorithm.use_kl_in_reward":                                       false,
		"algorithm.kl_penalty":                                             "kl",
		"algorithm.kl_ctrl.type":                                           "fixed",
		"algorithm.kl_ctrl.kl_coef":                                        0.001,
		"algorithm.kl_ctrl.horizon":                                        10000,
		"algorithm.kl_ctrl.target_kl":                                      0.1,
		"trainer.project_name":                                             "rlhost",
		"trainer.experiment_name":                                          "",
		"trainer.total_epochs":                                             1,
		"trainer.total_training_steps":                                     nil,
		"trainer.test_freq":                                                -1,
		"trainer.save_freq":                                                -1,
		"trainer.val_before_train":                                         true,
		"trainer.val_only":                                                 false,
		"trainer.logger":                                                   []string{"console", "jsonl"},
		"trainer.default_local_dir":                                        "runs",
		"trainer.run_dir":                                                  nil,
		"trainer.resume_mode":                                              "auto",
		"trainer.seed":                                                     1,
		"trainer.device":                                                   "cpu",
		"trainer.log_val_generations":                                      0,
		"trainer.mlflow_tracking_uri":                                      nil,
		"trainer.rollout_trace.backend":                                    nil,
	}
	c := Default()
	for k, w := range want {
		got, err := c.Get(k)
		if err != nil {
			t.Errorf("Get(%q): %v", k, err)
			continue
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("Get(%q) = %#v, want %#v", k, got, w)
		}
	}
	// Derived values.
	if c.CriticEnabled() || c.ClipRatioLow() != 0.2 || c.ClipRatioHigh() != 0.2 ||
		c.ResponseLength() != 256 || c.PromptLength() != 512 || c.RolloutSeed() != 1 || c.AgentWorkers() != 16 {
		t.Errorf("derived defaults: critic %v clip %v/%v lengths %d/%d seed %d workers %d",
			c.CriticEnabled(), c.ClipRatioLow(), c.ClipRatioHigh(), c.PromptLength(), c.ResponseLength(), c.RolloutSeed(), c.AgentWorkers())
	}
	c.Task.Name = StringList{"arith"}
	if got := c.RunDir(); got != "runs/rlhost/arith" {
		t.Errorf("RunDir() = %q, want runs/rlhost/arith (the experiment is named after the task)", got)
	}
}

// trainer.experiment_name is the task's name unless a file or an override sets it.
func TestExperimentNameDefaultsToTask(t *testing.T) {
	for _, tc := range []struct {
		overrides []string
		want      string
	}{
		{[]string{"task.name=arith"}, "arith"},
		{[]string{"trainer.experiment_name=mine", "task.name=arith"}, "mine"},
		{[]string{"task.name=dr", "trainer.experiment_name=mine"}, "mine"},
		{[]string{"task.name=/opt/plugins/rlhost-task-arith"}, "arith"}, // --task takes a path too
		{nil, ""},
	} {
		c, err := Load(nil, tc.overrides)
		if err != nil {
			t.Fatalf("%q: %v", tc.overrides, err)
		}
		if c.Trainer.ExperimentName != tc.want || c.Experiment() != tc.want {
			t.Errorf("%q: experiment_name %q, Experiment() %q, want %q", tc.overrides, c.Trainer.ExperimentName, c.Experiment(), tc.want)
		}
		var buf strings.Builder
		if err := c.WriteYAML(&buf); err != nil {
			t.Fatal(err)
		}
		if tc.want != "" && !strings.Contains(buf.String(), "experiment_name: "+tc.want+"\n") {
			t.Errorf("%q: the printed config does not name the experiment %q", tc.overrides, tc.want)
		}
	}
}

// Overrides, one table row each: the value Get then returns, or the error.
func TestApply(t *testing.T) {
	tests := []struct {
		override string
		key      string // read back with Get; "" = the override's key
		want     any
		err      string // substring of the error; "" = no error
	}{
		{"data.train_batch_size=8", "", 8, ""},
		{"+data.train_batch_size=8", "data.train_batch_size", 8, ""},
		{"++data.train_batch_size=8", "data.train_batch_size", 8, ""},
		{"actor_rollout_ref.rollout.n=4", "", 4, ""},
		{"algorithm.adv_estimator=gae", "", "gae", ""},
		{"actor_rollout_ref.actor.optim.lr=1e-6", "", 1e-6, ""},
		{"actor_rollout_ref.actor.optim.lr=3", "", 3.0, ""}, // an int is a number
		{"actor_rollout_ref.actor.optim.lr=.5", "", 0.5, ""},
		{"actor_rollout_ref.actor.clip_ratio_high=0.28", "", 0.28, ""},
		{"actor_rollout_ref.actor.clip_ratio_high=null", "", nil, ""},
		{"actor_rollout_ref.actor.clip_ratio_high=~", "", nil, ""},
		{"data.filter_overlong_prompts=True", "", true, ""},
		{"data.filter_overlong_prompts=false", "", false, ""},
		{"data.truncation='left'", "", "left", ""},
		{`data.truncation="right"`, "", "right", ""},
		{"trainer.experiment_name=123", "", "123", ""}, // a string key takes any scalar as text
		{"trainer.experiment_name='with space'", "", "with space", ""},
		{"trainer.experiment_name=", "", "", ""},
		{"data.train_files=[a.parquet,b.parquet]", "", []string{"a.parquet", "b.parquet"}, ""},
		{"data.train_files=['a.parquet', \"b.parquet\"]", "", []string{"a.parquet", "b.parquet"}, ""},
		{"data.train_files=one.parquet", "", []string{"one.parquet"}, ""},
		{"trainer.logger=['console','wandb']", "", []string{"console", "wandb"}, ""},
		{"trainer.logger=console", "", []string{"console"}, ""},
		{"actor_rollout_ref.actor.optim.betas=[0.9,0.95]", "", []float64{0.9, 0.95}, ""},
		{"actor_rollout_ref.rollout.multi_turn.max_assistant_turns=5", "", 5, ""},
		{"trainer.total_training_steps=null", "", nil, ""},
		{"critic.enable=true", "", true, ""},
		{"critic.enable=null", "", nil, ""},
		{"data.val_batch_size=0x10", "", 16, ""},
		// Free-form sections take any keys and any values.
		{"task.config.score_method=flexible", "", "flexible", ""},
		{"task.config.shaping.tool_call_bonus=0.1", "", 0.1, ""},
		{"task.config.levels=[1,2,{a: b}]", "", []any{1, 2, map[string]any{"a": "b"}}, ""},
		{"task.config={a: 1, b: {c: true}}", "task.config.b.c", true, ""},
		{"+reward_model.reward_kwargs.overlong_buffer_cfg.len=64", "", 64, ""},
		{"reward_model.reward_weights.format=0.5", "", 0.5, ""},
		// A section set from a flow mapping.
		{"data={train_batch_size: 16, seed: 7}", "data.seed", 7, ""},
		// Older spellings.
		{"+trainer.rollout_trace.backend=mlflow", "actor_rollout_ref.rollout.trace.backend", []string{"mlflow"}, ""},
		{"trainer.rollout_trace.token2text=true", "actor_rollout_ref.rollout.trace.token2text", true, ""},
		{"actor_rollout_ref.rollout.trace.max_samples_per_step_per_worker=3", "actor_rollout_ref.rollout.trace.max_samples_per_step", 3, ""},
		{"actor_rollout_ref.actor.optim.lr_scheduler_type=cosine", "actor_rollout_ref.actor.optim.warmup_style", "cosine", ""},
		{"actor_rollout_ref.actor.ppo_micro_batch_size=8", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 8, ""},
		{"actor_rollout_ref.actor.ppo_micro_batch_size=null", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 2, ""},
		{"actor_rollout_ref.rollout.log_prob_micro_batch_size=8", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", 8, ""},
		{"actor_rollout_ref.actor.optim.clip_grad=0.5", "actor_rollout_ref.actor.grad_clip", 0.5, ""},
		{"critic.optim.clip_grad=0.5", "critic.grad_clip", 0.5, ""},
		{"reward.reward_manager.name=naive", "reward_model.reward_manager", "naive", ""},
		{"reward={num_workers: 3, reward_manager: {name: dapo}}", "reward_model.reward_manager", "dapo", ""},
		// veRL keys without effect.
		{"actor_rollout_ref.actor.fsdp_config.param_offload=False", "", false, ""},
		{"actor_rollout_ref.rollout.gpu_memory_utilization=0.5", "", 0.5, ""},
		{"trainer.critic_warmup=0", "", 0, ""},

		// Errors.
		{"data.train_bach_size=8", "", nil, `unknown key "data.train_bach_size"; did you mean "data.train_batch_size"?`},
		{"+data.train_bach_size=8", "", nil, `did you mean "data.train_batch_size"?`},
		{"actor_rollout_ref.rollot.n=4", "", nil, `did you mean "actor_rollout_ref.rollout.n"?`},
		{"data.ppo_epochs=2", "", nil, `did you mean "actor_rollout_ref.actor.ppo_epochs"?`},
		{"algorithm.adv_estimatr=grpo", "", nil, `did you mean "algorithm.adv_estimator"?`},
		{"trainer.wandb_entity=me", "", nil, `unknown key "trainer.wandb_entity" (docs/config.md lists every key)`},
		{"nonsense=1", "", nil, `unknown key "nonsense"`},
		{"data.train_batch_size=abc", "", nil, `data.train_batch_size: "abc" is not an int`},
		{"data.train_batch_size=8.5", "", nil, `data.train_batch_size: "8.5" is not an int`},
		{"data.train_batch_size=[8]", "", nil, `data.train_batch_size: a list is not an int`},
		{"data.train_batch_size=null", "", nil, `data.train_batch_size cannot be null: expected an int`},
		{"data.train_batch_size=99999999999999999999", "", nil, `is not an int`},
		{"actor_rollout_ref.actor.optim.lr=fast", "", nil, `actor_rollout_ref.actor.optim.lr: "fast" is not a number`},
		{"actor_rollout_ref.actor.optim.lr=.nan", "", nil, `actor_rollout_ref.actor.optim.lr: ".nan" is not a finite number`},
		{"actor_rollout_ref.actor.optim.lr='1e-5'", "", nil, `"1e-5" is not a number`},
		{"data.shuffle=yes", "", nil, `data.shuffle: "yes" is not true or false`},
		{"data.shuffle=1", "", nil, `data.shuffle: "1" is not true or false`},
		{"algorithm.adv_estimator=grop", "", nil, `algorithm.adv_estimator: "grop" is not one of gae, grpo,`},
		{"algorithm.adv_estimator=grop", "", nil, `did you mean "grpo"?`},
		{"reward_model.reward_manager=prime", "", nil, `veRL's prime manager (a process pool with a per-sample timeout) is "parallel" here`},
		{"algorithm.adv_estimator=remax", "", nil, "remax needs greedy-rollout reward baselines"},
		{"data.truncation=both", "", nil, `data.truncation: "both" is not one of error, left, right, middle`},
		{"actor_rollout_ref.actor.optim.betas=0.9", "", nil, `expected a list of numbers`},
		{"actor_rollout_ref.actor.optim.betas=[0.9,x]", "", nil, `actor_rollout_ref.actor.optim.betas[1]: expected a number, got "x"`},
		{"data.train_files=[a,[b]]", "", nil, `data.train_files[1]: expected a string, got a list`},
		{"data.train_files={a: b}", "", nil, `expected a string or a list of strings, got a mapping`},
		{"data=3", "", nil, `data is a section and must be a mapping of keys, not "3"`},
		{"task.config=3", "", nil, `task.config takes a mapping of any keys, not "3"`},
		{"task.config.x=.inf", "", nil, "task.config.x: \".inf\" is not a finite number"},
		{"trainer.experiment_name=${trainer.project_name}", "", nil, "interpolation, which rlhost does not support"},
		{"data.train_batch_size", "", nil, "expected key=value"},
		{"~data.seed", "", nil, "deleting a key (~data.seed) is not supported"},
		{"=3", "", nil, "empty key"},
		{"data..seed=3", "", nil, `key "data..seed" has an empty part`},
		{"data.seed=[1", "", nil, `data.seed: value "[1" is not valid YAML`},
		{"data={seed: 1, seed: 2}", "", nil, "data.seed is given twice"},
		{"data={seed: 1, foo: 2}", "", nil, `unknown key "data.foo"`},
	}
	for _, tt := range tests {
		c := Default()
		err := c.Apply(tt.override)
		if tt.err != "" {
			if err == nil {
				t.Errorf("Apply(%q) = nil, want error containing %q", tt.override, tt.err)
			} else if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Apply(%q) = %q, want it to contain %q", tt.override, err, tt.err)
			} else if !strings.HasPrefix(err.Error(), "config: ") {
				t.Errorf("Apply(%q) = %q: no package prefix", tt.override, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Apply(%q): %v", tt.override, err)
			continue
		}
		key := tt.key
		if key == "" {
			key, _, _ = strings.Cut(strings.TrimLeft(tt.override, "+"), "=")
		}
		got, err := c.Get(key)
		if err != nil {
			t.Errorf("after %q: Get(%q): %v", tt.override, key, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("after %q: Get(%q) = %#v, want %#v", tt.override, key, got, tt.want)
		}
	}
}

// A failed override names the override; errors are *Error with the key.
func TestErrorType(t *testing.T) {
	err := Default().Apply("data.train_batch_size=abc")
	var e *Error
	if !errors.As(err, &e) || e.Key != "data.train_batch_size" || e.Override != `"data.train_batch_size=abc"` {
		t.Fatalf("error %#v", err)
	}
	if want := `config: override "data.train_batch_size=abc": data.train_batch_size: "abc" is not an int`; err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}

func TestSetMergesMaps(t *testing.T) {
	c := Default()
	for _, kv := range [][2]string{
		{"task.config", "{a: 1, b: {c: 2}}"},
		{"task.config", "{b: {d: 3}}"},
		{"task.config.b.e", "4"},
	} {
		if err := c.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := c.Get("task.config")
	want := map[string]any{"a": 1, "b": map[string]any{"c": 2, "d": 3, "e": 4}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("task.config = %#v, want %#v", got, want)
	}
	if err := c.Set("task.config", "null"); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get("task.config"); !reflect.DeepEqual(got, map[string]any{}) {
		t.Errorf("after null: %#v", got)
	}
	// Get returns copies.
	c.Set("task.config.x", "{y: 1}")
	m, _ := c.Get("task.config")
	m.(map[string]any)["x"].(map[string]any)["y"] = 2
	if v, _ := c.Get("task.config.x.y"); v != 1 {
		t.Errorf("Get shares the map: %v", v)
	}
	if err := c.Set("task.config.x.y.z", "1"); err == nil || !strings.Contains(err.Error(), "task.config.x.y.z: x.y is an int, not a mapping") {
		t.Errorf("Set below a scalar = %v", err)
	}
	if _, err := c.Get("task.config.missing"); err == nil || !strings.Contains(err.Error(), "task.config.missing is not set") {
		t.Errorf("Get missing = %v", err)
	}
	if _, err := c.Get("data.train_bach_size"); err == nil || !strings.Contains(err.Error(), `did you mean "data.train_batch_size"`) {
		t.Errorf("Get unknown = %v", err)
	}
}

func TestGetSection(t *testing.T) {
	c := Default()
	v, err := c.Get("algorithm.kl_ctrl")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "fixed", "kl_coef": 0.001, "horizon": 10000, "target_kl": 0.1}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("Get(algorithm.kl_ctrl) = %#v", v)
	}
	c.Apply("actor_rollout_ref.rollout.trace.backend=weave")
	v, _ = c.Get("trainer.rollout_trace")
	if !reflect.DeepEqual(v, map[string]any{"backend": []string{"weave"}, "token2text": nil}) {
		t.Errorf("Get(trainer.rollout_trace) = %#v", v)
	}
}

// Both spellings of the trace config set the same keys, in files and overrides;
// the backend is a name or a list.
func TestTraceSpellings(t *testing.T) {
	files := map[string]string{
		"new.yaml":  "actor_rollout_ref:\n  rollout:\n    trace:\n      backend: mlflow\n      token2text: true\n",
		"old.yaml":  "trainer:\n  rollout_trace:\n    backend: mlflow\n    token2text: true\n",
		"list.yaml": "trainer:\n  rollout_trace:\n    backend: [mlflow]\n    token2text: true\n",
	}
	for name, text := range files {
		c := Default()
		if err := c.Parse(name, []byte(text)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tr := c.ActorRolloutRef.Rollout.Trace
		if !reflect.DeepEqual(tr.Backend, StringList{"mlflow"}) || tr.Token2Text == nil || !*tr.Token2Text {
			t.Errorf("%s: trace = %+v", name, tr)
		}
	}
	for _, o := range [][]string{
		{"actor_rollout_ref.rollout.trace.backend=[mlflow,weave]", "actor_rollout_ref.rollout.trace.token2text=true"},
		{"+trainer.rollout_trace.backend=[mlflow,weave]", "+trainer.rollout_trace.token2text=True"},
	} {
		c, err := Load(nil, o)
		if err != nil {
			t.Fatal(err)
		}
		tr := c.ActorRolloutRef.Rollout.Trace
		if !reflect.DeepEqual(tr.Backend, StringList{"mlflow", "weave"}) || tr.Token2Text == nil || !*tr.Token2Text {
			t.Errorf("%q: trace = %+v", o, tr)
		}
	}
	// The later spelling wins, whichever it is.
	c, err := Load(nil, []string{"actor_rollout_ref.rollout.trace.backend=weave", "trainer.rollout_trace.backend=mlflow"})
	if err != nil || !reflect.DeepEqual(c.ActorRolloutRef.Rollout.Trace.Backend, StringList{"mlflow"}) {
		t.Errorf("later spelling: %v %v", c, err)
	}
	// WriteYAML writes the current spelling only.
	var buf bytes.Buffer
	c.WriteYAML(&buf)
	if strings.Contains(buf.String(), "rollout_trace") || !strings.Contains(buf.String(), "backend: mlflow") {
		t.Errorf("WriteYAML:\n%s", buf.String())
	}
}

func TestMLflowTrackingURIFromEnv(t *testing.T) {
	t.Setenv("MLFLOW_TRACKING_URI", "http://mlflow.local:5000")
	c, err := Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get("trainer.mlflow_tracking_uri"); v != "http://mlflow.local:5000" {
		t.Errorf("from env: %v", v)
	}
	c, err = Load(nil, []string{"trainer.mlflow_tracking_uri=http://other:1"})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get("trainer.mlflow_tracking_uri"); v != "http://other:1" {
		t.Errorf("override: %v", v)
	}
}

func TestDerived(t *testing.T) {
	c, err := Load(nil, []string{
		"actor_rollout_ref.actor.clip_ratio_low=0.1", "actor_rollout_ref.actor.clip_ratio_high=0.28",
		"actor_rollout_ref.rollout.response_length=64", "actor_rollout_ref.rollout.prompt_length=100",
		"actor_rollout_ref.rollout.seed=9", "actor_rollout_ref.rollout.agent.num_workers=3",
		"algorithm.adv_estimator=gae", "trainer.run_dir=/tmp/r",
		"actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !c.CriticEnabled() || c.ClipRatioLow() != 0.1 || c.ClipRatioHigh() != 0.28 || c.ResponseLength() != 64 ||
		c.PromptLength() != 100 || c.RolloutSeed() != 9 || c.AgentWorkers() != 3 || c.RunDir() != "/tmp/r" {
		t.Errorf("derived: %v %v %v %v %v %v %v %v", c.CriticEnabled(), c.ClipRatioLow(), c.ClipRatioHigh(),
			c.ResponseLength(), c.PromptLength(), c.RolloutSeed(), c.AgentWorkers(), c.RunDir())
	}
	o := c.ActorRolloutRef.Actor.Optim
	if got := o.WarmupSteps(50); got != 5 {
		t.Errorf("WarmupSteps(50) with ratio 0.1 = %d, want 5", got)
	}
	o.LRWarmupSteps = 3
	if got := o.WarmupSteps(50); got != 3 {
		t.Errorf("WarmupSteps with lr_warmup_steps=3 = %d", got)
	}
	o.LRWarmupSteps = -1
	if got := o.WarmupSteps(50); got != 5 {
		t.Errorf("WarmupSteps with lr_warmup_steps=-1 = %d, want the ratio's 5", got)
	}
	if got := Default().ActorRolloutRef.Actor.Optim.WarmupSteps(1000); got != 0 {
		t.Errorf("default WarmupSteps(1000) = %d, want 0", got)
	}
	if c.CriticMiniBatchSize() != c.ActorRolloutRef.Actor.PPOMiniBatchSize || c.CriticPPOEpochs() != c.ActorRolloutRef.Actor.PPOEpochs {
		t.Errorf("null critic mini-batch / epochs = %d / %d, want the actor's %d / %d", c.CriticMiniBatchSize(), c.CriticPPOEpochs(),
			c.ActorRolloutRef.Actor.PPOMiniBatchSize, c.ActorRolloutRef.Actor.PPOEpochs)
	}
	for _, o := range []string{"critic.ppo_mini_batch_size=2", "critic.ppo_epochs=3", "actor_rollout_ref.actor.ppo_epochs=2"} {
		if err := c.Apply(o); err != nil {
			t.Fatal(err)
		}
	}
	if c.CriticMiniBatchSize() != 2 || c.CriticPPOEpochs() != 3 || c.ActorRolloutRef.Actor.PPOEpochs != 2 {
		t.Errorf("critic mini-batch / epochs = %d / %d, want 2 / 3", c.CriticMiniBatchSize(), c.CriticPPOEpochs())
	}
	c.Apply("critic.enable=false")
	c.Apply("algorithm.adv_estimator=grpo")
	if c.CriticEnabled() {
		t.Error("critic.enable=false ignored")
	}
	ob, err := c.OverlongBuffer()
	if err != nil || ob != (OverlongBuffer{PenaltyFactor: 1}) {
		t.Errorf("OverlongBuffer() = %+v, %v", ob, err)
	}
	c.Apply("reward_model.reward_kwargs.overlong_buffer_cfg={enable: true, len: 16, penalty_factor: 0.5}")
	ob, err = c.OverlongBuffer()
	if err != nil || ob != (OverlongBuffer{Enable: true, Len: 16, PenaltyFactor: 0.5}) {
		t.Errorf("OverlongBuffer() = %+v, %v", ob, err)
	}
}

func TestWarnings(t *testing.T) {
	c, err := Load(nil, []string{
		"actor_rollout_ref.actor.fsdp_config.param_offload=False",
		"actor_rollout_ref.actor.fsdp_config.param_offload=True",
		"actor_rollout_ref.actor.fsdp_config.fsdp_size=1",
		"actor_rollout_ref.rollout.name=vllm",
		"trainer.n_gpus_per_node=8",
		"custom_reward_function.path=null",
		"actor_rollout_ref.rollout.n=1",
		"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"actor_rollout_ref.actor.fsdp_config: accepted for veRL compatibility, no effect (FSDP is not used; of fsdp_config only fsdp_size takes effect)",
		"custom_reward_function: accepted for veRL compatibility, no effect (rewards come from the task plugin's Score)",
		"actor_rollout_ref.rollout.name=vllm: rlhost generates with its built-in engine",
		"algorithm.adv_estimator=grpo with actor_rollout_ref.rollout.n=1: every group holds one response, so there is no group baseline (as in veRL)",
		"trainer.n_gpus_per_node=8 trainer.nnodes=1: rlhost trains in one process",
	}
	if got := c.Warnings(); !reflect.DeepEqual(got, want) {
		t.Errorf("Warnings() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fs := c.ActorRolloutRef.Actor.FSDPConfig.FSDPSize; fs != 1 { // beside the keys without effect
		t.Errorf("actor_rollout_ref.actor.fsdp_config.fsdp_size = %d, want 1", fs)
	}
}

// The algorithm keys accept exactly what host/algo implements, "+" KL variants included.
func TestAlgoEnums(t *testing.T) {
	for _, o := range []string{
		"actor_rollout_ref.actor.kl_loss_type=low_var_kl+", "algorithm.kl_penalty=k3+",
		"actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm", "critic.loss_agg_mode=seq-mean-token-mean",
		"algorithm.adv_estimator=rloo",
	} {
		if err := Default().Apply(o); err != nil {
			t.Errorf("%s: %v", o, err)
		}
	}
	if err := Default().Apply("algorithm.kl_penalty=full"); err == nil {
		t.Error("kl_penalty=full accepted, but host/algo does not implement it")
	}
}

// A failed override changes nothing, even when part of it was valid.
func TestApplyAtomic(t *testing.T) {
	c := Default()
	if err := c.Apply("data={seed: 1, foo: 2}"); err == nil {
		t.Fatal("no error")
	}
	if c.Data.Seed != 42 {
		t.Errorf("data.seed = %d after a failed override", c.Data.Seed)
	}
	if err := c.Apply("task.config={a: 1, b: .nan}"); err == nil {
		t.Fatal("no error")
	}
	if len(c.Task.Config) != 0 {
		t.Errorf("task.config = %v after a failed override", c.Task.Config)
	}
}
