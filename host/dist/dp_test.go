package dist

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
)

func TestShard(t *testing.T) {
	var got [][2]int
	for r := range 4 {
		lo, hi, err := Shard(8, 4, r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, [2]int{lo, hi})
	}
	if !slices.Equal(got, [][2]int{{0, 2}, {2, 4}, {4, 6}, {6, 8}}) {
		t.Errorf("Shard(8, 4, r) = %v", got)
	}
	if _, _, err := Shard(6, 4, 0); err == nil || !strings.Contains(err.Error(), "6 units") || !strings.Contains(err.Error(), "4 ranks") {
		t.Errorf("Shard(6, 4, 0): %v; want the uneven split named", err)
	}
}

// dpConfig is a tiny Llama-shaped model (5296 parameters).
var dpConfig = model.Config{Family: "llama", V: 61, C: 32, F: 48, L: 2, NH: 4, NKV: 2, HD: 8, MaxPos: 32,
	Eps: 1e-5, RopeTheta: 10000, BOS: 1, EOS: 2}

// dpBatch is B sequences of T tokens and a weight per scored token: the loss is
// sum_n -w[n]*logp[n], w already divided by the batch's token count (a token-mean over the
// whole batch, as each rank's share must be).
type dpBatch struct {
	B, T            int
	tokens, targets []int32
	w               []float32
}

func newDPBatch(r *rand.Rand, B, T, V int) dpBatch {
	b := dpBatch{B: B, T: T, tokens: make([]int32, B*T), targets: make([]int32, B*T), w: make([]float32, B*T)}
	for i := range b.tokens {
		b.tokens[i] = int32(r.IntN(V))
	}
	for i := range b.targets {
		b.targets[i] = -1
		if i%T < T-1 {
			b.targets[i] = b.tokens[i+1]
			b.w[i] = float32(r.NormFloat64()) / float32(B*(T-1))
		}
	}
	return b
}

// sequences is the batch's sequences [lo, hi).
func (b dpBatch) sequences(lo, hi int) model.Batch {
	return model.Batch{B: hi - lo, T: b.T, Tokens: b.tokens[lo*b.T : hi*b.T], Targets: b.targets[lo*b.T : hi*b.T]}
}

// backward runs the forward and backward of sequences [lo, hi) on m, its gradients zeroed
// first.
func (b dpBatch) backward(m *model.Model, lo, hi int) error {
	m.ZeroGrads()
	a := m.NewActs(hi-lo, b.T)
	defer a.Free()
	if err := m.Forward(a, b.sequences(lo, hi)); err != nil {
		return err
	}
	dlogp := make([]float32, (hi-lo)*b.T)
	for i := range dlogp {
		dlogp[i] = -b.w[lo*b.T+i]
	}
	return m.Backward(a, dlogp, make([]float32, len(dlogp)))
}

// dpBackend opens a rank's device: gpu/cpu here, the CUDA emulator in the cudaemu build's
// test, whose device memory the communicator reaches through OnDevice (dpOnDevice).
var (
	dpBackend  = func() (gpu.Backend, func()) { return cpu.New(), func() {} }
	dpOnDevice = false
)

var dpAdamW = model.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 0.5}

const dpSteps = 3

// dpRun trains the same initial weights for dpSteps steps over one batch a step on size
// ranks (goroutines, each its own gpu/cpu model and in-process communicator), each rank the
// whole batch's sequences Shard gives it; its gradients all-reduced in buckets of bucket
// floats (AdamW on every rank) or, with zero, reduce-scattered to ZeRO-1's shards. plant,
// when set, breaks one step of the rank's exchange (a planted defect). It returns rank 0's
// weights, the all-reduced gradients of the first step and the norms, and an error when
// the ranks' weights differ.
func dpRun(t *testing.T, size, bucket int, zero bool, plant string) (params, grads0 []float32, norms []float64, err error) {
	params, grads0, norms, _, err = dpRunMoments(t, size, bucket, zero, plant)
	return params, grads0, norms, err
}

// dpRunMoments is dpRun that also returns the optimizer's moments after the last step (m
// then v, each parameter's): with zero, ZeRO1.GatherMoments's pieces put together on rank 0.
func dpRunMoments(t *testing.T, size, bucket int, zero bool, plant string) (params, grads0 []float32, norms []float64, moments []float32, err error) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 7))
	init := make([]float32, dpConfig.NumParams())
	for i := range init {
		init[i] = float32(r.NormFloat64() * 0.2)
	}
	var batches []dpBatch
	for range dpSteps {
		batches = append(batches, newDPBatch(r, 12, 12, dpConfig.V)) // 12 sequences: a share on 2, 3 or 4 ranks
	}
	comms := NewLocal(size, 30*time.Second)
	out := make([][]float32, size)
	g0 := make([][]float32, size)
	ns := make([][]float64, size)
	ctx := context.Background()
	noErrors(t, onRanks(comms, func(c Comm) error {
		be, done := dpBackend()
		defer done()
		if dpOnDevice {
			c = OnDevice(c, be)
		}
		m := model.NewZero(be, dpConfig)
		m.Params.Upload(init)
		m.EnableGrads()
		opt := model.NewAdamW(m, dpAdamW)
		zc := c
		if plant == "swapped-shards" {
			zc = swappedRank{c}
		}
		z := NewZeRO1(zc, m, dpAdamW)
		for s, b := range batches {
			lo, hi, err := Shard(b.B, c.Size(), c.Rank())
			if err != nil {
				return err
			}
			if plant == "group-split" && c.Size() > 1 { // a rank scoring a sequence of its neighbour's too
				hi = min(hi+1, b.B)
			}
			if err := b.backward(m, lo, hi); err != nil {
				return err
			}
			var norm float64
			if zero {
				if norm, err = z.Update(ctx, m); err != nil {
					return err
				}
			} else {
				_, grads := m.Trainable()
				bg := grads
				if plant == "bucket-left-out" {
					bg = grads[:len(grads)-bucket/2] // the last bucket not exchanged
				}
				if err := AllReduceGradients(ctx, c, bg, bucket); err != nil {
					return err
				}
				if s == 0 {
					g0[c.Rank()] = make([]float32, len(grads))
					be.Download(g0[c.Rank()], grads)
				}
				if norm, err = opt.Update(m); err != nil {
					return err
				}
			}
			ns[c.Rank()] = append(ns[c.Rank()], norm)
		}
		out[c.Rank()] = m.Params.Host()
		if plant != "" { // a planted run's moments are not looked at
			return nil
		}
		if !zero {
			if c.Rank() == 0 {
				mm, vv := opt.Moments()
				moments = append(slices.Clone(mm), vv...)
			}
			return nil
		}
		var all []float32
		if c.Rank() == 0 {
			all = make([]float32, 2*z.n)
			for i := range all {
				all[i] = float32(math.NaN())
			}
		}
		err := z.GatherMoments(ctx, 100, func(off int, m, v []float32) error { // 100: several pieces a rank
			copy(all[off:], m)
			copy(all[z.n+off:], v)
			return nil
		})
		if c.Rank() == 0 {
			moments = all
		}
		return err
	}))
	for r := 1; r < size; r++ {
		if !slices.Equal(out[r], out[0]) {
			err = fmt.Errorf("rank %d's weights differ from rank 0's", r)
		}
	}
	return out[0], g0[0], ns[0], moments, err
}

// swappedRank reports the mirror rank: ZeRO-1 over it updates another rank's shard.
type swappedRank struct{ Comm }

func (s swappedRank) Rank() int { return s.Comm.Size() - 1 - s.Comm.Rank() }

// maxRelDiff is max |a-b| / max(1e-3, max |b|).
func maxRelDiff(a, b []float32) float64 {
	scale, worst := 1e-3, 0.0
	for _, v := range b {
		scale = max(scale, math.Abs(float64(v)))
	}
	for i := range a {
		worst = max(worst, math.Abs(float64(a[i])-float64(b[i])))
	}
	return worst / scale
}

// TestDataParallelMatchesOneRank: 2 and 4 ranks, each training on its share of the batch
// with the gradients all-reduced in buckets (or ZeRO-1's reduce-scatter, sharded update
// and all-gather), reach the weights of one rank training on the whole batch: the
// gradients equal to float32 rounding (the sums' order differs), the norms, and after 3
// AdamW steps the weights. Planted defects fail it: a gradient bucket left out of the
// exchange, a GRPO group (here a sequence) scored on two ranks, ZeRO-1's shard offsets
// swapped.
func TestDataParallelMatchesOneRank(t *testing.T) {
	const bucket = 1000 // 6 buckets of the 5296 gradients
	want, wantG, wantN, wantM, _ := dpRunMoments(t, 1, bucket, false, "")
	agree := func(params, grads []float32, norms []float64, ranks error) error {
		if ranks != nil {
			return ranks
		}
		if grads != nil {
			if d := maxRelDiff(grads, wantG); d > 1e-5 {
				return fmt.Errorf("the all-reduced gradients differ from one rank's by %.3g (relative)", d)
			}
		}
		for s := range norms {
			if d := math.Abs(norms[s]-wantN[s]) / wantN[s]; d > 1e-5 {
				return fmt.Errorf("step %d: gradient norm %.8g, one rank %.8g", s+1, norms[s], wantN[s])
			}
		}
		if d := maxRelDiff(params, want); d > 2e-5 {
			return fmt.Errorf("after %d steps the weights differ from one rank's by %.3g (relative)", dpSteps, d)
		}
		return nil
	}
	n := len(want)
	for _, size := range []int{2, 3, 4} { // 3: ZeRO-1's remainder (5296 = 3*1765 + 1) on the last rank
		for _, zero := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d ranks zero1=%v", size, zero), func(t *testing.T) {
				params, grads, norms, moments, ranks := dpRunMoments(t, size, bucket, zero, "")
				if err := agree(params, grads, norms, ranks); err != nil {
					t.Error(err)
				}
				// the moments (gathered from the shards with zero) are one rank's
				if dm, dv := maxRelDiff(moments[:n], wantM[:n]), maxRelDiff(moments[n:], wantM[n:]); dm > 1e-5 || dv > 1e-5 || slices.ContainsFunc(moments, func(x float32) bool { return x != x }) {
					t.Errorf("the optimizer's moments differ from one rank's by %.3g (m) and %.3g (v), relative", dm, dv)
				}
				t.Logf("weights after %d steps within %.2g of one rank's (relative); norms %v, one rank %v",
					dpSteps, maxRelDiff(params, want), norms, wantN)
			})
		}
	}
	for _, tc := range []struct {
		plant string
		zero  bool
	}{{"bucket-left-out", false}, {"group-split", false}, {"swapped-shards", true}} {
		t.Run("planted "+tc.plant, func(t *testing.T) {
			err := agree(dpRun(t, 2, bucket, tc.zero, tc.plant))
			if err == nil {
				t.Fatalf("the run with %s planted reaches one rank's weights", tc.plant)
			}
			t.Log(err)
		})
	}
}
