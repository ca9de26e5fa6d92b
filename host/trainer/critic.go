package trainer

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/dist"
)

// critic is the value model of PPO with GAE (veRL's critic worker): its own copy of the
// policy's weights with a one-output head (model.ValueModel), its own AdamW (critic.optim),
// trained on the clipped value loss (critic.cliprange_value, critic.loss_agg_mode).
//
// The value of response token j of a trajectory is read at the position before it, where the
// token was chosen (veRL: values[:, -response_length-1:-1]); tokens outside the response mask
// (tool observations, padding) have value 0 and no loss.
type critic struct {
	vm   *model.ValueModel
	opt  *model.ValueAdamW
	acts *model.ValueActsCache // activations of the micro-batches (at most four buffers)
	dp   dataParallel          // the job's ranks, as the actor's update (dp.go); zero: one rank
	// zero shards the decoder's AdamW moments over the ranks (critic.fsdp.fsdp_size); head
	// then holds the value head's, whole on every rank. nil: opt holds them all.
	zero *dist.ZeRO1
	head model.MomentPair
}

// shard shards the critic's optimizer over dp's ranks (ZeRO-1): the decoder's moments split
// over the ranks, the value head's (a few floats) kept whole on each.
func (c *critic) shard(dp dataParallel) {
	be := c.vm.Body.Backend()
	m, v := c.opt.Tensors()
	be.Free(m)
	be.Free(v)
	c.opt = &model.ValueAdamW{Config: c.opt.Config}
	c.zero = dist.NewZeRO1Flat(dp.comm, be, len(c.vm.Body.Params.Data), c.opt.Config)
	c.head = model.NewMomentPair(be, len(c.vm.Head), "critic value head AdamW")
}

// step reduces the critic's gradients over the ranks and takes its optimizer's step; it
// returns the gradient norm before clipping.
func (c *critic) step(ctx context.Context) (float64, error) {
	if c.zero == nil {
		return c.dp.stepValue(ctx, c.vm, c.opt)
	}
	if err := dist.AllReduceGradients(ctx, c.dp.comm, c.vm.HeadGrad, c.dp.bucket); err != nil {
		return 0, fmt.Errorf("trainer: the critic's gradients: %w", err)
	}
	body, cfg := c.vm.Body, c.opt.Config
	c.zero.Config, c.zero.Step = cfg, c.opt.Step
	norm, err := c.zero.UpdateFlat(ctx, body.Params.Data, body.Grads.Data, [][]float32{c.vm.HeadGrad})
	if err != nil {
		return 0, err
	}
	c.opt.Step = c.zero.Step
	m, v := c.head.Tensors()
	body.Backend().AdamW(c.vm.Head, c.vm.HeadGrad, m, v, c.opt.Step, cfg.LR, cfg.Beta1, cfg.Beta2, cfg.Eps, cfg.WeightDecay)
	return norm, nil
}

// criticOptimizerFile and criticDir are the critic's part of a checkpoint directory.
const (
	criticDir           = "critic"
	criticOptimizerFile = "critic_optimizer.bin"
)

func newCritic(be gpu.Backend, ck *weights.Checkpoint, cc config.Critic) (*critic, error) {
	vm, err := model.NewValueModel(be, ck)
	if err != nil {
		return nil, fmt.Errorf("trainer: critic: %w", err)
	}
	o := cc.Optim
	betas := o.Betas
	if len(betas) != 2 {
		betas = []float64{0.9, 0.999}
	}
	eps := o.Eps
	if eps == 0 {
		eps = 1e-8
	}
	opt := model.NewValueAdamW(vm, model.AdamWConfig{LR: float32(o.LR), Beta1: float32(betas[0]), Beta2: float32(betas[1]),
		Eps: float32(eps), WeightDecay: float32(o.WeightDecay), MaxGradNorm: float32(cc.GradClip)})
	return &critic{vm: vm, opt: opt, acts: model.NewValueActsCache(vm, 4)}, nil
}

// tokenizerProbe is encoded by the actor's and the critic model's tokenizers: the critic
// reads the actor's token ids, so the two must agree.
const tokenizerProbe = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. 48/2 = <<48/2=24>>24\n#### 72 <tool_call>{\"name\": \"calc\"}</tool_call> 日本語 ü"

// openCritic builds the critic from critic.model.path, or from the actor's checkpoint ck
// (read from actorPath) when that is empty or the same path. A critic directory of an rlhost
// checkpoint (critic/ with its value_head.safetensors) brings its trained head too. The
// critic reads the actor's token ids, so its tokenizer must be the actor's tk; a checkpoint
// directory without a tokenizer must have the actor's vocabulary size.
func openCritic(be gpu.Backend, cc config.Critic, actorPath string, ck *weights.Checkpoint, actor *model.Model, tk *tokenizer.Tokenizer) (*critic, error) {
	path := cc.Model.Path
	if path == "" || filepath.Clean(path) == filepath.Clean(actorPath) {
		return newCritic(be, ck, cc)
	}
	cck, err := weights.Load(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: critic.model.path: %w", err)
	}
	c, err := newCritic(be, cck, cc)
	if err != nil {
		return nil, fmt.Errorf("trainer: critic.model.path %s: %w", path, err)
	}
	cv, av := c.vm.Body.Config.V, actor.Config.V
	if ctk, err := tokenizer.Load(path); err == nil {
		if err := sameTokenizer(ctk, tk); err != nil {
			return nil, fmt.Errorf("trainer: critic.model.path %s and actor_rollout_ref.model.path %s: %w: the critic must read the actor's tokens", path, actorPath, err)
		}
		if cv < tk.VocabSize() {
			return nil, fmt.Errorf("trainer: critic.model.path %s embeds %d tokens, fewer than the tokenizer's %d", path, cv, tk.VocabSize())
		}
	} else if cv != av {
		return nil, fmt.Errorf("trainer: critic.model.path %s has no tokenizer (%v) and a vocabulary of %d tokens, not the actor's %d: "+
			"give a model with the actor's tokenizer", path, err, cv, av)
	}
	head := filepath.Join(path, model.ValueHeadFile)
	if _, err := os.Stat(head); err == nil {
		if err := c.vm.LoadHead(head); err != nil {
			return nil, fmt.Errorf("trainer: critic.model.path: %w", err)
		}
	}
	return c, nil
}

// sameTokenizer reports how two tokenizers differ: vocabulary size, eos, or the ids of
// tokenizerProbe.
func sameTokenizer(a, b *tokenizer.Tokenizer) error {
	if a.VocabSize() != b.VocabSize() {
		return fmt.Errorf("the tokenizers differ: vocabularies of %d and %d tokens", a.VocabSize(), b.VocabSize())
	}
	if a.EOS() != b.EOS() {
		return fmt.Errorf("the tokenizers differ: eos ids %d and %d", a.EOS(), b.EOS())
	}
	if ia, ib := a.Encode(tokenizerProbe, false), b.Encode(tokenizerProbe, false); !slices.Equal(ia, ib) {
		return fmt.Errorf("the tokenizers differ: a probe text encodes to %d and %d tokens with other ids", len(ia), len(ib))
	}
	return nil
}

// values runs the critic over the batch in micro-batches: [B*Tr], the value of each response
// model token, 0 elsewhere.
func (c *critic) values(b *batchOf, micro int) ([]float32, error) {
	return c.valuesBudget(b, micro, 0)
}

// valuesBudget is values with micro-batches by token budget when budget > 0
// (critic.use_dynamic_bsz, critic.forward_max_token_len_per_gpu).
func (c *critic) valuesBudget(b *batchOf, micro, budget int) ([]float32, error) {
	order, spans, err := planLogProbsPacked(b, micro, budget, "critic.forward_max_token_len_per_gpu")
	if err != nil {
		return nil, err
	}
	pb := b
	if !isIdentity(order) {
		pb = b.permute(order)
	}
	pout := make([]float32, b.B*b.Tr)
	for _, s := range spans {
		lo, hi := s.lo, s.hi
		mb, lay := pb.microBatch(s)
		a := c.acts.For(mb)
		if err := c.vm.Forward(a, mb); err != nil {
			return nil, fmt.Errorf("trainer: critic forward: %w", err)
		}
		pb.extract(pb.rows(pout, lo, hi), a.Values, lay, lo, hi)
	}
	if pb == b {
		return pout, nil
	}
	out := make([]float32, b.B*b.Tr)
	for i, j := range order {
		copy(out[j*b.Tr:(j+1)*b.Tr], pout[i*b.Tr:(i+1)*b.Tr])
	}
	return out, nil
}

// criticUpdate are the settings of one critic update.
type criticUpdate struct {
	MiniSeqs  int // trajectories per optimiser step (the actor's ppo_mini_batch_size * rollout.n)
	Micro     int // trajectories per forward/backward (critic.ppo_micro_batch_size_per_gpu)
	Budget    int // > 0: micro-batches by token budget (critic.use_dynamic_bsz, critic.ppo_max_token_len_per_gpu)
	Epochs    int // passes over the batch (the actor's ppo_epochs)
	ClipRange float64
	AggMode   string
	NormLen   int // seq-mean-token-sum-norm's divisor
	LR        float64
}

// update trains the critic on the step's returns: epochs over mini-batches (in order, as
// veRL's critic), each an AdamW step over micro-batches with gradient accumulation. The value
// loss of a mini-batch is aggregated over the whole mini-batch (the global token and
// sequence counts), as the actor's loss is. oldValues are the values the advantages were
// computed with (the clipping centre). It returns veRL's critic/* update metrics.
func (c *critic) update(ctx context.Context, b *batchOf, oldValues, returns []float32, u criticUpdate) (map[string]float64, error) {
	c.opt.Config.LR = float32(u.LR)
	miniSeqs, micro := max(u.MiniSeqs, 1), max(u.Micro, 1)
	miniSeqs, err := c.dp.localMini(miniSeqs)
	if err != nil {
		return nil, err
	}
	sums, counts := map[string]float64{}, map[string]float64{}
	add := func(k string, v float64) { sums[k] += v; counts[k]++ }
	var realTok, paddedTok int
	if u.Budget > 0 {
		// The same mini-batches, each sorted longest first for the token budget.
		order := make([]int, b.B)
		for i := range order {
			order[i] = i
		}
		for lo := 0; lo < b.B; lo += miniSeqs {
			sortByLength(b, order, lo, min(lo+miniSeqs, b.B))
		}
		b, oldValues, returns = b.permute(order), permuteRows(oldValues, order, b.Tr), permuteRows(returns, order, b.Tr)
	}
	for epoch := 0; epoch < max(u.Epochs, 1); epoch++ {
		for lo := 0; lo < b.B; lo += miniSeqs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			hi := min(lo+miniSeqs, b.B)
			spans := fixedSpans(lo, hi, micro)
			if u.Budget > 0 {
				var err error
				if spans, err = packedSpans(b, lo, hi, u.Budget, "critic.ppo_max_token_len_per_gpu"); err != nil {
					return nil, err
				}
			}
			re, pa := paddingOf(b, spans)
			realTok += re
			paddedTok += pa
			gTok, gSeq := maskCounts(b.rows(b.mask, lo, hi), b.Tr)
			gTok, gSeq, err := c.dp.counts(ctx, gTok, gSeq)
			if err != nil {
				return nil, err
			}
			agg := algo.Agg{Mode: u.AggMode, GlobalTokens: gTok, GlobalSeqs: gSeq, NormLen: u.NormLen}
			c.vm.ZeroGrads()
			var miniLoss float64
			for _, sp := range spans {
				mlo, mhi := sp.lo, sp.hi
				Bm := mhi - mlo
				mb, lay := b.microBatch(sp)
				a := c.acts.For(mb)
				if err := c.vm.Forward(a, mb); err != nil {
					return nil, fmt.Errorf("trainer: critic forward: %w", err)
				}
				vpreds := make([]float32, Bm*b.Tr)
				b.extract(vpreds, a.Values, lay, mlo, mhi)
				mmask := b.rows(b.mask, mlo, mhi)
				loss, dv, clipFrac := algo.ValueLossAgg(vpreds, b.rows(oldValues, mlo, mhi), b.rows(returns, mlo, mhi), mmask,
					Bm, b.Tr, u.ClipRange, agg)
				miniLoss += loss
				add(criticVFClipfrac, clipFrac)
				add(criticVpredMean, algo.MaskedMean(vpreds, mmask))
				rows := make([]float32, mb.B*mb.T)
				b.scatter(rows, dv, lay, mlo, mhi)
				if err := c.vm.Backward(a, rows); err != nil {
					return nil, fmt.Errorf("trainer: critic backward: %w", err)
				}
			}
			norm, err := c.step(ctx)
			if err != nil {
				return nil, fmt.Errorf("trainer: critic: %w", err)
			}
			if miniLoss, err = c.dp.sum(ctx, miniLoss); err != nil { // the ranks' parts of the mini-batch's loss
				return nil, err
			}
			if math.IsNaN(norm) || math.IsInf(norm, 0) {
				return nil, fmt.Errorf("trainer: critic gradient norm is %v: the update was not finite", norm)
			}
			add(criticVFLoss, miniLoss)
			add(criticGradNorm, norm)
		}
	}
	if err := c.dp.sums(ctx, sums, counts, &realTok, &paddedTok); err != nil {
		return nil, err
	}
	out := map[string]float64{criticLR: u.LR}
	if paddedTok > 0 {
		// The share of the critic update's forward/backward rows that were padding.
		out[perfCriticUpdatePadding] = 1 - float64(realTok)/float64(paddedTok)
	}
	for k, v := range sums {
		out[k] = v / counts[k]
	}
	return out, nil
}

// maskCounts returns the valid tokens and the sequences with at least one valid token of
// a [rows*Tr] mask.
func maskCounts(mask []float32, Tr int) (tokens, seqs int) {
	for i := 0; i < len(mask)/Tr; i++ {
		has := false
		for _, m := range mask[i*Tr : (i+1)*Tr] {
			if m != 0 {
				tokens++
				has = true
			}
		}
		if has {
			seqs++
		}
	}
	return tokens, seqs
}

// criticDataMetrics are veRL's batch statistics of a step with a critic: the values and
// returns over the valid response tokens (mean, max, min) and the explained variance
// 1 - var(returns - values) / (var(returns) + 1e-5), variances with Bessel's correction.
// sum, when not nil, adds the sums the variances are made of over the job's ranks, so that
// the explained variance is the whole batch's (the other figures merge exactly with the
// step's metrics, ranks.go).
func criticDataMetrics(values, returns, adv, mask []float32, sum func(xs ...float64) ([]float64, error)) (map[string]float64, error) {
	out := map[string]float64{}
	var n float64
	var sv, sr, sd, sr2, sd2 float64
	vmax, vmin, rmax, rmin, amax, amin := math.Inf(-1), math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1), math.Inf(1)
	for i, m := range mask {
		if m == 0 {
			continue
		}
		v, r, a := float64(values[i]), float64(returns[i]), float64(adv[i])
		n++
		sv += v
		sr += r
		sr2 += r * r
		sd += r - v
		sd2 += (r - v) * (r - v)
		vmax, vmin = math.Max(vmax, v), math.Min(vmin, v)
		rmax, rmin = math.Max(rmax, r), math.Min(rmin, r)
		amax, amin = math.Max(amax, a), math.Min(amin, a)
	}
	if n > 0 {
		out[criticValuesMean], out[criticValuesMax], out[criticValuesMin] = sv/n, vmax, vmin
		out[criticReturnsMean], out[criticReturnsMax], out[criticReturnsMin] = sr/n, rmax, rmin
		out[criticAdvantagesMax], out[criticAdvantagesMin] = amax, amin
	}
	if sum != nil {
		g, err := sum(n, sr, sr2, sd, sd2)
		if err != nil {
			return nil, fmt.Errorf("trainer: the critic's explained variance: %w", err)
		}
		n, sr, sr2, sd, sd2 = g[0], g[1], g[2], g[3], g[4]
	}
	if n > 1 {
		varR := (sr2 - sr*sr/n) / (n - 1)
		varD := (sd2 - sd*sd/n) / (n - 1)
		out[criticVFExplainedVar] = 1 - varD/(varR+1e-5)
	}
	return out, nil
}

// save writes the critic (decoder + head) into a checkpoint directory (saveMoments its
// optimizer).
func (c *critic) save(dir string) error {
	if err := c.vm.Save(filepath.Join(dir, criticDir)); err != nil {
		return fmt.Errorf("trainer: critic checkpoint: %w", err)
	}
	return nil
}

// saveMoments writes the critic's AdamW moments to path (critic_optimizer.bin: m then v over
// the decoder's parameters and the head's), whole or sharded alike; sharded, a collective
// (writeShardedMoments: rank 0 passes the path, the others "").
func (c *critic) saveMoments(ctx context.Context, path string) error {
	if c.zero == nil {
		if path == "" {
			return nil
		}
		m, v := c.opt.Moments()
		return writeFloats(path, m, v)
	}
	hm, hv := c.head.Moments()
	return writeShardedMoments(ctx, path, c.zero, len(c.vm.Body.Params.Data), hm, hv)
}

// load restores what save and saveMoments wrote, and the optimizer's step count; sharded,
// each rank reads its shard of the decoder's moments and the head's.
func (c *critic) load(dir string, optStep int) error {
	if err := c.vm.Load(filepath.Join(dir, criticDir)); err != nil {
		return fmt.Errorf("trainer: resume the critic from %s (a checkpoint of a run without a critic cannot resume one with): %w", dir, err)
	}
	path := filepath.Join(dir, criticOptimizerFile)
	if c.zero == nil {
		m, v := c.opt.Moments() // host copies: read into them, then upload
		if err := readFloats(path, m, v); err != nil {
			return fmt.Errorf("trainer: resume the critic: %w", err)
		}
		return c.opt.SetMoments(m, v, optStep)
	}
	nb, nh := len(c.vm.Body.Params.Data), len(c.vm.Head)
	lo, hi := c.zero.Range()
	mv, err := readMomentRanges(path, nb+nh, [2]int{lo, hi}, [2]int{nb, nb + nh})
	if err == nil {
		err = c.head.LoadMoments(mv[1][0], mv[1][1])
	}
	if err == nil {
		err = c.zero.SetMoments(mv[0][0], mv[0][1], optStep)
	}
	if err != nil {
		return fmt.Errorf("trainer: resume the critic: %w", err)
	}
	c.opt.Step = optStep
	return nil
}

// lrSchedule is an optimiser section's learning-rate schedule over a run of total steps
// (actor_rollout_ref.actor.optim, critic.optim).
func lrSchedule(o config.Optim, total int) algo.LRSchedule {
	return algo.LRSchedule{LR: o.LR, WarmupSteps: o.WarmupSteps(total), Cosine: o.WarmupStyle == "cosine", MinLRRatio: o.MinLRRatio}
}

// values computes the critic's values of the step's response tokens (s.values; none without a
// critic), in micro-batches of critic.ppo_micro_batch_size_per_gpu (or by token budget).
func (t *Trainer) values(_ context.Context, s *stepState) (map[string]float64, error) {
	if t.critic == nil {
		return nil, nil
	}
	start := time.Now()
	v, err := t.critic.valuesBudget(s.b, t.cfg.Critic.PPOMicroBatchSizePerGPU, t.cfg.CriticForwardBudget())
	if err != nil {
		return nil, err
	}
	s.values = v
	return map[string]float64{timingValues: time.Since(start).Seconds()}, nil
}

// criticUpdateFor is the critic's update settings at a step: its own mini-batch size and
// epochs (the actor's when null, as veRL's defaults), micro-batches, clipping and scheduled
// learning rate.
func criticUpdateFor(cfg *config.Config, step, totalSteps int) criticUpdate {
	return criticUpdate{
		MiniSeqs: cfg.CriticMiniBatchSize() * cfg.ActorRolloutRef.Rollout.N, Micro: cfg.Critic.PPOMicroBatchSizePerGPU, Budget: cfg.CriticUpdateBudget(),
		Epochs: cfg.CriticPPOEpochs(), ClipRange: cfg.Critic.CliprangeValue, AggMode: cfg.Critic.LossAggMode,
		NormLen: cfg.ResponseLength(), LR: lrSchedule(cfg.Critic.Optim, totalSteps).At(step, totalSteps)}
}

// updateCritic trains the critic on the step's returns (no-op without a critic): veRL's
// critic/* metrics of the update and of the batch's values, returns and advantages.
func (t *Trainer) updateCritic(ctx context.Context, s *stepState) (map[string]float64, error) {
	if t.critic == nil {
		return nil, nil
	}
	start := time.Now()
	vals, err := t.critic.update(ctx, s.b, s.values, s.returns, criticUpdateFor(t.cfg, s.step, t.totalSteps))
	if err != nil {
		return nil, err
	}
	var sum func(...float64) ([]float64, error)
	if t.dp.size() > 1 {
		sum = func(xs ...float64) ([]float64, error) { return t.dp.sumAll(ctx, xs...) }
	}
	data, err := criticDataMetrics(s.values, s.returns, s.adv, s.b.mask, sum)
	if err != nil {
		return nil, err
	}
	maps.Copy(vals, data)
	vals[timingUpdateCritic] = time.Since(start).Seconds()
	return vals, nil
}
