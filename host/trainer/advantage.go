package trainer

import (
	"context"
	"fmt"

	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/reward"
	"github.com/rlhost/rlhost/host/rollout"
)

// advantages turns the step's scores into advantages (s.tokenRewards, s.adv, s.returns): each
// score, times its task's task.reward_weights entry, on the last model token of its
// trajectory; less the KL penalty to the reference with algorithm.use_kl_in_reward (its
// coefficient fixed or adaptive, algorithm.kl_ctrl); then the estimator of
// algorithm.adv_estimator over the groups of rollout.n samples of a row (GRPO, RLOO, ...) or
// over the critic's values (GAE).
func (t *Trainer) advantages(ctx context.Context, s *stepState) (map[string]float64, error) {
	if err := t.checkGroupsOneTask(s.outs); err != nil {
		return nil, err
	}
	vals := map[string]float64{}
	cfg, b := t.cfg, s.b
	s.tokenRewards = reward.PlaceOnLastToken(t.weightedScores(s.outs, s.scores), b.mask, b.B, b.Tr)
	if cfg.Algorithm.UseKLInReward {
		var kl float64
		s.tokenRewards, kl = algo.ApplyKLPenalty(s.tokenRewards, s.oldLogp, s.refLogp, b.mask, b.B, b.Tr, cfg.Algorithm.KLPenalty, t.klCtl.Beta())
		batch := b.B
		if t.dp.size() > 1 { // the whole batch's mean KL and size, so every rank's controller moves alike
			var tok float64
			for _, m := range b.mask {
				tok += float64(m)
			}
			g, err := t.dp.sumAll(ctx, kl*tok, tok, float64(b.B))
			if err != nil {
				return nil, err
			}
			kl, batch = g[0]/max(g[1], 1), int(g[2])
		}
		vals[actorRewardKLPenalty] = kl
		vals[actorRewardKLPenaltyC] = t.klCtl.Beta()
		t.klCtl.Update(kl, batch)
	}
	groups := make([]string, b.B)
	for i, o := range s.outs {
		groups[i] = o.Sample.UID
	}
	var err error
	in := algo.AdvantageInput{TokenRewards: s.tokenRewards, Mask: b.mask,
		B: b.B, T: b.Tr, Groups: groups, Values: s.values, Gamma: cfg.Algorithm.Gamma, Lam: cfg.Algorithm.Lam, NormByStd: cfg.Algorithm.NormAdvByStdInGRPO}
	if t.dp.size() > 1 { // batch-wide statistics (whitening) over the whole batch
		in.Sum = func(xs []float64) error {
			g, err := t.dp.sumAll(ctx, xs...)
			copy(xs, g)
			return err
		}
	}
	s.adv, s.returns, err = t.estimate(s.outs, in)
	if err != nil {
		return nil, err
	}
	return vals, nil
}

// estimate runs the estimator over the whole batch (task.adv_norm_scope=global, veRL's
// behaviour) or over each task's trajectories separately (task): batch-wide whitening then
// uses each task's own mean and variance. On several ranks (in.Sum set) every rank runs the
// estimator for every task of the run, its share of the task's trajectories none or not, so
// that each task's sums are added over the ranks in the same collectives.
func (t *Trainer) estimate(outs []*rollout.Output, in algo.AdvantageInput) (adv, returns []float32, err error) {
	name := t.cfg.Algorithm.AdvEstimator
	if t.cfg.Task.AdvNormScope != "task" || !t.tasks.mixed() {
		return algo.Advantages(name, in)
	}
	ts, groups := t.tasks.groupByTask(len(outs), func(i int) string { return outs[i].Sample.Row.DataSource }, in.Sum != nil)
	adv = make([]float32, in.B*in.T)
	returns = make([]float32, in.B*in.T)
	T := in.T
	for k, rows := range groups {
		sub := in
		sub.B = len(rows)
		sub.TokenRewards = gatherRows(in.TokenRewards, rows, T)
		sub.Mask = gatherRows(in.Mask, rows, T)
		sub.Values = gatherRows(in.Values, rows, T)
		sub.Groups = make([]string, len(rows))
		for j, i := range rows {
			sub.Groups[j] = in.Groups[i]
		}
		a, r, err := algo.Advantages(name, sub)
		if err != nil {
			return nil, nil, fmt.Errorf("task %s: %w", ts[k].name, err)
		}
		for j, i := range rows {
			copy(adv[i*T:(i+1)*T], a[j*T:(j+1)*T])
			copy(returns[i*T:(i+1)*T], r[j*T:(j+1)*T])
		}
	}
	return adv, returns, nil
}

func gatherRows(x []float32, rows []int, T int) []float32 {
	if x == nil {
		return nil
	}
	out := make([]float32, len(rows)*T)
	for j, i := range rows {
		copy(out[j*T:(j+1)*T], x[i*T:(i+1)*T])
	}
	return out
}

// weightedScores multiplies each score by its task's task.reward_weights entry.
func (t *Trainer) weightedScores(outs []*rollout.Output, scores []float64) []float64 {
	out := make([]float64, len(scores))
	for i, o := range outs {
		out[i] = scores[i] * t.taskOf(o).weight
	}
	return out
}

// checkGroupsOneTask is the invariant that GRPO groups never mix tasks: every trajectory
// of a group (uid) has the same task.
func (t *Trainer) checkGroupsOneTask(outs []*rollout.Output) error {
	of := map[string]*runTask{}
	for _, o := range outs {
		rt := t.taskOf(o)
		if p, ok := of[o.Sample.UID]; ok && p != rt {
			return fmt.Errorf("trainer: group %s holds trajectories of tasks %s and %s", o.Sample.UID, p.name, rt.name)
		}
		of[o.Sample.UID] = rt
	}
	return nil
}
