// Package device opens the compute backend a run names (trainer.device: gpu/cpu
// or gpu/cuda) and sets how the CUDA backend's matrix products compute. rlhost
// train and rlhost sft open theirs here, each with its own precision key
// (actor_rollout_ref.actor.dtype; model.fsdp_config.mixed_precision.param_dtype).
package device
