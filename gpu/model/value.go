package model

import (
	"fmt"
	"math"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/weights"
)

// B batch, T time, N = B*T token rows, C channels.

// ValueModel is a critic for PPO with GAE: the decoder of a Llama/Qwen2
// checkpoint with a one-output linear head on its last hidden state (the
// output of the final norm), as transformers' XxxForTokenClassification
// with num_labels=1 and no dropout, which is what veRL loads for its critic.
//
//	value[n] = lnf[n,:] . Head[:C] + Head[C]
//
// The head starts at zero (every value 0); see [NewValueModel].
type ValueModel struct {
	Body     *Model    // the decoder; its lm_head is kept for the layout but never used
	Head     []float32 // [C+1]: score.weight [1,C], then score.bias [1]
	HeadGrad []float32 // [C+1], accumulated by Backward
}

// NewValueModel builds a critic from a (causal LM) checkpoint: the decoder's
// weights are the checkpoint's, the head is zero. veRL's head is freshly
// initialised (normal, std initializer_range); a zero head instead makes
// every first value exactly 0, whatever the scale of the hidden state, and
// needs no random stream. The head's weight still gets a gradient at once
// (dL/dw = dvalue * hidden), the decoder from the first update on.
func NewValueModel(be gpu.Backend, ck *weights.Checkpoint) (vm *ValueModel, err error) {
	body, err := New(be, ck)
	if err != nil {
		return nil, err
	}
	defer gpu.RecoverMemory(&err)
	C := body.Config.C
	return &ValueModel{Body: body, Head: be.Alloc("critic head", C+1), HeadGrad: be.Alloc("critic head gradients", C+1)}, nil
}

// ValueActs are a critic's activations for a B x T batch.
type ValueActs struct {
	acts   *Acts
	Values []float32 // [N] the value of each position (read after Forward)
	noTgt  []int32   // [N] all -1: the decoder's batch check wants targets
}

// NewActs allocates the critic's activations for a B x T batch (they serve
// any batch that fits, as Acts do). The decoder's logits buffer is dropped:
// the critic never computes logits.
func (v *ValueModel) NewActs(B, T int) *ValueActs { return v.newActs(v.Body.NewActs(B, T)) }

// NewPackedActs allocates the critic's activations for packed batches
// (Batch.Lengths) of up to N rows.
func (v *ValueModel) NewPackedActs(N int) *ValueActs { return v.newActs(v.Body.NewPackedActs(N)) }

// Fits reports whether va can run the batch b (see Acts.Fits).
func (va *ValueActs) Fits(b Batch) bool { return va.acts.Fits(b) }

func (v *ValueModel) newActs(a *Acts) *ValueActs {
	a.drop(a.Logits)
	a.Logits = nil
	N := a.rows
	va := &ValueActs{acts: a, Values: make([]float32, N), noTgt: make([]int32, N)}
	for i := range va.noTgt {
		va.noTgt[i] = -1
	}
	return va
}

// Free gives the activations' tensors back to the backend.
func (va *ValueActs) Free() { va.acts.Free() }

// Forward computes va.Values [N] for the tokens of b (b.Targets is ignored).
func (v *ValueModel) Forward(va *ValueActs, b Batch) error {
	b.Targets = va.noTgt[:min(len(va.noTgt), b.B*b.T)]
	if err := v.Body.forwardBody(va.acts, b); err != nil {
		return err
	}
	c := v.Body.Config
	N := b.B * b.T
	v.Body.be.MatmulForward(va.Values, va.acts.lnf, v.Head[:c.C], v.Head[c.C:], N, c.C, 1)
	return nil
}

// Backward propagates dvalues [N] (the gradient of the loss with respect to
// va.Values of the last Forward) into HeadGrad and Body.Grads, accumulating.
func (v *ValueModel) Backward(va *ValueActs, dvalues []float32) error {
	m, a := v.Body, va.acts
	N := a.B * a.T
	if len(dvalues) != N {
		return fmt.Errorf("model: value backward got %d dvalues, want %d", len(dvalues), N)
	}
	if m.lora != nil {
		return fmt.Errorf("model: a value model with LoRA adapters is not supported")
	}
	m.EnableGrads()
	C := m.Config.C
	// a.dln = dvalues (x) w: the gradient of the last hidden state.
	m.be.MatmulBackward(a.dln, v.HeadGrad[:C], v.HeadGrad[C:], dvalues, a.lnf, v.Head[:C], N, C, 1, false)
	m.backwardBody(a, m.Grads, false)
	return nil
}

// ZeroGrads clears the decoder's and the head's gradients.
func (v *ValueModel) ZeroGrads() {
	v.Body.ZeroGrads()
	v.Body.be.Zero(v.HeadGrad)
}

// ValueAdamW is the critic's optimizer: AdamW over the decoder and the head
// with one global gradient-norm clip, as torch.optim.AdamW and
// clip_grad_norm_ over all the critic's parameters. The moments are in one
// flat layout: the decoder's parameters, then the head's.
type ValueAdamW struct {
	Config AdamWConfig
	Step   int
	MomentPair
}

// NewValueAdamW returns a fresh optimizer for the critic.
func NewValueAdamW(vm *ValueModel, cfg AdamWConfig) *ValueAdamW {
	n := len(vm.Body.Params.Data) + len(vm.Head)
	return &ValueAdamW{Config: cfg, MomentPair: NewMomentPair(vm.Body.be, n, "critic AdamW")}
}

// Update clips the critic's gradients to the configured global norm and
// applies one AdamW step. It returns the gradient norm before clipping.
func (o *ValueAdamW) Update(vm *ValueModel) (float64, error) {
	body := vm.Body
	if body.Grads == nil {
		return 0, fmt.Errorf("model: value AdamW update without gradients")
	}
	nb := len(body.Params.Data)
	if len(o.m) != nb+len(vm.Head) {
		return 0, fmt.Errorf("model: value optimizer state has %d values, the critic's parameters %d", len(o.m), nb+len(vm.Head))
	}
	be := body.be
	// gpu.ClipGradNorm over both buffers at once.
	norm := math.Sqrt(be.SumSquares(body.Grads.Data) + be.SumSquares(vm.HeadGrad))
	if mx := o.Config.MaxGradNorm; mx > 0 {
		if c := float64(mx) / (norm + 1e-6); c < 1 {
			be.Scale(body.Grads.Data, float32(c))
			be.Scale(vm.HeadGrad, float32(c))
		}
	}
	o.Step++
	c := o.Config
	be.AdamW(body.Params.Data, body.Grads.Data, o.m[:nb], o.v[:nb], o.Step, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay)
	be.AdamW(vm.Head, vm.HeadGrad, o.m[nb:], o.v[nb:], o.Step, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay)
	return norm, nil
}

func (o *ValueAdamW) SetMoments(m, v []float32, step int) error {
	if err := o.LoadMoments(m, v); err != nil {
		return fmt.Errorf("%w (the critic's)", err)
	}
	o.Step = step
	return nil
}
