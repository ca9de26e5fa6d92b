package trainer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/host/reward"
	"github.com/rlhost/rlhost/host/rollout"
)

// Run trains until the configured number of steps (trainStep), after a validation first when
// trainer.val_before_train or trainer.val_only asks for one, and draws the curves at the end.
func (t *Trainer) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			t.dp.abort(err) // the other ranks stop at their next collective instead of waiting it out
		}
		if err != nil && t.logger != nil {
			metrics.Fail(t.logger, err)
		}
	}()
	tc := t.cfg.Trainer
	if tc.ValOnly || (tc.ValBeforeTrain && t.step == 0) { // every rank validates its share
		vals, err := t.validate(ctx, t.step)
		if err != nil {
			return err
		}
		if err := t.logger.Log(metrics.Step{Step: t.step, Time: time.Now(), Values: vals}); err != nil {
			return err
		}
		if tc.ValOnly {
			return nil
		}
	}
	for t.step < t.totalSteps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.trainStep(ctx, t.step+1); err != nil {
			return err
		}
	}
	if t.budget.ran > 0 && t.budget.trained == 0 {
		return fmt.Errorf("no step of the run was trained on (a step is not trained on when more than trainer.max_failed_fraction=%g "+
			"of its trajectories or rewards fail): %s", tc.MaxFailedFraction, t.budget.streakErr)
	}
	return t.finish()
}

// trainStep runs step as its phases, in order, each a function that returns its metrics: the
// rollout, the rewards, the old and the reference log-probs, the critic's values, the
// advantages, the critic's and the actor's updates, the batch's statistics; then the external
// engine's new weights, validation, the step's line of metrics and its checkpoint. A step
// whose rollout or rewards fail beyond trainer.max_failed_fraction stops at that phase and is
// not trained on (skippedStep); its metrics are logged all the same, and its checkpoint
// written, unless the failure budget is spent.
func (t *Trainer) trainStep(ctx context.Context, step int) error {
	s := t.startStep(step)
	err := s.run(ctx, t.rollout, t.reward, t.oldLogProbs, t.refLogProbs, t.values, t.advantages,
		t.updateCritic, t.updateActor, t.batchStatistics)
	t.endStepTraces(s)
	if err == nil || errors.As(err, new(*skippedStep)) {
		// every rank's figures, merged as one rank would have measured them (ranks.go)
		if merr := t.mergeRankMetrics(ctx, s); merr != nil {
			return fmt.Errorf("step %d: %w", step, merr)
		}
		if terr := t.shipRankTraces(ctx); terr != nil {
			return fmt.Errorf("step %d: %w", step, terr)
		}
	}
	t.budget.ran++
	var skip *skippedStep
	var stop error // the failure budget is spent
	switch {
	case errors.As(err, &skip):
		s.vals[trainingSkippedStep] = 1
		stop = t.skip(step, skip)
	case err != nil:
		err = fmt.Errorf("step %d: %w", step, err)
		t.dp.abort(err) // the other ranks stop at their next collective instead of waiting it out
		return err
	default:
		t.budget.skipped, t.budget.streakErr = 0, ""
		t.budget.trained++
		if err := s.add(t.afterStepEngine(ctx, step)); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if err := s.add(t.validateAt(ctx, step)); err != nil {
			return fmt.Errorf("step %d: validation: %w", step, err)
		}
	}
	t.step = step
	if err := t.logger.Log(metrics.Step{Step: step, Time: time.Now(), Values: s.vals}); err != nil {
		return err
	}
	if stop != nil {
		return stop
	}
	if err := t.checkpointAt(ctx, step); err != nil {
		return fmt.Errorf("step %d: checkpoint: %w", step, err)
	}
	return nil
}

// stepState is one training step as its phases hand it on: each phase reads what the phases
// before it set and sets its own part. Per-token arrays are [B*Tr] (batch.go).
type stepState struct {
	step  int
	start time.Time
	dev   *deviceMeter       // trainer.device=cuda: waits, syncs, bytes; nil elsewhere
	vals  map[string]float64 // the metrics of the phases so far

	samples          []*rollout.Sample // the batch: rollout.n samples of each row (startStep)
	batchIdx         []int64           // the sample indexes of the whole batch, every rank's (tracing's sampling)
	outs             []*rollout.Output // the trajectories kept (rollout)
	b                *batchOf          // outs laid out for the algorithms (rollout)
	scores           []float64         // one per trajectory (reward)
	results          []reward.Result   // with components and errors (reward)
	oldLogp, refLogp []float32         // nil when not needed (oldLogProbs, refLogProbs)
	values           []float32         // the critic's; nil without one (values)
	tokenRewards     []float32         // the scores on the last model token, less the KL penalty (advantages)
	adv, returns     []float32         // (advantages)
}

// A stepPhase is one part of a training step: it reads and sets its part of s and returns its
// metrics.
type stepPhase func(ctx context.Context, s *stepState) (map[string]float64, error)

// startStep draws the step's batch: rollout.n samples of each of data.train_batch_size rows
// (of the rank's share of them in a data-parallel job).
func (t *Trainer) startStep(step int) *stepState {
	s := &stepState{step: step, start: time.Now(), dev: startDeviceMeter(t.actor.Backend()), vals: map[string]float64{}}
	idx := t.sampler.Next()
	// a rank's share of the prompts, each with its whole group, named by its place in the
	// whole batch so that its samples (and their random streams) are one rank's
	lo, hi := t.dp.shard(len(idx))
	for _, j := range idx {
		s.batchIdx = append(s.batchIdx, t.train[j].SampleIndex)
	}
	exs := make([]*example, 0, hi-lo)
	for _, j := range idx[lo:hi] {
		exs = append(exs, &t.train[j])
	}
	s.samples = t.samplesFor(exs, fmt.Sprintf("s%d", step), lo, t.cfg.ActorRolloutRef.Rollout.N, step, false)
	s.vals[trainingGlobalStep] = float64(step)
	s.vals[trainingEpoch] = float64(t.sampler.Epoch)
	return s
}

// run runs the phases in order, adding the metrics of each to s.vals, up to the first that
// fails; a skipped step keeps what was measured until then.
func (s *stepState) run(ctx context.Context, phases ...stepPhase) error {
	for _, p := range phases {
		if err := s.add(p(ctx, s)); err != nil {
			var skip *skippedStep
			if errors.As(err, &skip) {
				skip.vals = s.vals
			}
			return err
		}
	}
	return nil
}

// add adds a phase's metrics to the step's and returns its error.
func (s *stepState) add(vals map[string]float64, err error) error {
	maps.Copy(s.vals, vals)
	return err
}

// finish closes the metric loggers and draws the curves of metrics.jsonl.
func (t *Trainer) finish() error {
	if err := t.logger.Close(); err != nil {
		t.log.Warn("closing the metric loggers", "error", err)
	}
	t.logger = nil
	if !slices.Contains(t.cfg.Trainer.Logger, "jsonl") {
		return nil // the curves are drawn from metrics.jsonl, which this run did not write
	}
	if png, err := metrics.PlotRun(t.runDir); err != nil {
		t.log.Warn("could not draw the curves", "error", err)
	} else {
		fmt.Fprintf(t.opts.Progress, "curves: %s\n", png)
	}
	return nil
}

// failureBudget counts what trainer.max_failed_fraction and
// trainer.max_consecutive_failed_steps are held against: skipped is the steps in a row not
// trained on, streakErr what failed first in that streak, ran and trained the steps this Run
// went through and trained on.
type failureBudget struct {
	skipped      int
	streakErr    string
	ran, trained int
}

// skippedStep is a training step that was not trained on: more than
// trainer.max_failed_fraction of its trajectories or rewards failed.
type skippedStep struct {
	vals  map[string]float64 // what was measured before it stopped
	why   string             // "3 of 4 trajectories failed"
	first string             // the first error
}

func (s *skippedStep) Error() string { return s.why + "; the first error: " + s.first }

// skip records a skipped step: a warning on the console, and the end of the run (the error
// it returns) when trainer.max_consecutive_failed_steps steps in a row were skipped.
func (t *Trainer) skip(step int, s *skippedStep) error {
	tc := t.cfg.Trainer
	first := oneLine(s.first)
	t.budget.skipped++
	if t.budget.skipped == 1 {
		t.budget.streakErr = fmt.Sprintf("in step %d, %s; the first error: %s", step, s.why, first)
	}
	fmt.Fprintf(t.opts.Progress, "step %d: not trained on: %s (more than trainer.max_failed_fraction=%g); the first error: %s\n",
		step, s.why, tc.MaxFailedFraction, first)
	if t.budget.skipped < tc.MaxConsecutiveFailedSteps {
		return nil
	}
	what := fmt.Sprintf("step %d was not trained on", step)
	if t.budget.skipped > 1 {
		what = fmt.Sprintf("step %d: %d steps in a row were not trained on", step, t.budget.skipped)
	}
	return fmt.Errorf("%s (trainer.max_consecutive_failed_steps=%d; a step is not trained on when more than trainer.max_failed_fraction=%g "+
		"of its trajectories or rewards fail): %s", what, tc.MaxConsecutiveFailedSteps, tc.MaxFailedFraction, t.budget.streakErr)
}

// oneLine joins the lines of an error message with " | " and bounds its length, for the one
// line that ends a failed run.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	out := strings.Join(lines, " | ")
	if len(out) > 1500 {
		out = out[:1500] + "…"
	}
	return out
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return errors.New("none recorded")
	}
	return errs[0]
}
