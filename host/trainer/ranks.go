package trainer

// A step's metrics in a data-parallel job: each rank measures its share of the batch, and
// every rank's figures are merged into the ones a single rank would have measured on the
// whole batch, by what each metric is (rankReduce): a sum of counts, the largest or smallest
// value, a mean weighted by each rank's trajectories (or valid tokens, or a task's or data
// source's trajectories), the slowest rank's seconds, or a value every rank already has
// (the update's metrics, reduced as the update ran; the failure budget's fractions). The
// rules are declared with the metrics (metricnames.go, rankReduce).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/rlhost/rlhost/host/dist"
	"github.com/rlhost/rlhost/host/tracing"
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
	if t.cfg.ActorRolloutRef.Rollout.Name == "openai" {
		return fmt.Errorf("trainer: actor_rollout_ref.rollout.name=openai with %d ranks: an external engine's rollouts run on one rank for now (docs/distributed.md)", n)
	}
	for _, k := range []struct {
		key string
		fs  int
	}{{"actor_rollout_ref.actor.fsdp_config.fsdp_size", t.cfg.ActorRolloutRef.Actor.FSDPConfig.FSDPSize}, {"critic.fsdp.fsdp_size", t.cfg.Critic.FSDP.FSDPSize}} {
		if k.fs > 1 && k.fs < n {
			return fmt.Errorf("trainer: %s=%d with %d ranks: sharding groups smaller than the job (veRL's hybrid sharding) are not supported; "+
				"use -1 to shard the optimizer over every rank or 1 to keep it whole on each", k.key, k.fs, n)
		}
	}
	return nil
}

// shipRankTraces hands rank 0 the spans the other ranks' tracers kept (tracing.Config.Relay)
// since the last call, which its tracer ships with its own: the job's traces are one run's,
// sampled from the whole batch as one rank would. Every rank calls it at the same points (a
// collective); one rank: nothing.
func (t *Trainer) shipRankTraces(ctx context.Context) error {
	if t.dp.size() <= 1 {
		return nil
	}
	var buf bytes.Buffer
	spans, dropped := t.tracer.TakeRelayed()
	if dropped > 0 {
		t.log.Warn("trace spans dropped before they reached rank 0", "spans", dropped)
	}
	if err := tracing.EncodeSpans(&buf, spans); err != nil {
		return fmt.Errorf("trainer: traces: %w", err)
	}
	parts, err := dist.AllGatherBytes(ctx, t.dp.comm, buf.Bytes())
	if err != nil {
		return fmt.Errorf("trainer: the ranks' traces: %w", err)
	}
	if !t.dp.lead() {
		return nil
	}
	for r, p := range parts[1:] {
		spans, err := tracing.DecodeSpans(bytes.NewReader(p), fmt.Sprintf("rank %d's spans", r+1))
		if err != nil {
			return fmt.Errorf("trainer: %w", err)
		}
		t.tracer.Relayed(spans)
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
	merged, err := t.mergeOverRanks(ctx, s.vals, w)
	if err != nil {
		return err
	}
	s.vals = merged
	return nil
}

// mergeOverRanks gathers every rank's figures and the weights of its means and returns the
// job's (mergeFigures), the same on every rank.
func (t *Trainer) mergeOverRanks(ctx context.Context, figures, weights map[string]float64) (map[string]float64, error) {
	// NaN and infinities (a failed phase's figures) do not travel as JSON numbers
	vals := map[string]float64{}
	for k, v := range figures {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			vals[k] = v
		}
	}
	b, err := json.Marshal(rankFigures{Vals: vals, Weights: weights})
	if err != nil {
		return nil, err
	}
	parts, err := dist.AllGatherBytes(ctx, t.dp.comm, b)
	if err != nil {
		return nil, fmt.Errorf("trainer: the ranks' metrics: %w", err)
	}
	ranks := make([]rankFigures, len(parts))
	for r, p := range parts {
		if err := json.Unmarshal(p, &ranks[r]); err != nil {
			return nil, fmt.Errorf("trainer: rank %d's metrics: %w", r, err)
		}
	}
	merged := mergeFigures(ranks)
	for k, v := range figures { // what could not travel stays as this rank has it
		if _, ok := merged[k]; !ok {
			merged[k] = v
		}
	}
	return merged, nil
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
