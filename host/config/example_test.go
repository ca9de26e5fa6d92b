package config_test

import (
	"fmt"

	"github.com/rlhost/rlhost/host/config"
)

func ExampleLoad() {
	cfg, err := config.Load(nil, []string{
		"data.train_batch_size=8",
		"actor_rollout_ref.rollout.n=4",
		"+algorithm.adv_estimator=grpo",
		"trainer.logger=[console,mlflow]",
		"+trainer.rollout_trace.backend=mlflow",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Data.TrainBatchSize, cfg.ActorRolloutRef.Rollout.N, cfg.Algorithm.AdvEstimator)
	fmt.Println(cfg.Trainer.Logger, cfg.ActorRolloutRef.Rollout.Trace.Backend)
	fmt.Println(cfg.ResponseLength(), cfg.ClipRatioHigh())
	// Output:
	// 8 4 grpo
	// [console mlflow] [mlflow]
	// 256 0.2
}

func ExampleLoad_unknownKey() {
	_, err := config.Load(nil, []string{"data.train_bach_size=8"})
	fmt.Println(err)
	// Output:
	// config: override "data.train_bach_size=8": unknown key "data.train_bach_size"; did you mean "data.train_batch_size"?
}

func ExampleConfig_Redacted() {
	cfg := config.Default()
	if err := cfg.Set("task.config", "{judge: {url: 'https://judge.example', api_key: sk-123}}"); err != nil {
		fmt.Println(err)
		return
	}
	v, _ := cfg.Get("task.config.judge.api_key")
	fmt.Println(v)
	// Redacted and WriteYAML (--print-config, the run directory's copy) hide it.
	fmt.Println(cfg.Redacted()["task"])
	// Output:
	// sk-123
	// map[adv_norm_scope:global allow_weak_isolation:false config:map[judge:map[api_key:*** url:https://judge.example]] configs:map[] name:<nil> reward_weights:map[] timeouts:map[configure:120 end:900 obs:600 preprocess:60 prompt:60 score:<nil> start:300]]
}

func ExampleKeys() {
	for _, k := range config.Keys() {
		switch k.Name {
		case "data.truncation":
			fmt.Printf("%s (%s %v, default %v): %s\n", k.Name, k.Type, k.Values, k.Default, k.Description)
		case "trainer.rollout_trace.backend":
			fmt.Printf("%s sets %s\n", k.Name, k.AliasOf)
		}
	}
	// Output:
	// data.truncation (enum [error left right middle], default error): what to do with a prompt longer than max_prompt_length that was not filtered
	// trainer.rollout_trace.backend sets actor_rollout_ref.rollout.trace.backend
}
