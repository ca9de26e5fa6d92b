package trainer

import (
	"context"
	"fmt"
	"time"

	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/host/progress"
	"github.com/rlhost/rlhost/host/rollout"
)

// validateAt validates after step when trainer.test_freq says so: every test_freq steps and
// after the last; nothing otherwise.
func (t *Trainer) validateAt(ctx context.Context, step int) (map[string]float64, error) {
	tc := t.cfg.Trainer
	if tc.TestFreq <= 0 || (step%tc.TestFreq != 0 && step != t.totalSteps) {
		return nil, nil
	}
	return t.validate(ctx, step)
}

// validate runs the validation set with val_kwargs and returns val-core metrics per data source.
// On several ranks each runs its share of the set (dist.Split: contiguous, as even as the
// set allows), its samples named by their place in the whole set, and the ranks' figures
// are merged into the whole set's (rankReduce).
func (t *Trainer) validate(ctx context.Context, step int) (map[string]float64, error) {
	vals := map[string]float64{}
	if len(t.val) == 0 {
		return vals, nil
	}
	start := time.Now()
	lo, hi := t.dp.split(len(t.val))
	exs := make([]*example, 0, hi-lo)
	for i := lo; i < hi; i++ {
		exs = append(exs, &t.val[i])
	}
	n := max(t.cfg.ActorRolloutRef.Rollout.ValKwargs.N, 1)
	samples := t.samplesFor(exs, fmt.Sprintf("val%d", step), lo, n, step, true)
	bar := progress.New(t.opts.Progress, fmt.Sprintf("validate (step %d)", step), int64(len(samples)), "trajectories")
	bar.Waiting(t.tasks.waitingOn)
	batch := make([]int64, len(t.val))
	for i := range t.val {
		batch[i] = t.val[i].SampleIndex
	}
	res, dropped, err := t.runRollouts(ctx, true, samples, batch, bar)
	if err != nil {
		return nil, err
	}
	outs := res.Kept()
	scores, results, _, err := t.score(ctx, outs)
	if err != nil {
		return nil, err
	}
	t.endTraces(outs, scores, results, nil, nil)
	if err := t.shipRankTraces(ctx); err != nil {
		return nil, err
	}
	sum := map[string]float64{}
	cnt := map[string]float64{}
	tsum := map[string]float64{}
	tcnt := map[string]float64{}
	for i, o := range outs {
		ds := o.Sample.Row.DataSource
		sum[ds] += scores[i]
		cnt[ds]++
		tn := t.taskOf(o).name
		tsum[tn] += scores[i]
		tcnt[tn]++
	}
	for ds := range sum {
		vals[fillName(valCoreReward, ds)] = sum[ds] / cnt[ds]
	}
	if len(outs) > 0 {
		// How the policy uses its tools under validation: calls per trajectory, and the
		// fraction of trajectories with at least one call.
		withCall := 0
		for _, o := range outs {
			if o.ToolCalls > 0 {
				withCall++
			}
		}
		rm := rollout.Metrics(outs)
		vals[valAuxToolCallsMean] = rm[metrics.ToolCallsMean]
		vals[valAuxToolCallFrac] = float64(withCall) / float64(len(outs))
		vals[valAuxNumTurnsMean] = rm[metrics.NumTurnsMean]
		vals[valAuxResponseLength] = rm[metrics.ResponseLengthMean]
	}
	vals[valDropped] = float64(res.Dropped)
	if t.tasks.mixed() {
		// Per task as well as per data_source (a task may serve several sources).
		for tn := range tsum {
			vals[fillName(valCoreTaskReward, tn)] = tsum[tn] / tcnt[tn]
		}
		for tn, d := range dropped {
			vals[fillName(valDroppedTask, tn)] = float64(d[1])
		}
	}
	vals[timingTesting] = time.Since(start).Seconds()
	if k := t.cfg.Trainer.LogValGenerations - lo*n; k > 0 { // the set's first log_val_generations
		for i, o := range outs {
			if i >= k {
				break
			}
			t.log.Info("validation generation", "step", step, "index", o.Sample.SampleIndex, "score", scores[i],
				"response", t.tk.Decode(o.ResponseIDs, true))
		}
	}
	if t.dp.size() <= 1 {
		return vals, nil
	}
	w := map[string]float64{"traj": float64(len(outs))}
	for ds, c := range cnt {
		w["ds:"+ds] = c
	}
	for tn, c := range tcnt {
		w["task:"+tn] = c
	}
	return t.mergeOverRanks(ctx, vals, w)
}
