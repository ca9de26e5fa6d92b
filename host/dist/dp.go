package dist

import (
	"context"
	"fmt"
	"math"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/model"
)

// Shard is rank's share of n units (the prompts of a batch, each with its whole GRPO
// group, so that a group's statistics stay on one rank): the contiguous range [lo, hi) of
// n/size units. n must be a multiple of size (veRL's rule for its batch sizes): equal
// shares keep the ranks' steps the same length, and each rank's token-mean loss a known
// part of the whole batch's.
func Shard(n, size, rank int) (lo, hi int, err error) {
	if size < 1 || rank < 0 || rank >= size {
		return 0, 0, fmt.Errorf("dist: rank %d of %d", rank, size)
	}
	if n%size != 0 {
		return 0, 0, fmt.Errorf("dist: %d units do not split evenly over %d ranks; make the batch a multiple of the world size", n, size)
	}
	k := n / size
	return rank * k, (rank + 1) * k, nil
}

// DefaultBucket is the floats of a gradient bucket: 25 MiB of float32, PyTorch DDP's
// bucket_cap_mb.
const DefaultBucket = 25 << 20 / 4

// AllReduceGradients sums the ranks' gradients, in place, in buckets of bucket floats
// taken in order: the cut DDP makes so that the first buckets travel while the backward
// still computes the rest. Every rank gets the same bits, so every rank's update is the
// same. Each rank's gradient must already be its share of the batch's loss (a token-mean
// over the whole batch, not over the rank's part).
func AllReduceGradients(ctx context.Context, c Comm, grads []float32, bucket int) error {
	if bucket <= 0 {
		bucket = DefaultBucket
	}
	for lo := 0; lo < len(grads); lo += bucket {
		hi := min(lo+bucket, len(grads))
		if err := c.AllReduce(ctx, grads[lo:hi], Sum); err != nil {
			return fmt.Errorf("gradient bucket %d-%d: %w", lo, hi, err)
		}
	}
	return nil
}

// ZeRO1 is AdamW with its moments sharded across the ranks (ZeRO stage 1, FSDP's
// SHARD_GRAD_OP for the optimizer alone): each rank keeps the moments of one shard of
// the parameters, the gradients are reduce-scattered so that each rank receives the sum
// of its shard only, the global norm is the all-reduced sum of the shards' squares, each
// rank updates its shard, and the shards are all-gathered into every rank's parameters.
// An optimizer's state then takes 1/size of a rank's memory, and the update gives the
// same weights as AdamW over the all-reduced gradients.
type ZeRO1 struct {
	Config model.AdamWConfig
	Step   int

	c      Comm
	be     gpu.Backend
	n      int // trainable parameters
	shard  int // floats a rank: ceil(n/size)
	m, v   []float32
	pad    []float32 // size*shard: the gradients, padded, to reduce-scatter
	gshard []float32 // this rank's reduced gradients
	pshard []float32 // this rank's parameters, padded, to all-gather
	all    []float32 // size*shard: the gathered parameters
}

// NewZeRO1 returns the sharded optimizer of m's trainable parameters for rank c.
func NewZeRO1(c Comm, m *model.Model, cfg model.AdamWConfig) *ZeRO1 {
	params, _ := m.Trainable()
	n, size := len(params), c.Size()
	shard := (n + size - 1) / size
	be := m.Backend()
	return &ZeRO1{Config: cfg, c: c, be: be, n: n, shard: shard,
		m: be.Alloc("AdamW first moments (shard)", shard), v: be.Alloc("AdamW second moments (shard)", shard),
		pad: make([]float32, size*shard), gshard: make([]float32, shard), pshard: make([]float32, shard),
		all: make([]float32, size*shard)}
}

// Range is the parameters [lo, hi) whose moments this rank keeps.
func (z *ZeRO1) Range() (lo, hi int) {
	lo = min(z.c.Rank()*z.shard, z.n)
	return lo, min(lo+z.shard, z.n)
}

// Update reduces the ranks' gradients of m, clips them to the global norm and applies
// one AdamW step, as model.AdamW.Update does over all-reduced gradients; it returns the
// global norm before clipping. m's gradients are left as they were (the rank's own).
func (z *ZeRO1) Update(ctx context.Context, m *model.Model) (float64, error) {
	params, grads := m.Trainable()
	if grads == nil {
		return 0, fmt.Errorf("dist: ZeRO-1 update without gradients")
	}
	if len(params) != z.n {
		return 0, fmt.Errorf("dist: ZeRO-1 state for %d parameters, the model has %d", z.n, len(params))
	}
	be, c := z.be, z.Config
	copy(z.pad, grads) // the padding stays 0
	if err := z.c.ReduceScatter(ctx, z.pad, z.gshard, Sum); err != nil {
		return 0, fmt.Errorf("ZeRO-1 gradients: %w", err)
	}
	sq := []float64{be.SumSquares(z.gshard)}
	if err := z.c.AllReduce64(ctx, sq, Sum); err != nil {
		return 0, fmt.Errorf("ZeRO-1 gradient norm: %w", err)
	}
	norm := math.Sqrt(sq[0])
	if c.MaxGradNorm > 0 {
		if f := float64(c.MaxGradNorm) / (norm + 1e-6); f < 1 { // gpu.ClipGradNorm's factor
			be.Scale(z.gshard, float32(f))
		}
	}
	z.Step++
	lo, hi := z.Range()
	k := hi - lo
	if k > 0 {
		be.AdamW(params[lo:hi], z.gshard[:k], z.m[:k], z.v[:k], z.Step, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay)
	}
	clear(z.pshard)
	copy(z.pshard, params[lo:hi])
	if err := z.c.AllGather(ctx, z.pshard, z.all); err != nil {
		return 0, fmt.Errorf("ZeRO-1 parameters: %w", err)
	}
	be.Upload(params, z.all[:z.n])
	m.Params.Changed()
	return norm, nil
}
