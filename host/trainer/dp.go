package trainer

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/host/dist"
)

// dataParallel is a rank's part of a data-parallel job (docs/distributed.md): its
// communicator, and the sharded optimizer when the optimizer state is sharded. The actor's
// update runs on the rank's share of the batch (each GRPO group whole on one rank):
// mini-batches of ppo_mini_batch_size/world trajectories' groups a rank, as veRL divides
// them; the loss normalised by the whole mini-batch's tokens and sequences (all-reduced);
// the gradients all-reduced in buckets before the optimizer, which then takes the same step
// on every rank (or ZeRO-1's shards); the update's metrics summed over the ranks.
// The zero value is one rank.
type dataParallel struct {
	comm   dist.Comm
	zero   *dist.ZeRO1 // nil: AdamW replicated on every rank
	bucket int         // the gradients' all-reduce bucket, floats (0: dist.DefaultBucket)
}

func (d dataParallel) size() int {
	if d.comm == nil {
		return 1
	}
	return d.comm.Size()
}

// localMini is a rank's trajectories in a mini-batch of miniSeqs.
func (d dataParallel) localMini(miniSeqs int) (int, error) {
	n := d.size()
	if miniSeqs%n != 0 {
		return 0, fmt.Errorf("trainer: a mini-batch of %d trajectories does not split over %d ranks", miniSeqs, n)
	}
	return miniSeqs / n, nil
}

// counts sums the mini-batch's token and sequence counts over the ranks.
func (d dataParallel) counts(ctx context.Context, tokens, seqs int) (int, int, error) {
	if d.comm == nil {
		return tokens, seqs, nil
	}
	c := []float64{float64(tokens), float64(seqs)}
	if err := d.comm.AllReduce64(ctx, c, dist.Sum); err != nil {
		return 0, 0, fmt.Errorf("trainer: the mini-batch's token counts: %w", err)
	}
	return int(c[0]), int(c[1]), nil
}

// step reduces the ranks' gradients of m and takes the optimizer step: opt's, or the
// sharded one's. It returns the gradient norm before clipping.
func (d dataParallel) step(ctx context.Context, m *model.Model, opt *model.AdamW) (float64, error) {
	if d.comm == nil {
		return opt.Update(m)
	}
	if d.zero != nil {
		d.zero.Config, d.zero.Step = opt.Config, opt.Step // the step's learning rate
		norm, err := d.zero.Update(ctx, m)
		opt.Step = d.zero.Step
		return norm, err
	}
	_, grads := m.Trainable()
	if err := dist.AllReduceGradients(ctx, d.comm, grads, d.bucket); err != nil {
		return 0, fmt.Errorf("trainer: %w", err)
	}
	return opt.Update(m)
}

// stepValue is step for the critic: the value model's gradients (decoder and head)
// all-reduced, then its optimizer's step (ZeRO-1 does not shard the critic's moments).
func (d dataParallel) stepValue(ctx context.Context, vm *model.ValueModel, opt *model.ValueAdamW) (float64, error) {
	if d.comm != nil {
		for _, g := range [][]float32{vm.Body.Grads.Data, vm.HeadGrad} {
			if err := dist.AllReduceGradients(ctx, d.comm, g, d.bucket); err != nil {
				return 0, fmt.Errorf("trainer: the critic's gradients: %w", err)
			}
		}
	}
	return opt.Update(vm)
}

// sum adds x over the ranks.
func (d dataParallel) sum(ctx context.Context, x float64) (float64, error) {
	g, err := d.sumAll(ctx, x)
	if err != nil {
		return 0, err
	}
	return g[0], nil
}

// sums adds the ranks' sums and counts of the update's metrics (each rank has the same
// names: the same number of mini- and micro-batches) and the padding's token counts.
func (d dataParallel) sums(ctx context.Context, sums, counts map[string]float64, real, pad *int) error {
	if d.comm == nil {
		return nil
	}
	keys := slices.Sorted(maps.Keys(sums))
	buf := make([]float64, 0, 2*len(keys)+2)
	for _, k := range keys {
		buf = append(buf, sums[k], counts[k])
	}
	buf = append(buf, float64(*real), float64(*pad))
	if err := d.comm.AllReduce64(ctx, buf, dist.Sum); err != nil {
		return fmt.Errorf("trainer: the update's metrics: %w", err)
	}
	for i, k := range keys {
		sums[k], counts[k] = buf[2*i], buf[2*i+1]
	}
	*real, *pad = int(buf[2*len(keys)]), int(buf[2*len(keys)+1])
	return nil
}

// lead reports rank 0 (or one rank): the rank that writes the run directory.
func (d dataParallel) lead() bool { return d.comm == nil || d.comm.Rank() == 0 }

// shard is this rank's share [lo, hi) of a step's n prompts (dist.Shard; checkRanks has
// made n a multiple of the ranks).
func (d dataParallel) shard(n int) (lo, hi int) {
	if d.comm == nil {
		return 0, n
	}
	lo, hi, err := dist.Shard(n, d.comm.Size(), d.comm.Rank())
	if err != nil {
		panic(err) // checkRanks refused such a batch
	}
	return lo, hi
}

// shards reports whether an optimizer whose fsdp_size key says fsdpSize is sharded over the
// ranks (ZeRO-1): several ranks and fsdp_size -1 or at least the world size.
func (d dataParallel) shards(fsdpSize int) bool {
	return d.size() > 1 && (fsdpSize < 0 || fsdpSize >= d.size())
}

// split is this rank's share [lo, hi) of n units that need not divide evenly (dist.Split).
func (d dataParallel) split(n int) (lo, hi int) {
	if d.comm == nil {
		return 0, n
	}
	return dist.Split(n, d.comm.Size(), d.comm.Rank())
}

// sumAll adds each of xs over the ranks.
func (d dataParallel) sumAll(ctx context.Context, xs ...float64) ([]float64, error) {
	if d.comm == nil {
		return xs, nil
	}
	buf := slices.Clone(xs)
	if err := d.comm.AllReduce64(ctx, buf, dist.Sum); err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	return buf, nil
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// abort fails every rank's pending and later collectives with cause (this rank's error).
func (d dataParallel) abort(cause error) {
	if d.comm != nil && d.comm.Size() > 1 {
		d.comm.Abort(fmt.Errorf("rank %d: %w", d.comm.Rank(), cause))
	}
}

// ofJob qualifies the counts of a message as the job's on several ranks.
func (d dataParallel) ofJob() string {
	if d.size() <= 1 {
		return ""
	}
	return fmt.Sprintf(" on %d ranks", d.size())
}

// elsewhere is first, this rank's first error, or says the errors were on the other ranks
// when this rank had none.
func (d dataParallel) elsewhere(first string, none bool) string {
	if none && d.size() > 1 {
		return fmt.Sprintf("none on rank %d (the failures were on other ranks)", d.comm.Rank())
	}
	return first
}
