package trainer

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/rlhost/rlhost/host/reward"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// reward scores the step's trajectories (s.scores, s.results): the task's Score through the
// reward manager, or the reward its End gave; with reward_model.enable the reward model's score
// too. A step where more than trainer.max_failed_fraction of the rewards failed stops here
// (skippedStep). The means of the reward components and of the End metrics are logged.
func (t *Trainer) reward(ctx context.Context, s *stepState) (map[string]float64, error) {
	vals := map[string]float64{}
	start := time.Now()
	scores, results, st, err := t.score(ctx, s.outs)
	if err != nil {
		return nil, err
	}
	s.scores, s.results = scores, results // from here on the traces end with them (endStepTraces)
	vals[timingReward] = time.Since(start).Seconds()
	if t.rm != nil {
		// reward_model.enable: training rewards only; validation reports the task's score,
		// as veRL validates on its rule-based reward.
		start := time.Now()
		if err := t.rm.apply(s.outs, scores, results, vals); err != nil {
			return nil, err
		}
		vals[timingRewardModel] = time.Since(start).Seconds()
	}
	vals[rewardErrors] = float64(st.Errors)
	vals[rewardTimeouts] = float64(st.Timeouts)
	// the job's failed fraction, so that every rank skips the step or none does
	g, err := t.dp.sumAll(ctx, float64(st.Errors+st.Timeouts), float64(len(s.outs)))
	if err != nil {
		return vals, err
	}
	failed := g[0] / g[1]
	vals[rewardFailedFraction] = failed
	if failed > t.cfg.Trainer.MaxFailedFraction {
		first := "none recorded"
		for _, r := range results {
			if r.Err != "" {
				first = r.Err
				break
			}
		}
		return vals, &skippedStep{first: t.dp.elsewhere(first, st.Errors+st.Timeouts == 0),
			why: fmt.Sprintf("%d of %d rewards failed%s", int(g[0]), int(g[1]), t.dp.ofJob())}
	}
	compSum, compCnt := map[string]float64{}, map[string]float64{}
	for _, r := range results {
		for k, v := range r.Components {
			compSum[k] += v
			compCnt[k]++
		}
	}
	for k := range compSum {
		vals[fillName(rewardComponentMean, k)] = compSum[k] / compCnt[k]
	}
	// Metrics the task's End reported per trajectory (swedev: tests fixed, tests broken, ...).
	endSum, endCnt := map[string]float64{}, map[string]float64{}
	for _, o := range s.outs {
		for k, v := range o.EndResult.Metrics {
			endSum[k] += v
			endCnt[k]++
		}
	}
	for k := range endSum {
		vals[fillName(envMetricMean, k)] = endSum[k] / endCnt[k]
	}
	return vals, nil
}

// score runs the reward manager over finished trajectories: one score per output.
func (t *Trainer) score(ctx context.Context, outs []*rollout.Output) ([]float64, []reward.Result, reward.Stats, error) {
	items := make([]reward.Item, 0, len(outs))
	idx := make([]int, 0, len(outs))
	scores := make([]float64, len(outs))
	results := make([]reward.Result, len(outs))
	var toScore []*rollout.Output // those the task's End did not score
	for _, o := range outs {
		if !o.EndResult.HasReward {
			toScore = append(toScore, o)
		}
	}
	texts := rollout.ResponseTexts(t.tk, toScore) // their solutions, decoded on every core
	var st reward.Stats
	for i, o := range outs {
		if o.EndResult.HasReward {
			// End's reward is the task's final word: it must be a number to train on.
			r := o.EndResult.Reward
			err := reward.FiniteComponents(o.EndResult.RewardComponents)
			if math.IsNaN(r) || math.IsInf(r, 0) {
				err = fmt.Errorf("reward: the task's End gave reward %g", r)
			}
			if err != nil {
				results[i] = reward.Result{Err: fmt.Sprintf("%v (trajectory %s-%d)", err, o.Sample.UID, o.Sample.RolloutN)}
				st.Errors++
				continue
			}
			scores[i] = r
			results[i] = reward.Result{Score: r, Components: o.EndResult.RewardComponents}
			continue
		}
		extra := map[string]any{}
		for k, v := range o.Sample.Row.ExtraInfo {
			extra[k] = v
		}
		extra["num_turns"] = int64(o.NumTurns)
		extra["num_tool_calls"] = int64(o.ToolCalls)
		valid := 0
		for _, m := range o.ResponseMask {
			if m != 0 {
				valid++
			}
		}
		items = append(items, reward.Item{ScoreItem: task.ScoreItem{DataSource: o.Sample.Row.DataSource,
			Solution: texts[len(items)], GroundTruth: o.Sample.Row.RewardModel.GroundTruth, ExtraInfo: extra},
			ResponseLength: len(o.ResponseIDs)})
		idx = append(idx, i)
	}
	// Each task scores its own rows (a mixed run: one Score batch per task).
	ts, groups := t.tasks.groupByTask(len(items), func(j int) string { return items[j].DataSource }, false)
	for k, rt := range ts {
		sub := make([]reward.Item, len(groups[k]))
		for n, j := range groups[k] {
			sub[n] = items[j]
		}
		res, s, err := t.rew.Score(ctx, rt.p, sub)
		if err != nil {
			if t.tasks.mixed() {
				err = fmt.Errorf("task %s: %w", rt.name, err)
			}
			return nil, nil, st, err
		}
		st.Scored += s.Scored
		st.Errors += s.Errors
		st.Timeouts += s.Timeouts
		st.Elapsed += s.Elapsed
		for n, r := range res {
			j := groups[k][n]
			scores[idx[j]] = r.Score
			results[idx[j]] = r
		}
		if failed := s.Errors + s.Timeouts; failed > 0 {
			first := ""
			for _, r := range res {
				if r.Err != "" {
					first = r.Err
					break
				}
			}
			t.log.Warn(fmt.Sprintf("%d of %d rewards failed: scored 0 (reward/errors, reward/timeouts)", failed, len(sub)),
				"task", rt.name, "first_error", first)
		}
	}
	for _, o := range outs {
		o.Trace.Stop() // the trajectory ends here; its root span is closed by endTraces
	}
	return scores, results, st, nil
}

// endStepTraces closes the traces of a step's scored trajectories (endTraces), with their
// advantage once the step has it. Those of a step that stopped before its rewards were ended by
// rollout, or stay open when the step failed.
func (t *Trainer) endStepTraces(s *stepState) {
	if s.results != nil {
		t.endTraces(s.outs, s.scores, s.results, s.b, s.adv)
	}
}

// endTraces closes the root spans of scored trajectories with their reward, its components
// and, for a training step (adv non-nil, [B*Tr] as the update uses it), the trajectory's
// advantage: the mean over its response tokens (the one value GRPO gives all of them).
func (t *Trainer) endTraces(outs []*rollout.Output, scores []float64, results []reward.Result, b *batchOf, adv []float32) {
	for i, o := range outs {
		if o.Trace == nil {
			continue
		}
		root := o.Trace.Root()
		for k, v := range results[i].Components {
			root.SetAttr("reward/"+k, v)
		}
		root.SetAttr("num_turns", o.NumTurns)
		root.SetAttr("tool_calls", o.ToolCalls)
		root.SetAttr("finish_reason", o.FinishReason)
		if adv != nil && b != nil && len(adv) == b.B*b.Tr {
			if a, ok := rowMean(b.rows(adv, i, i+1), b.rows(b.mask, i, i+1)); ok {
				root.SetAttr("advantage", a)
			}
		}
		out := map[string]any{"score": scores[i], "num_turns": o.NumTurns, "tool_calls": o.ToolCalls,
			"response_tokens": len(o.ResponseIDs)}
		if results[i].Err != "" {
			out["score_error"] = results[i].Err
		}
		o.Trace.End(scores[i], out)
	}
}

// rowMean is the mean of x where mask is set; false when no element is.
func rowMean(x, mask []float32) (float64, bool) {
	var sum float64
	n := 0
	for j, m := range mask {
		if m != 0 {
			sum += float64(x[j])
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}
