// Package sft is supervised fine-tuning (rlhost sft): the cross-entropy of the assistant's
// tokens of conversations, the cold start of a tool-using agent before RL, and the imitation
// half of rejection-sampling fine-tuning over a run's traces.
//
// Data are veRL's multi-turn SFT parquet (a messages column with assistant tool_calls and
// tool messages, optionally tools) or token rows (input_ids, loss_mask). An [Encoder] lays a
// conversation out exactly as the tool agent loop of host/rollout lays out a trajectory — the
// prompt through rollout.EncodePrompt, each observation through rollout.EncodeObservation, each
// assistant turn as the tokens a policy generates for it, up to its eos token — so SFT and RL
// see the same tokens. Rows that cannot be used are skipped with a named reason and counted
// ([DataStats]); nothing is cut silently.
//
// [Trainer] runs the optimisation (full or LoRA, micro-batches, AdamW with clipping, warm-up
// and cosine decay, validation loss) and writes Hugging Face checkpoints with the tokenizer,
// which rlhost train loads as its starting policy. [TokenRow] writes an example as a token row
// (rlhost sft --from-traces makes them from a run's traced token ids, plugins/local's
// TrajectoryTokens). Configuration keys are veRL's SFT trainer's ([Config], docs/sft.md).
package sft
