package trainer

import (
	"fmt"
	"maps"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/reward"
	"github.com/rlhost/rlhost/host/rollout"
)

// rewardScorer is reward_model.enable: a sequence-scoring model (veRL's reward-model worker)
// that scores every training trajectory at the last token of prompt+response, on the
// trajectory's own token ids (veRL with reward_model.model.input_tokenizer null). Its score
// combines with the task's by rewardScorer.combine.
type rewardScorer struct {
	rm     *model.RewardModel
	micro  int
	weight *float64 // nil: the reward model's score replaces the task's (veRL)
}

// defaultRewardMicro is reward_model.micro_batch_size_per_gpu when null.
const defaultRewardMicro = 8

// openRewardModel loads reward_model.model.path. The model reads the policy's token ids, so
// a checkpoint with a tokenizer must have the policy's; one without must embed at least the
// policy's vocabulary.
func openRewardModel(be gpu.Backend, rc config.RewardModel, tk *tokenizer.Tokenizer) (*rewardScorer, error) {
	path := rc.Model.Path
	rm, err := model.LoadRewardModel(be, path)
	if err != nil {
		return nil, fmt.Errorf("trainer: reward_model.model.path: %w", err)
	}
	V := rm.Config().V
	if rtk, err := tokenizer.Load(path); err == nil {
		defer rtk.Close()
		if err := sameTokenizer(rtk, tk); err != nil {
			return nil, fmt.Errorf("trainer: reward_model.model.path %s: %w: the reward model reads the policy's tokens", path, err)
		}
	}
	if V < tk.VocabSize() {
		return nil, fmt.Errorf("trainer: reward_model.model.path %s embeds %d tokens, fewer than the policy tokenizer's %d: "+
			"the reward model reads the policy's tokens, so it must share the policy's tokenizer", path, V, tk.VocabSize())
	}
	micro := defaultRewardMicro
	if rc.MicroBatchSizePerGPU != nil {
		micro = *rc.MicroBatchSizePerGPU
	}
	return &rewardScorer{rm: rm, micro: micro, weight: rc.RewardWeight}, nil
}

// scoreSequences returns the reward model's score of each trajectory: prompt+response
// tokens (tool observations included, as veRL's attention mask has them), read at the
// last one.
func (r *rewardScorer) scoreSequences(outs []*rollout.Output) ([]float64, error) {
	seqs := make([][]int32, len(outs))
	for i, o := range outs {
		s := make([]int32, 0, len(o.PromptIDs)+len(o.ResponseIDs))
		for _, id := range o.PromptIDs {
			s = append(s, int32(id))
		}
		for _, id := range o.ResponseIDs {
			s = append(s, int32(id))
		}
		seqs[i] = s
	}
	return r.rm.Score(seqs, r.micro)
}

// combine is the documented rule (docs/training.md, "Reward models"): with
// reward_model.reward_weight null the reward model's score replaces the task's (veRL's
// reward managers return rm_scores when present); with a number w the score is
// task + w*rm.
func (r *rewardScorer) combine(task, rm float64) float64 {
	if r.weight == nil {
		return rm
	}
	return task + *r.weight*rm
}

// apply scores outs with the reward model and combines each score in place. The results gain
// the components "reward_model" and "task_score" (so traces and reward/<name>/mean show
// both), and vals the reward model's metrics.
func (r *rewardScorer) apply(outs []*rollout.Output, scores []float64, results []reward.Result, vals map[string]float64) error {
	rms, err := r.scoreSequences(outs)
	if err != nil {
		return fmt.Errorf("trainer: reward model: %w", err)
	}
	var sum float64
	for i := range outs {
		comp := maps.Clone(results[i].Components)
		if comp == nil {
			comp = map[string]float64{}
		}
		comp["task_score"] = scores[i]
		comp["reward_model"] = rms[i]
		results[i].Components = comp
		scores[i] = r.combine(scores[i], rms[i])
		results[i].Score = scores[i]
		sum += rms[i]
	}
	if len(rms) > 0 {
		vals[rewardModelScoreMean] = sum / float64(len(rms))
		vals[rewardModelScoreMax] = maxOf(rms)
		vals[rewardModelScoreMin] = minOf(rms)
	}
	return nil
}

func (r *rewardScorer) close() { r.rm.Free() }
