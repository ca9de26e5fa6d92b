package trainer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rlhost/rlhost/host/progress"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// rollout runs the step's samples through the agent loops (s.outs, s.b): timing_s/gen, the
// retried and dropped trajectories, the prompt tokens prefilled and shared, and the
// trajectories' turns, tool calls and lengths (rollout.Metrics). A step where more than
// trainer.max_failed_fraction of the trajectories were dropped stops here (skippedStep), their
// traces ended.
func (t *Trainer) rollout(ctx context.Context, s *stepState) (map[string]float64, error) {
	vals := map[string]float64{}
	genStart, genDev := time.Now(), s.dev.phaseStart()
	var prefilled0, shared0 int
	if t.policy != nil {
		prefilled0, shared0 = t.policy.PrefixStats()
	}
	bar := progress.New(t.opts.Progress, fmt.Sprintf("step %d/%d rollout", s.step, t.totalSteps), int64(len(s.samples)), "trajectories")
	bar.Waiting(t.tasks.waitingOn)
	res, dropped, err := t.runRollouts(ctx, false, s.samples, s.batchIdx, bar)
	if err != nil {
		return nil, err
	}
	genWall := time.Since(genStart)
	vals[timingGen] = genWall.Seconds()
	genDev.addTo(vals, perfGenDeviceWait, perfGenHostFrac, genWall)
	if t.policy != nil {
		prefilled, shared := t.policy.PrefixStats()
		vals[rolloutPrefillTokens] = float64(prefilled - prefilled0)
		vals[rolloutPrefixSharedToken] = float64(shared - shared0)
	}
	vals[rolloutRetried] = float64(res.Retried)
	vals[rolloutDropped] = float64(res.Dropped)
	if t.tasks.mixed() {
		for tn, d := range dropped {
			vals[fillName(taskRetried, tn)] = float64(d[0])
			vals[fillName(taskDropped, tn)] = float64(d[1])
		}
	}
	if t.chat != nil {
		for k, v := range rollout.ExternalDropMetrics(res.Errors) {
			vals[rolloutExternal+k] = v
		}
	}
	for _, e := range res.Errors {
		t.log.Warn("trajectory dropped after a retry", "error", e)
	}
	s.outs = res.Kept()
	// the job's failed fraction, so that every rank skips the step or none does
	g, err := t.dp.sumAll(ctx, float64(res.Dropped), float64(len(s.samples)), boolf(len(s.outs) == 0))
	if err != nil {
		return vals, err
	}
	failed := g[0] / g[1]
	vals[rolloutFailedFraction] = failed
	if g[2] > 0 || failed > t.cfg.Trainer.MaxFailedFraction {
		for _, o := range s.outs {
			o.Trace.End(0, map[string]any{"error": "the step was not trained on"})
		}
		return vals, &skippedStep{first: t.dp.elsewhere(firstErr(res.Errors).Error(), len(res.Errors) == 0),
			why: fmt.Sprintf("%d of %d trajectories failed%s", int(g[0]), int(g[1]), t.dp.ofJob())}
	}
	for k, v := range rollout.Metrics(s.outs) {
		vals[k] = v
	}
	s.b = newBatch(s.outs)
	return vals, nil
}

// samplesFor makes the n rollouts of each example; the first is the batch's example first
// (its uids count from there).
func (t *Trainer) samplesFor(exs []*example, uidPrefix string, first, n, step int, validate bool) []*rollout.Sample {
	var out []*rollout.Sample
	for i, e := range exs {
		uid := fmt.Sprintf("%s-%d", uidPrefix, first+i)
		for r := 0; r < n; r++ {
			out = append(out, &rollout.Sample{Row: e.Row, Prompt: e.Prompt, UID: uid, SampleIndex: e.SampleIndex,
				RolloutN: r, Step: step, Validate: validate, PromptIDs: e.PromptIDs})
		}
	}
	return out
}

// runRollouts runs samples through the agent loops, ticking a progress bar as they finish.
// batch is the sample indexes of the whole batch (every rank's share), from which tracing
// picks the samples it traces.
func (t *Trainer) runRollouts(ctx context.Context, validate bool, samples []*rollout.Sample, batch []int64, bar *progress.Bar) (rollout.BatchResult, map[string][2]int, error) {
	if len(samples) > 0 && t.tracer != nil {
		t.tracer.BeginStep(samples[0].Step, samples[0].Validate, batch)
	}
	res, dropped, err := t.runRolloutsByTask(ctx, validate, samples, bar)
	bar.Finish()
	return res, dropped, err
}

// runRolloutsByTask runs each task's samples with that task's environment, all tasks at once
// (the policy batches their generate calls together), and merges the results in sample order.
// A failure is attributed to its task.
func (t *Trainer) runRolloutsByTask(ctx context.Context, validate bool, samples []*rollout.Sample, bar *progress.Bar) (rollout.BatchResult, map[string][2]int, error) {
	ts, groups := t.tasks.groupByTask(len(samples), func(i int) string { return samples[i].Row.DataSource }, false)
	res := rollout.BatchResult{Outputs: make([]*rollout.Output, len(samples))}
	dropped := map[string][2]int{} // task -> retried, dropped
	results := make([]rollout.BatchResult, len(ts))
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for k := range ts {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			sub := make([]*rollout.Sample, len(groups[k]))
			for j, i := range groups[k] {
				sub[j] = samples[i]
			}
			results[k], errs[k] = rollout.RunBatchFunc(ctx, t.rolloutDeps(ts[k], validate), sub, func() { bar.Add(1) })
		}(k)
	}
	wg.Wait()
	for k, rt := range ts {
		if errs[k] != nil {
			if t.tasks.mixed() {
				return res, nil, fmt.Errorf("task %s: %w", rt.name, errs[k])
			}
			return res, nil, errs[k]
		}
		r := results[k]
		for j, i := range groups[k] {
			res.Outputs[i] = r.Outputs[j]
		}
		res.Retried += r.Retried
		res.Dropped += r.Dropped
		dropped[rt.name] = [2]int{r.Retried, r.Dropped}
		for _, e := range r.Errors {
			if t.tasks.mixed() {
				e = fmt.Errorf("task %s: %w", rt.name, e)
			}
			res.Errors = append(res.Errors, e)
		}
	}
	return res, dropped, nil
}

func (t *Trainer) rolloutDeps(rt *runTask, validate bool) rollout.Deps {
	r := t.cfg.ActorRolloutRef.Rollout
	mt := r.MultiTurn
	c := rollout.Config{ResponseLength: t.cfg.ResponseLength(), MaxParallelCalls: mt.MaxParallelCalls,
		MaxToolResponseLength: mt.MaxToolResponseLength, TruncateSide: mt.ToolResponseTruncateSide,
		DefaultAgentLoop: r.Agent.DefaultAgentLoop, TemplateKwargs: t.render.Kwargs, ToolFormat: t.render.Format,
		Interaction: rt.p.CachedInfo().Has(task.FeatureInteraction) && t.interactionOn(rt)}
	if mt.MaxAssistantTurns != nil {
		c.MaxAssistantTurns = *mt.MaxAssistantTurns
	}
	if mt.MaxUserTurns != nil {
		c.MaxUserTurns = *mt.MaxUserTurns
	}
	seed := uint64(t.cfg.RolloutSeed())
	if validate {
		vk := r.ValKwargs
		c.Sampling = rollout.SamplingParams{Temperature: vk.Temperature, TopP: vk.TopP, TopK: vk.TopK, Seed: seed}
		if !vk.DoSample {
			c.Sampling.Temperature = 0
		}
	} else {
		c.Sampling = rollout.SamplingParams{Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, Seed: seed}
		if !r.DoSample {
			c.Sampling.Temperature = 0
		}
	}
	var env task.Environment
	if rt.p.CachedInfo().Has(task.FeatureEnvironment) && mt.Enable {
		env = rt.p
	}
	d := rollout.Deps{Policy: t.rolloutPolicy(), Tokenizer: t.tk, Env: env, Config: c, Tracer: t.tracer, TaskName: rt.p.Name()}
	if t.chat != nil && rt.p.CachedInfo().Has(task.FeatureExternalEpisode) { // external_episode: the environment calls the policy through t.chat
		d.Env = rt.p
		d.Config.DefaultAgentLoop = rollout.ExternalAgent
		d.External = rollout.NewExternalAgentLoop(d, t.chat, 0)
	}
	return d
}

// interactionOn: the user simulator runs when multi_turn.interaction_config_path is set (veRL's
// switch) or the task config asks for it (task.config.interaction: true, or
// task.configs.NAME.interaction in a mixed run).
func (t *Trainer) interactionOn(rt *runTask) bool {
	if t.cfg.ActorRolloutRef.Rollout.MultiTurn.InteractionConfigPath != nil {
		return true
	}
	tc, _ := t.cfg.TaskConfig(rt.name)
	v, _ := tc["interaction"].(bool)
	return v
}

// rolloutPolicy is what generates rollouts: the external engine, or the built-in one.
func (t *Trainer) rolloutPolicy() rollout.Policy {
	if t.engine != nil {
		return t.engine.policy
	}
	return t.policy
}
