// Package algo holds the reinforcement-learning algorithms of the trainer as pure functions:
// advantage estimators, the clipped policy loss, loss aggregation, KL penalties and
// controllers, the entropy bonus, the clipped value loss, and the learning-rate schedule
// (LRSchedule) of rlhost train and rlhost sft. Nothing here does I/O or keeps state, except the
// adaptive KL controller's coefficient.
//
// The formulas are veRL's (verl/trainer/ppo/core_algos.py); docs/algorithms.md lists them,
// and says where rlhost differs on purpose.
//
// # Layout of the arrays
//
// Per-token arrays are flat, row-major [B*T] float32 slices over the response tokens of B
// sequences padded to T tokens: element b*T+t is token t of sequence b.
//
//	B batch (sequences), T response time steps (padded)
//
// mask is 1 on the tokens the model produced (the loss is taken there) and 0 on padding and
// on tool or user tokens inside a multi-turn response. tokenRewards carries each sequence's
// scalar reward on its last valid token (see host/reward.PlaceOnLastToken), plus any per-token
// terms such as a KL penalty.
//
// Arithmetic is done in float64 and stored as float32. Gradients follow PyTorch's autograd
// conventions at the kinks, so that they match the reference exactly: a clamp passes the
// gradient when its input lies on a bound, a max or min of two equal values sends half of
// the gradient to each, and |x| has gradient 0 at 0.
//
// # Errors
//
// The functions take validated input. A length that does not match B*T, an unknown
// aggregation mode or KL kind is a programming error and panics with a message starting
// with "algo: "; configuration layers check user input first with [CheckAggMode],
// [CheckKLKind] and [PolicyLossConfig.Check].
package algo
