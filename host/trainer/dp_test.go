package trainer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/dist"
)

// dpUpdateInputs are the advantages, old and reference log-probs of trajectories [lo, hi) of
// outs laid out as b (its own Tr): each a function of the trajectory's index in the whole
// batch and the token, so that every rank's share holds the whole batch's values.
func dpUpdateInputs(b *batchOf, lo int) (adv, old, ref []float32) {
	adv, old, ref = make([]float32, b.B*b.Tr), make([]float32, b.B*b.Tr), make([]float32, b.B*b.Tr)
	for i := range b.B {
		r := rand.New(rand.NewPCG(uint64(lo+i), 77))
		a := float32(r.NormFloat64())
		for j := range b.Tr {
			k := i*b.Tr + j
			adv[k] = a * b.mask[k]
			old[k] = float32(r.NormFloat64()*0.3-2.5) * b.mask[k]
			ref[k] = float32(r.NormFloat64()*0.1-2.5) * b.mask[k]
		}
	}
	return adv, old, ref
}

// dpUpdate runs one actor update (2 PPO epochs over one mini-batch of 8 trajectories,
// micro-batches of 2, clipping, the KL loss) of the same trajectories on size ranks, each its
// share, over comms (nil: one rank), with ZeRO-1 or not; it returns every rank's weights and
// metrics. actor/micro_batches is a rank's count, so size ranks report 1/size of one rank's.
func dpUpdate(t *testing.T, size int, comms []dist.Comm, zero bool, mode string) ([][]float32, []map[string]float64) {
	t.Helper()
	outs := variedOutputs(8, 11)
	return onRanks(t, size, func(rank int) ([]float32, map[string]float64, error) {
		m := tinyModel()
		cfg := config.Default()
		ac := &cfg.ActorRolloutRef.Actor
		cfg.ActorRolloutRef.Rollout.N = 1
		ac.PPOMiniBatchSize, ac.PPOMicroBatchSizePerGPU, ac.PPOEpochs, ac.Shuffle = 8, 2, 2, false
		ac.LossAggMode, ac.UseKLLoss, ac.KLLossCoef, ac.EntropyCoeff = mode, true, 0.1, 0.01
		ac.Optim.LR, ac.GradClip = 1e-2, 0.5
		opt := model.NewAdamW(m, model.AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 0.5})
		tr := &Trainer{cfg: cfg, actor: m, acts: model.NewActsCache(m, 4), totalSteps: 1, opt: opt}
		m.EnableGrads()
		lo, hi := 0, len(outs)
		if comms != nil {
			c := comms[rank]
			tr.dp = dataParallel{comm: c, bucket: 700}
			if zero {
				tr.dp.zero = dist.NewZeRO1(c, m, opt.Config)
			}
			var err error
			if lo, hi, err = dist.Shard(len(outs), size, rank); err != nil {
				return nil, nil, err
			}
		}
		b := newBatch(outs[lo:hi])
		adv, old, ref := dpUpdateInputs(b, lo)
		got, err := tr.ppoUpdate(context.Background(), b, adv, old, ref, 1)
		return slices.Clone(m.Params.Data), got, err
	})
}

// onRanks runs f for ranks 0..size-1 at once (goroutines) and returns each rank's weights and
// metrics; a rank's error fails the test.
func onRanks(t *testing.T, size int, f func(rank int) ([]float32, map[string]float64, error)) ([][]float32, []map[string]float64) {
	t.Helper()
	weights := make([][]float32, size)
	mets := make([]map[string]float64, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for rank := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			weights[rank], mets[rank], errs[rank] = f(rank)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return weights, mets
}

// dpAgree compares ranks' weights and metrics with one rank's: an error names the first
// difference beyond tol (relative).
func dpAgree(weights [][]float32, mets []map[string]float64, want []float32, wantM map[string]float64, tol float64) error {
	for r := range weights {
		if !slices.Equal(weights[r], weights[0]) {
			return fmt.Errorf("rank %d's weights differ from rank 0's", r)
		}
	}
	if d := maxRelDiff(weights[0], want); d > tol {
		return fmt.Errorf("weights differ from one rank's by %.3g (relative to the largest)", d)
	}
	keys := make([]string, 0, len(wantM))
	for k := range wantM {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		got, ok := mets[0][k]
		if !ok {
			return fmt.Errorf("metric %s missing", k)
		}
		want := wantM[k]
		if k == actorMicroBatches { // a rank's micro-batches (per GPU, as veRL's micro-batch size is)
			want /= float64(len(weights))
		}
		if d := math.Abs(got - want); d > tol*math.Max(1e-3, math.Abs(want)) {
			return fmt.Errorf("metric %s = %.8g, want %.8g", k, got, want)
		}
	}
	return nil
}

// TestDataParallelUpdateMatchesOneRank: the actor's update on 2 and 4 ranks (goroutines,
// each its own model and share of the trajectories, over the in-process communicator),
// with AdamW on every rank or ZeRO-1, gives one rank's weights and every metric of the
// update (losses, clip fractions, KL, entropy, gradient norm, padding), to float32
// rounding, for token-mean and sequence-mean aggregation. Planted defects fail it: the
// mini-batch's token counts not summed over the ranks (each rank's loss normalised by its
// own share), the gradients not all-reduced.
func TestDataParallelUpdateMatchesOneRank(t *testing.T) {
	const tol = 1e-4
	for _, mode := range []string{"token-mean", "seq-mean-token-mean"} {
		ws, ms := dpUpdate(t, 1, nil, false, mode)
		want, wantM := ws[0], ms[0]
		for _, size := range []int{2, 4} {
			for _, zero := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%d ranks zero1=%v", mode, size, zero), func(t *testing.T) {
					w, m := dpUpdate(t, size, dist.NewLocal(size, time.Minute), zero, mode)
					if err := dpAgree(w, m, want, wantM, tol); err != nil {
						t.Fatal(err)
					}
					t.Logf("grad norm %.8g (one rank %.8g), pg loss %.8g (%.8g)", m[0]["actor/grad_norm"], wantM["actor/grad_norm"],
						m[0]["actor/pg_loss"], wantM["actor/pg_loss"])
				})
			}
		}
		for _, plant := range []string{"counts not summed", "gradients not reduced"} {
			t.Run(mode+"/planted "+plant, func(t *testing.T) {
				comms := dist.NewLocal(2, time.Minute)
				for i, c := range comms {
					comms[i] = plantedComm{Comm: c, plant: plant}
				}
				w, m := dpUpdate(t, 2, comms, false, mode)
				err := dpAgree(w, m, want, wantM, tol)
				if err == nil {
					t.Fatalf("the update with %s matches one rank's", plant)
				}
				t.Log(err)
			})
		}
	}
}

// plantedComm breaks one exchange of the data-parallel update.
type plantedComm struct {
	dist.Comm
	plant string
}

func (p plantedComm) AllReduce64(ctx context.Context, buf []float64, op dist.Op) error {
	if p.plant == "counts not summed" && len(buf) == 2 {
		return nil
	}
	return p.Comm.AllReduce64(ctx, buf, op)
}

func (p plantedComm) AllReduce(ctx context.Context, buf []float32, op dist.Op) error {
	if p.plant == "gradients not reduced" {
		return nil
	}
	return p.Comm.AllReduce(ctx, buf, op)
}

// TestDataParallelMiniBatchSplits: a mini-batch that does not split over the ranks is an
// error naming both counts.
func TestDataParallelMiniBatchSplits(t *testing.T) {
	_, err := dataParallel{comm: dist.NewLocal(3, time.Second)[0]}.localMini(8)
	if err == nil || !strings.Contains(err.Error(), "8 trajectories") || !strings.Contains(err.Error(), "3 ranks") {
		t.Errorf("localMini: %v", err)
	}
}

// relayout copies rows [lo, hi) of x, laid out [*, fromTr], into rows of toTr.
func relayout(x []float32, fromTr, lo, hi, toTr int) []float32 {
	out := make([]float32, (hi-lo)*toTr)
	for i := lo; i < hi; i++ {
		copy(out[(i-lo)*toTr:(i-lo+1)*toTr], x[i*fromTr:i*fromTr+min(fromTr, toTr)])
	}
	return out
}

// TestDataParallelCriticUpdateMatchesOneRank: the critic's update (PPO with a critic) on 2 and
// 4 ranks, each its share of the trajectories, its optimizer whole on each rank or sharded
// (critic.fsdp.fsdp_size, ZeRO-1 over the decoder with the head's moments on every rank),
// gives one rank's value-model weights and update metrics (vf_loss, clip fraction, vpred
// mean, gradient norm, padding) within 1e-4, and the sharded optimizer's checkpoint file one
// rank's moments; that file, loaded by 3 sharded ranks and written again, comes back bit for
// bit. The gradients left unreduced fail it.
func TestDataParallelCriticUpdateMatchesOneRank(t *testing.T) {
	ctx := context.Background()
	b, rewards := fakeBatch(8, 7)
	ref := tinyCritic(t, 3e-3)
	v0, err := ref.values(b, 4)
	if err != nil {
		t.Fatal(err)
	}
	_, returns := algo.GAEAdvantages(rewards, v0, b.mask, b.B, b.Tr, 0.99, 0.95)
	u := criticUpdate{MiniSeqs: 8, Micro: 2, Epochs: 2, ClipRange: 0.2, AggMode: algo.TokenMean, LR: 3e-3}
	// run updates on size ranks (comms nil: one) and writes the checkpoint's critic and
	// optimizer moments into dir
	run := func(size int, comms []dist.Comm, zero bool, dir string) ([][]float32, []map[string]float64) {
		return onRanks(t, size, func(rank int) ([]float32, map[string]float64, error) {
			c := tinyCritic(t, 3e-3)
			lo, hi := 0, b.B
			if comms != nil {
				c.dp = dataParallel{comm: comms[rank], bucket: 1000}
				lo, hi, _ = dist.Shard(b.B, size, rank)
				if zero {
					c.shard(c.dp)
				}
			}
			lb := newBatch(b.outs[lo:hi])
			m, err := c.update(ctx, lb, relayout(v0, b.Tr, lo, hi, lb.Tr), relayout(returns, b.Tr, lo, hi, lb.Tr), u)
			if err != nil {
				return nil, nil, err
			}
			path := ""
			if rank == 0 {
				if err := c.save(dir); err != nil {
					return nil, nil, err
				}
				path = filepath.Join(dir, criticOptimizerFile)
			}
			err = c.saveMoments(ctx, path)
			return append(slices.Clone(c.vm.Body.Params.Data), c.vm.Head...), m, err
		})
	}
	oneDir := t.TempDir()
	ws, ms := run(1, nil, false, oneDir)
	want := readMomentsFile(t, filepath.Join(oneDir, criticOptimizerFile))
	for _, size := range []int{2, 4} {
		for _, zero := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d ranks zero1=%v", size, zero), func(t *testing.T) {
				dir := t.TempDir()
				w, m := run(size, dist.NewLocal(size, time.Minute), zero, dir)
				if err := dpAgree(w, m, ws[0], ms[0], 1e-4); err != nil {
					t.Fatal(err)
				}
				got := readMomentsFile(t, filepath.Join(dir, criticOptimizerFile))
				if d := maxRelDiff(got, want); len(got) != len(want) || d > 1e-4 {
					t.Fatalf("the checkpoint's moments differ from one rank's by %.3g (relative)", d)
				}
				t.Logf("vf_loss %.8g (one rank %.8g), grad norm %.8g (%.8g)", m[0]["critic/vf_loss"], ms[0]["critic/vf_loss"],
					m[0]["critic/grad_norm"], ms[0]["critic/grad_norm"])
				if !zero || size != 4 {
					return
				}
				again := t.TempDir()
				comms := dist.NewLocal(3, time.Minute)
				onRanks(t, 3, func(rank int) ([]float32, map[string]float64, error) {
					c := tinyCritic(t, 3e-3)
					c.dp = dataParallel{comm: comms[rank], bucket: 1000}
					c.shard(c.dp)
					if err := c.load(dir, 2); err != nil {
						return nil, nil, err
					}
					path := ""
					if rank == 0 {
						path = filepath.Join(again, criticOptimizerFile)
					}
					return nil, nil, c.saveMoments(ctx, path)
				})
				if back := readMomentsFile(t, filepath.Join(again, criticOptimizerFile)); !slices.Equal(back, got) {
					t.Fatal("the moments of 4 sharded ranks, loaded by 3 and written again, differ")
				}
			})
		}
	}
	t.Run("planted gradients not reduced", func(t *testing.T) {
		comms := dist.NewLocal(2, time.Minute)
		for i, c := range comms {
			comms[i] = plantedComm{Comm: c, plant: "gradients not reduced"}
		}
		w, m := run(2, comms, false, t.TempDir())
		err := dpAgree(w, m, ws[0], ms[0], 1e-4)
		if err == nil {
			t.Fatal("the critic's update with its gradients unreduced matches one rank's")
		}
		t.Log(err)
	})
}

// readMomentsFile reads an optimizer file of little-endian float32.
func readMomentsFile(t *testing.T, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, len(b)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

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
