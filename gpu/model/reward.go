package model

import (
	"fmt"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/weights"
)

// B batch, T time (the longest sequence of a micro-batch), C channels.

// RewardModel is a sequence scorer: a Hugging Face XxxForSequenceClassification or
// XxxForTokenClassification checkpoint with one label (Llama or Qwen2 decoder, head
// score.weight [1,C], score.bias [1] for token classifiers). The score of a sequence is the
// head's output at its last token:
//
//	score = lnf[last,:] . score.weight + score.bias
//
// what veRL's reward-model worker reads (AutoModelForTokenClassification with num_labels=1,
// the logit at the last attended position of prompt+response) and what a sequence
// classifier pools. It is the critic's layout ([ValueModel]) with a loaded head, and it is
// never trained.
type RewardModel struct {
	vm   *ValueModel
	acts map[[2]int]*ValueActs
}

// LoadRewardModel reads a reward model checkpoint ([weights.LoadScorer]) onto be.
func LoadRewardModel(be gpu.Backend, path string) (rm *RewardModel, err error) {
	ck, head, err := weights.LoadScorer(path)
	if err != nil {
		return nil, err
	}
	return NewRewardModel(be, ck, head)
}

// NewRewardModel builds a reward model from a decoder checkpoint and its head.
func NewRewardModel(be gpu.Backend, ck *weights.Checkpoint, head *weights.ScoreHead) (*RewardModel, error) {
	vm, err := NewValueModel(be, ck)
	if err != nil {
		return nil, err
	}
	C := vm.Body.Config.C
	if len(head.Weight) != C {
		return nil, fmt.Errorf("model: reward head has %d weights, the decoder's hidden size is %d", len(head.Weight), C)
	}
	h := make([]float32, C+1)
	copy(h, head.Weight)
	h[C] = head.Bias
	be.Upload(vm.Head, h)
	return &RewardModel{vm: vm}, nil
}

// Config is the decoder's shape.
func (r *RewardModel) Config() Config { return r.vm.Body.Config }

// Free gives the activations back to the backend.
func (r *RewardModel) Free() {
	for _, a := range r.acts {
		a.Free()
	}
	r.acts = nil
}

func (r *RewardModel) actsFor(B, T int) *ValueActs {
	k := [2]int{B, T}
	if a, ok := r.acts[k]; ok {
		return a
	}
	if r.acts == nil || len(r.acts) >= 4 {
		r.Free()
		r.acts = map[[2]int]*ValueActs{}
	}
	a := r.vm.NewActs(B, T)
	r.acts[k] = a
	return a
}

// Score returns one score per sequence: the head's output at its last token. Sequences run
// micro sequences at a time, right-padded to the longest of the micro-batch (causal
// attention: the padding after a sequence does not change its last token). An empty
// sequence, a token outside the vocabulary or one longer than max_position_embeddings is an
// error naming the sequence.
func (r *RewardModel) Score(seqs [][]int32, micro int) ([]float64, error) {
	c := r.vm.Body.Config
	for i, s := range seqs {
		if len(s) == 0 {
			return nil, fmt.Errorf("model: reward model: sequence %d is empty", i)
		}
		if len(s) > c.MaxPos {
			return nil, fmt.Errorf("model: reward model: sequence %d has %d tokens, more than its max_position_embeddings %d", i, len(s), c.MaxPos)
		}
		for _, id := range s {
			if id < 0 || int(id) >= c.V {
				return nil, fmt.Errorf("model: reward model: sequence %d has token id %d outside its vocabulary of %d", i, id, c.V)
			}
		}
	}
	micro = max(micro, 1)
	out := make([]float64, len(seqs))
	for lo := 0; lo < len(seqs); lo += micro {
		hi := min(lo+micro, len(seqs))
		B, T := hi-lo, 0
		for _, s := range seqs[lo:hi] {
			T = max(T, len(s))
		}
		tokens := make([]int32, B*T) // padding: token 0 after the sequence
		for b, s := range seqs[lo:hi] {
			copy(tokens[b*T:], s)
		}
		a := r.actsFor(B, T)
		if err := r.vm.Forward(a, Batch{B: B, T: T, Tokens: tokens}); err != nil {
			return nil, fmt.Errorf("model: reward model: %w", err)
		}
		for b, s := range seqs[lo:hi] {
			out[lo+b] = float64(a.Values[b*T+len(s)-1])
		}
	}
	return out, nil
}
