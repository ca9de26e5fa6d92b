package trainer

// A step's metrics in a data-parallel job: each rank measures its share of the batch, and
// every rank's figures are merged into the ones a single rank would have measured on the
// whole batch, by what each metric is (rankReduce): a sum of counts, the largest or smallest
// value, a mean weighted by each rank's trajectories (or valid tokens, or a task's or data
// source's trajectories), the slowest rank's seconds, or a value every rank already has
// (the update's metrics, reduced as the update ran; the failure budget's fractions). The
// rules are declared with the metrics (metricnames.go, rankReduce).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/rlhost/rlhost/host/dist"
)

// checkRanks refuses what a data-parallel job cannot run: a batch or mini-batch of prompts
// that does not split into whole GRPO groups per rank, and the rollouts of an external
// engine (one fleet for the job: not yet shared by several ranks).
func (t *Trainer) checkRanks() error {
	n := t.dp.size()
	if n <= 1 {
		return nil
	}
	for _, c := range []struct {
		key string
		v   int
	}{{"data.train_batch_size", t.cfg.Data.TrainBatchSize},
		{"actor_rollout_ref.actor.ppo_mini_batch_size", t.cfg.ActorRolloutRef.Actor.PPOMiniBatchSize},
		{"critic.ppo_mini_batch_size", t.cfg.CriticMiniBatchSize()}} {
		if c.v%n != 0 {
			return fmt.Errorf("trainer: %s=%d prompts do not split over %d ranks (each rank takes whole groups): make it a multiple of the world size", c.key, c.v, n)
		}
	}
	if t.cfg.Task.AdvNormScope == "task" && len(t.cfg.TaskNames()) > 1 {
		return fmt.Errorf("trainer: task.adv_norm_scope=task with %d ranks: each task's whitening over the ranks is not yet supported; use global", n)
	}
	if t.cfg.ActorRolloutRef.Rollout.Name == "openai" {
		return fmt.Errorf("trainer: actor_rollout_ref.rollout.name=openai with %d ranks: an external engine's rollouts run on one rank for now (docs/distributed.md)", n)
	}
	return nil
}

// rankFigures is what a rank sends: its step's metrics and the weights of its means.
type rankFigures struct {
	Vals    map[string]float64 `json:"vals"`
	Weights map[string]float64 `json:"weights"`
}

// mergeRankMetrics replaces s.vals with the job's figures (rankReduce) on every rank.
func (t *Trainer) mergeRankMetrics(ctx context.Context, s *stepState) error {
	if t.dp.size() <= 1 {
		return nil
	}
	w := map[string]float64{"rank": 1, "traj": float64(len(s.outs))}
	if s.b != nil {
		var tok float64
		for _, m := range s.b.mask {
			tok += float64(m)
		}
		w["tok"] = tok
	}
	for _, o := range s.outs {
		w["task:"+t.taskOf(o).name]++
		w["ds:"+o.Sample.Row.DataSource]++
	}
	// NaN and infinities (a failed phase's figures) do not travel as JSON numbers
	vals := map[string]float64{}
	for k, v := range s.vals {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			vals[k] = v
		}
	}
	b, err := json.Marshal(rankFigures{Vals: vals, Weights: w})
	if err != nil {
		return err
	}
	parts, err := dist.AllGatherBytes(ctx, t.dp.comm, b)
	if err != nil {
		return fmt.Errorf("trainer: the ranks' metrics: %w", err)
	}
	ranks := make([]rankFigures, len(parts))
	for r, p := range parts {
		if err := json.Unmarshal(p, &ranks[r]); err != nil {
			return fmt.Errorf("trainer: rank %d's metrics: %w", r, err)
		}
	}
	merged := mergeFigures(ranks)
	for k, v := range s.vals { // what could not travel stays as this rank has it
		if _, ok := merged[k]; !ok {
			merged[k] = v
		}
	}
	s.vals = merged
	return nil
}

// mergeFigures combines the ranks' figures, rank by rank in order (the same result on
// every rank), each metric over the ranks that have it.
func mergeFigures(ranks []rankFigures) map[string]float64 {
	keys := map[string]bool{}
	for _, r := range ranks {
		for k := range r.Vals {
			keys[k] = true
		}
	}
	out := map[string]float64{}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		kind, weight, _ := rankReduce(k)
		var acc, wsum float64
		first := true
		for _, r := range ranks {
			v, ok := r.Vals[k]
			if !ok {
				continue
			}
			switch kind {
			case reduceSame:
				if first {
					acc = v
				}
			case reduceSum:
				acc += v
			case reduceMax:
				if first || v > acc {
					acc = v
				}
			case reduceMin:
				if first || v < acc {
					acc = v
				}
			case reduceMean:
				wt := r.Weights[weight]
				acc += v * wt
				wsum += wt
			}
			first = false
		}
		if kind == reduceMean {
			if wsum == 0 {
				continue
			}
			acc /= wsum
		}
		out[k] = acc
	}
	return out
}
