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

// Split is rank's contiguous share [lo, hi) of n units that need not divide evenly (a
// validation set): the first n%size ranks take one more than the others; a rank may take none.
func Split(n, size, rank int) (lo, hi int) {
	k, extra := n/size, n%size
	lo = rank*k + min(rank, extra)
	hi = lo + k
	if rank < extra {
		hi++
	}
	return lo, hi
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
//
// The exchanges run in place in the model's own gradient and parameter buffers (NCCL's
// in-place reduce-scatter and all-gather: a rank's chunk of the buffer is its shard), so
// sharding adds no buffer of the parameters' size. A shard is n/size parameters; the
// last rank also keeps the n%size left over, whose gradients are all-reduced and whose
// weights it broadcasts.
type ZeRO1 struct {
	Config model.AdamWConfig
	Step   int

	model.MomentPair // this rank's shard's

	c     Comm
	be    gpu.Backend
	n     int // trainable parameters
	shard int // parameters of a rank's chunk: n/size
}

// NewZeRO1 returns the sharded optimizer of m's trainable parameters for rank c.
func NewZeRO1(c Comm, m *model.Model, cfg model.AdamWConfig) *ZeRO1 {
	params, _ := m.Trainable()
	return NewZeRO1Flat(c, m.Backend(), len(params), cfg)
}

// NewZeRO1Flat returns the sharded optimizer of n parameters of be in one buffer, for
// UpdateFlat.
func NewZeRO1Flat(c Comm, be gpu.Backend, n int, cfg model.AdamWConfig) *ZeRO1 {
	z := &ZeRO1{Config: cfg, c: c, be: be, n: n, shard: n / c.Size()}
	lo, hi := z.Range()
	z.MomentPair = model.NewMomentPair(z.be, hi-lo, "AdamW (a ZeRO-1 shard)")
	return z
}

// Range is the parameters [lo, hi) whose moments this rank keeps.
func (z *ZeRO1) Range() (lo, hi int) { return shardRange(z.n, z.c.Size(), z.c.Rank()) }

// shardRange is rank's shard of n parameters over size ranks: n/size each, the last
// rank the remainder too.
func shardRange(n, size, rank int) (lo, hi int) {
	k := n / size
	lo, hi = rank*k, (rank+1)*k
	if rank == size-1 {
		hi = n
	}
	return lo, hi
}

// Update reduces the ranks' gradients of m, clips them to the global norm and applies
// one AdamW step, as model.AdamW.Update does over all-reduced gradients; it returns the
// global norm before clipping. m's gradients outside this rank's shard are left as the
// rank's own, those inside it are the reduced (and clipped) ones.
func (z *ZeRO1) Update(ctx context.Context, m *model.Model) (float64, error) {
	params, grads := m.Trainable()
	if grads == nil {
		return 0, fmt.Errorf("dist: ZeRO-1 update without gradients")
	}
	norm, err := z.UpdateFlat(ctx, params, grads, nil)
	if err != nil {
		return 0, err
	}
	m.Params.Changed()
	return norm, nil
}

// UpdateFlat is Update for the parameters and gradients of NewZeRO1Flat's buffer. extra are
// gradients outside it that every rank already holds reduced (a critic's value head, whose
// small optimizer every rank keeps whole): they count in the global norm, once, and are
// clipped with the shard; their AdamW step is the caller's.
func (z *ZeRO1) UpdateFlat(ctx context.Context, params, grads []float32, extra [][]float32) (float64, error) {
	if len(params) != z.n || len(grads) != z.n {
		return 0, fmt.Errorf("dist: ZeRO-1 state for %d parameters, given %d (gradients %d)", z.n, len(params), len(grads))
	}
	be, c, size, k := z.be, z.Config, z.c.Size(), z.shard
	lo, hi := z.Range()
	whole := size * k // the chunks exchanged in place; [whole, n) is the remainder
	if k > 0 {
		if err := z.c.ReduceScatter(ctx, grads[:whole], grads[lo:lo+k], Sum); err != nil {
			return 0, fmt.Errorf("ZeRO-1 gradients: %w", err)
		}
	}
	if whole < z.n {
		if err := z.c.AllReduce(ctx, grads[whole:z.n], Sum); err != nil {
			return 0, fmt.Errorf("ZeRO-1 gradients: %w", err)
		}
	}
	sq := []float64{be.SumSquares(grads[lo:hi])}
	if err := z.c.AllReduce64(ctx, sq, Sum); err != nil {
		return 0, fmt.Errorf("ZeRO-1 gradient norm: %w", err)
	}
	for _, g := range extra {
		sq[0] += be.SumSquares(g)
	}
	norm := math.Sqrt(sq[0])
	if c.MaxGradNorm > 0 {
		if f := float64(c.MaxGradNorm) / (norm + 1e-6); f < 1 { // gpu.ClipGradNorm's factor
			be.Scale(grads[lo:hi], float32(f))
			for _, g := range extra {
				be.Scale(g, float32(f))
			}
		}
	}
	z.Step++
	if hi > lo {
		m, v := z.Tensors()
		be.AdamW(params[lo:hi], grads[lo:hi], m, v, z.Step, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay)
	}
	if k > 0 {
		if err := z.c.AllGather(ctx, params[lo:lo+k], params[:whole]); err != nil {
			return 0, fmt.Errorf("ZeRO-1 parameters: %w", err)
		}
	}
	if whole < z.n {
		if err := z.c.Broadcast(ctx, params[whole:z.n], size-1); err != nil {
			return 0, fmt.Errorf("ZeRO-1 parameters: %w", err)
		}
	}
	return norm, nil
}

// SetMoments restores the moments of this rank's shard and the step count.
func (z *ZeRO1) SetMoments(m, v []float32, step int) error {
	if err := z.LoadMoments(m, v); err != nil {
		return fmt.Errorf("dist: ZeRO-1 shard: %w", err)
	}
	z.Step = step
	return nil
}

// GatherMoments passes the whole optimizer's moments, in pieces, to put on rank 0: put(off,
// m, v) is the moments of parameters [off, off+len(m)), each parameter once, in no
// particular order. It is a collective: every rank calls it (put is called on rank 0
// only; the others may pass nil). The pieces are at most chunk parameters a rank (0:
// 1<<20), so no rank holds more than size*chunk of them at once.
func (z *ZeRO1) GatherMoments(ctx context.Context, chunk int, put func(off int, m, v []float32) error) error {
	if chunk <= 0 {
		chunk = 1 << 20
	}
	size, k, rank := z.c.Size(), z.shard, z.c.Rank()
	lo, hi := z.Range()
	zm, zv := z.Tensors()
	moments := [][]float32{zm, zv}
	var putErr error
	emit := func(off int, m, v []float32) {
		if putErr == nil {
			putErr = put(off, m, v)
		}
	}
	for j := 0; j < k; j += chunk {
		kk := min(chunk, k-j)
		send, recv := z.be.Alloc("ZeRO-1 moments (send)", kk), z.be.Alloc("ZeRO-1 moments (gathered)", size*kk)
		var parts [2][]float32
		for i, mom := range moments {
			z.be.Copy(send, mom[j:j+kk])
			if err := z.c.AllGather(ctx, send, recv); err != nil {
				z.be.Free(send)
				z.be.Free(recv)
				return fmt.Errorf("ZeRO-1 moments: %w", err)
			}
			if rank == 0 {
				parts[i] = make([]float32, size*kk)
				z.be.Download(parts[i], recv)
			}
		}
		z.be.Free(send)
		z.be.Free(recv)
		if rank == 0 {
			for r := range size {
				emit(r*k+j, parts[0][r*kk:(r+1)*kk], parts[1][r*kk:(r+1)*kk])
			}
		}
	}
	if tail := z.n - size*k; tail > 0 {
		buf := z.be.Alloc("ZeRO-1 moments (remainder)", tail)
		var parts [2][]float32
		for i, mom := range moments {
			if rank == size-1 {
				z.be.Copy(buf, mom[hi-lo-tail:])
			}
			if err := z.c.Broadcast(ctx, buf, size-1); err != nil {
				z.be.Free(buf)
				return fmt.Errorf("ZeRO-1 moments: %w", err)
			}
			parts[i] = make([]float32, tail)
			z.be.Download(parts[i], buf)
		}
		z.be.Free(buf)
		if rank == 0 {
			emit(size*k, parts[0], parts[1])
		}
	}
	return putErr
}
