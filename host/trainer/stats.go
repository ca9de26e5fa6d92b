package trainer

import (
	"context"
	"math"
	"time"

	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/rollout"
)

// batchStatistics are the step's statistics, its last phase: the scores and sequence rewards,
// the prompt lengths and the responses cut at data.max_response_length, the mean advantage,
// the same per task and data source (splitMetrics), the step's time and throughput, the
// device's counters over the step (trainer.device=cuda), and the tracing counters.
func (t *Trainer) batchStatistics(_ context.Context, s *stepState) (map[string]float64, error) {
	vals := map[string]float64{}
	b := s.b
	var seqScore, seqReward, promptLen, respLen, clipped float64
	seqRewards := make([]float64, b.B)
	for i := 0; i < b.B; i++ {
		for j := 0; j < b.Tr; j++ {
			seqRewards[i] += float64(s.tokenRewards[i*b.Tr+j])
		}
	}
	for i, o := range s.outs {
		seqScore += s.scores[i]
		seqReward += seqRewards[i]
		promptLen += float64(len(o.PromptIDs))
		respLen += float64(len(o.ResponseIDs))
		if len(o.ResponseIDs) >= t.cfg.ResponseLength() || o.FinishReason == "length" {
			clipped++
		}
	}
	B := float64(b.B)
	vals[criticScoreMean] = seqScore / B
	vals[criticScoreMax] = maxOf(s.scores)
	vals[criticScoreMin] = minOf(s.scores)
	vals[criticRewardsMean] = seqReward / B
	vals[promptLengthMean] = promptLen / B
	vals[responseLengthClipRatio] = clipped / B
	vals[criticAdvantagesMean] = algo.MaskedMean(s.adv, b.mask)
	t.splitMetrics(vals, s.outs, s.scores, seqRewards)
	wall := time.Since(s.start)
	stepTime := wall.Seconds()
	vals[timingStep] = stepTime
	s.dev.addTo(vals, wall)
	vals[perfThroughput] = (promptLen + respLen) / stepTime
	for k, v := range t.tracer.StepMetrics() {
		vals[k] = v
	}
	return vals, nil
}

// splitMetrics adds per-task (mixed runs) and per-data_source (when the batch has several)
// means of the step: task/<name>/{score,reward,response_length}/mean and trajectories,
// data_source/<ds>/... likewise.
func (t *Trainer) splitMetrics(vals map[string]float64, outs []*rollout.Output, scores, seqRewards []float64) {
	n := len(outs)
	resp := make([]float64, n)
	sources := map[string]bool{}
	for i, o := range outs {
		resp[i] = float64(len(o.ResponseIDs))
		sources[o.Sample.Row.DataSource] = true
	}
	if t.tasks.mixed() {
		perGroupMetrics(vals, func(i int) string { return t.taskOf(outs[i]).name }, n,
			[]groupSeries{{taskScoreMean, scores}, {taskRewardMean, seqRewards}, {taskResponseLengthMean, resp}})
		cnt := map[string]float64{}
		for _, o := range outs {
			cnt[t.taskOf(o).name]++
		}
		for tn, c := range cnt {
			vals[fillName(taskTrajectories, tn)] = c
		}
	}
	if t.tasks.mixed() || len(sources) > 1 {
		perGroupMetrics(vals, func(i int) string { return outs[i].Sample.Row.DataSource }, n,
			[]groupSeries{{dataSourceScoreMean, scores}, {dataSourceRewardMean, seqRewards}, {dataSourceResponseLength, resp}})
	}
}

// groupSeries is one per-trajectory series of splitMetrics and the name of its per-group mean
// (one <placeholder>: the group).
type groupSeries struct {
	name string
	xs   []float64
}

// perGroupMetrics adds the mean of each series per group (task or data_source) of the n
// trajectories.
func perGroupMetrics(vals map[string]float64, key func(i int) string, n int, series []groupSeries) {
	for _, s := range series {
		sums, cnts := map[string]float64{}, map[string]float64{}
		for i := 0; i < n; i++ {
			g := key(i)
			sums[g] += s.xs[i]
			cnts[g]++
		}
		for g := range sums {
			vals[fillName(s.name, g)] = sums[g] / cnts[g]
		}
	}
}

func maxOf(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	return m
}

func minOf(x []float64) float64 {
	m := math.Inf(1)
	for _, v := range x {
		m = math.Min(m, v)
	}
	return m
}
