// Package trainer is the training loop: for each step, rollout (the agent loops over the
// batched policy) -> rewards (the task plugin's Score through a reward manager) -> old and
// reference log-probs -> advantages (GRPO, GAE, ...) -> PPO epochs over mini-batches with
// micro-batch gradient accumulation -> AdamW; validation every trainer.test_freq, checkpoints
// every trainer.save_freq, metrics to the configured loggers. Each run has its own directory
// (config.yaml, metrics.jsonl, checkpoints/, traces/, curves.png).
//
// A step reads as its phases (run.go, trainStep): each is a stepPhase that reads what the
// phases before it set in the stepState and returns its metrics, one file each: rollout.go,
// reward.go, logprobs.go (old and reference log-probs), critic.go (values and its update),
// advantage.go, update.go (the actor's PPO epochs), stats.go (the batch's statistics). Every
// metric name is a constant of metricnames.go, which docs/metrics.md lists (make metrics-docs).
// open.go builds a Trainer (New); validate.go, checkpoint.go, sampler.go and dataset.go hold the
// rest of the loop.
package trainer
