package config

import (
	"os"
	"sort"
	"strings"
	"testing"
)

// Keys rlhost has that veRL 0.9.1's resolved PPO trainer config lacks, and why.
var notInVeRL = map[string]string{
	"task.name":                         "rlhost: the task plugin",
	"task.config":                       "rlhost: the task plugin's config",
	"task.allow_weak_isolation":         "rlhost: training a task whose environment cannot hide the dataset (docs/security.md)",
	"task.configs":                      "rlhost: per-task plugin configs of a mixed run",
	"task.reward_weights":               "rlhost: per-task score weights of a mixed run",
	"task.adv_norm_scope":               "rlhost: per-task advantage whitening of a mixed run",
	"task.timeouts.configure":           "rlhost: deadlines of the task plugin's calls",
	"task.timeouts.prompt":              "rlhost: deadlines of the task plugin's calls",
	"task.timeouts.start":               "rlhost: deadlines of the task plugin's calls",
	"task.timeouts.obs":                 "rlhost: deadlines of the task plugin's calls",
	"task.timeouts.end":                 "rlhost: deadlines of the task plugin's calls",
	"task.timeouts.score":               "rlhost: deadlines of the task plugin's calls",
	"task.timeouts.preprocess":          "rlhost: deadlines of the task plugin's calls",
	"data.sampling_weights":             "rlhost: per-data_source mixing weights (veRL only has custom samplers, data.sampler)",
	"actor_rollout_ref.actor.optim.eps": "rlhost: AdamW epsilon (veRL fixes it)",
	"actor_rollout_ref.actor.dtype":     "rlhost: the CUDA products' precision (veRL's nearest: actor.fsdp_config.dtype)",
	"critic.optim.eps":                  "rlhost: AdamW epsilon (veRL fixes it)",
	"actor_rollout_ref.rollout.multi_turn.interaction_config_path": "older veRL",
	"actor_rollout_ref.rollout.trace.max_samples_per_step":         "the run plan's name for veRL's max_samples_per_step_per_worker",
	"reward_model.timeout":                    "rlhost: the parallel reward manager's per-sample timeout",
	"reward_model.reward_kwargs":              "older veRL",
	"reward_model.reward_weights":             "rlhost: weights of several scores",
	"reward_model.reward_weight":              "rlhost: how the reward model's score combines with the task's",
	"reward_model.model.input_tokenizer":      "older veRL",
	"reward_model.judge":                      "rlhost: the LLM judge task plugins call through the host",
	"reward_model.judge.backend":              "rlhost: the LLM judge task plugins call through the host",
	"reward_model.judge.model_path":           "rlhost: the LLM judge task plugins call through the host",
	"reward_model.judge.base_url":             "rlhost: the LLM judge task plugins call through the host",
	"reward_model.judge.model":                "rlhost: the LLM judge task plugins call through the host",
	"reward_model.judge.api_key_env":          "rlhost: the LLM judge task plugins call through the host",
	"reward_model.judge.max_tokens":           "rlhost: the LLM judge task plugins call through the host",
	"reward_model.judge.timeout":              "rlhost: the LLM judge task plugins call through the host",
	"trainer.run_dir":                         "rlhost: the run directory",
	"trainer.seed":                            "rlhost: one seed for the run",
	"trainer.mlflow_tracking_uri":             "rlhost: the mlflow logger",
	"trainer.max_failed_fraction":             "rlhost: the failure budget of a step",
	"trainer.max_consecutive_failed_steps":    "rlhost: the failure budget of a run",
	"trainer.rollout_trace.backend":           "older veRL",
	"trainer.rollout_trace.token2text":        "older veRL",
	"trainer.val_generations_to_log_to_wandb": "older veRL",
	"hydra":    "a Hydra config file's own section",
	"defaults": "a Hydra config file's defaults list",
	"ray_init": "older veRL",
	"actor_rollout_ref.rollout.update_weights_bucket_megabytes": "older veRL",
	"actor_rollout_ref.rollout.engine.base_url":                 "rlhost: the external engine of rollout.name=openai",
	"actor_rollout_ref.rollout.engine.protocol":                 "rlhost: the external engine of rollout.name=openai",
	"actor_rollout_ref.rollout.engine.model":                    "rlhost: the external engine of rollout.name=openai",
	"actor_rollout_ref.rollout.engine.api_key_env":              "rlhost: the external engine of rollout.name=openai",
	"actor_rollout_ref.rollout.engine.timeout":                  "rlhost: the external engine of rollout.name=openai",
	"actor_rollout_ref.rollout.engine.max_retries":              "rlhost: the external engine of rollout.name=openai",
	"actor_rollout_ref.rollout.engine.update_weights_url":       "rlhost: the external engine of rollout.name=openai",
	"actor_rollout_ref.rollout.engine.update_weights_method":    "rlhost: the external engine of rollout.name=openai",
	"actor_rollout_ref.rollout.engine.update_weights_body":      "rlhost: the external engine of rollout.name=openai",
	"actor_rollout_ref.rollout.engine.weights_dir":              "rlhost: the external engine of rollout.name=openai",
	"data.datagen":                           "older veRL",
	"data.sampler":                           "older veRL",
	"reward_model.launch_reward_fn_async":    "older veRL",
	"reward_model.max_length":                "older veRL",
	"reward_model.micro_batch_size_per_gpu":  "older veRL",
	"reward_model.sandbox_fusion":            "older veRL",
	"reward_model.strategy":                  "older veRL",
	"reward_model.use_dynamic_bsz":           "older veRL",
	"trainer.controller_nsight_options":      "older veRL",
	"trainer.log_val_generations_per_source": "older veRL",
	"trainer.npu_profile":                    "older veRL",
	"trainer.profile_steps":                  "older veRL",
	"trainer.use_legacy_worker_impl":         "older veRL",
	"trainer.worker_nsight_options":          "older veRL",
}

// readVeRLKeys reads testdata/verl_ppo_trainer_keys.txt (scripts/goldens/config/verl_keys.py):
// key -> whether it is a section.
func readVeRLKeys(t *testing.T) map[string]bool {
	b, err := os.ReadFile("testdata/verl_ppo_trainer_keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		keys[strings.TrimSuffix(l, ".")] = strings.HasSuffix(l, ".")
	}
	if len(keys) < 500 {
		t.Fatalf("only %d veRL keys", len(keys))
	}
	return keys
}

// rlhost's key names are veRL's: every key is in veRL's config, or listed above.
func TestKeyNamesAreVeRLs(t *testing.T) {
	verl := readVeRLKeys(t)
	for _, k := range Keys() {
		section, ok := verl[k.Name]
		why, listed := notInVeRL[k.Name]
		switch {
		case !ok && !listed:
			t.Errorf("%s is not a veRL 0.9.1 key (a typo? else list it in notInVeRL)", k.Name)
		case ok && listed:
			t.Errorf("%s is a veRL 0.9.1 key but notInVeRL says %q", k.Name, why)
		case ok && section && k.Type != "map" && !k.NoEffect:
			t.Errorf("%s is a section in veRL, a %s here", k.Name, k.Type)
		}
	}
}

// Which keys of veRL's resolved config rlhost rejects (as unknown) is committed in
// testdata/verl_rejected_keys.txt, so that a change shows in review; -update rewrites it.
func TestVeRLKeysAccepted(t *testing.T) {
	verl := readVeRLKeys(t)
	var rejected []string
	accepted := 0
	for k, section := range verl {
		if section {
			continue
		}
		err := Default().Apply(k + "=null")
		if err != nil && strings.Contains(err.Error(), "unknown key") {
			// Report the outermost section rlhost does not know.
			name := k
			for p := parentOf(name); p != ""; p = parentOf(p) {
				if perr := Default().Apply(p + "={}"); perr == nil || !strings.Contains(perr.Error(), "unknown key") {
					break
				}
				name = p
			}
			rejected = append(rejected, name)
			continue
		}
		accepted++
	}
	sort.Strings(rejected)
	rejected = compact(rejected)
	text := "# Keys of veRL 0.9.1's resolved PPO trainer config (testdata/verl_ppo_trainer_keys.txt) that\n" +
		"# rlhost rejects as unknown: features it does not have. Made by TestVeRLKeysAccepted -update.\n" +
		strings.Join(rejected, "\n") + "\n"
	const golden = "testdata/verl_rejected_keys.txt"
	if *update {
		os.WriteFile(golden, []byte(text), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != text {
		t.Errorf("%s differs (go test -run TestVeRLKeysAccepted -update after checking):\n%s", golden, text)
	}
	t.Logf("veRL leaf keys accepted: %d; rejected sections/keys: %d", accepted, len(rejected))
}

func compact(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
