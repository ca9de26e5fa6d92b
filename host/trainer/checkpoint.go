package trainer

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/ckpt"
	"github.com/rlhost/rlhost/host/dist"
	"github.com/rlhost/rlhost/host/metrics"
)

// A checkpoint is a directory RUN_DIR/checkpoints/global_step_N with
//
//	actor/            model.safetensors + config.json (transformers loads it)
//	optimizer.bin     AdamW moments, little-endian float32: m then v
//	critic/           with a critic: its decoder (as actor/) and value_head.safetensors
//	critic_optimizer.bin  the critic's AdamW moments
//	state.json        step, optimizer step, data position, KL coefficient
//
//	manifest.json     size and SHA-256 of every other file (host/ckpt), written last
//
// written to a temporary directory and renamed, so a crash never leaves a partial checkpoint
// that looks complete. Resuming verifies a checkpoint against its manifest first: with
// resume_mode=auto a damaged one is skipped, with a warning naming it, for the newest intact
// one.

type trainerState struct {
	Step       int     `json:"step"`
	OptStep    int     `json:"optimizer_step"`
	Epoch      int     `json:"epoch"`
	Pos        int     `json:"pos"`
	KLCoef     float64 `json:"kl_coef"`
	TotalSteps int     `json:"total_steps"`
	CriticStep int     `json:"critic_optimizer_step,omitempty"`
}

// checkpointAt writes the checkpoint of step when trainer.save_freq says so: every save_freq
// steps and after the last; nothing otherwise. Rank 0 writes it; with the optimizer sharded
// the other ranks send it their moments (dist.ZeRO1.GatherMoments).
func (t *Trainer) checkpointAt(ctx context.Context, step int) error {
	tc := t.cfg.Trainer
	if tc.SaveFreq <= 0 || (step%tc.SaveFreq != 0 && step != t.totalSteps) {
		return nil
	}
	if !t.dp.lead() { // the other ranks' part: their shards of the moments, actor's then critic's
		if err := t.saveMoments(ctx, ""); err != nil {
			return err
		}
		if t.critic != nil {
			return t.critic.saveMoments(ctx, "")
		}
		return nil
	}
	return t.checkpoint(ctx)
}

// checkpoint writes the checkpoint of the last finished step (t.step).
func (t *Trainer) checkpoint(ctx context.Context) error {
	final := ckpt.StepDir(t.runDir, t.step)
	tmp := final + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	// the moments first: with the optimizers sharded the other ranks wait on them
	if err := t.saveMoments(ctx, filepath.Join(tmp, "optimizer.bin")); err != nil {
		return err
	}
	if t.critic != nil {
		if err := t.critic.saveMoments(ctx, filepath.Join(tmp, criticOptimizerFile)); err != nil {
			return err
		}
	}
	ck := t.actor.Params.Checkpoint(t.actor.HF)
	if t.actor.LoRA() != nil {
		// The adapters in peft's layout (what resuming reads), and the merged model for
		// anyone who wants a plain HF checkpoint.
		if err := t.actor.SaveLoRA(filepath.Join(tmp, "actor_lora"), t.cfg.ActorRolloutRef.Model.Path); err != nil {
			return err
		}
		ck = t.actor.MergedCheckpoint()
	}
	if err := weights.Save(filepath.Join(tmp, "actor"), ck); err != nil {
		return err
	}
	st := trainerState{Step: t.step, OptStep: t.opt.Step, Epoch: t.sampler.Epoch, Pos: t.sampler.Pos,
		KLCoef: t.klCtl.Beta(), TotalSteps: t.totalSteps}
	if t.critic != nil {
		if err := t.critic.save(tmp); err != nil {
			return err
		}
		st.CriticStep = t.critic.opt.Step
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "state.json"), b, 0o644); err != nil {
		return err
	}
	if err := ckpt.Commit(tmp, final); err != nil {
		return err
	}
	fmt.Fprintf(t.opts.Progress, "checkpoint: %s\n", final)
	if k := t.cfg.Trainer.MaxActorCkptToKeep; k != nil {
		ckpt.Prune(t.runDir, *k)
	}
	return nil
}

// checkFreshRunDir refuses to start a run from scratch (resume_mode=disable) in a run
// directory that already holds a run's metrics, checkpoints or traces: the new run would
// append its steps to the old metrics.jsonl and trace store, and overwrite its checkpoints.
func (t *Trainer) checkFreshRunDir() error {
	var found []string
	for _, name := range []string{"metrics.jsonl", "traces"} {
		if _, err := os.Stat(filepath.Join(t.runDir, name)); err == nil {
			found = append(found, name)
		}
	}
	if steps := ckpt.Steps(t.runDir); len(steps) > 0 {
		found = append(found, fmt.Sprintf("checkpoints/global_step_%d", steps[len(steps)-1]))
	}
	if len(found) == 0 {
		return nil
	}
	return fmt.Errorf("trainer: run directory %s already holds a run (%s) and trainer.resume_mode=disable starts a new one: "+
		"choose another trainer.run_dir (or trainer.experiment_name), remove the directory, or set trainer.resume_mode=auto to continue it",
		t.runDir, strings.Join(found, ", "))
}

// resume restores the latest checkpoint (resume_mode=auto) or the given one (resume_path).
func (t *Trainer) resume() error {
	tc := t.cfg.Trainer
	var dir string
	switch tc.ResumeMode {
	case "disable":
		return nil
	case "resume_path":
		if tc.ResumeFromPath == nil || *tc.ResumeFromPath == "" {
			return fmt.Errorf("trainer: trainer.resume_mode=resume_path needs trainer.resume_from_path")
		}
		dir = *tc.ResumeFromPath
	default:
		steps := ckpt.Steps(t.runDir)
		if len(steps) == 0 {
			return nil
		}
		var damaged []string
		for i := len(steps) - 1; i >= 0 && dir == ""; i-- {
			d := ckpt.StepDir(t.runDir, steps[i])
			if err := t.verifyCheckpoint(d); err != nil {
				fmt.Fprintf(t.opts.Progress, "warning: %v: skipped; resuming from the newest intact checkpoint\n", err)
				t.log.Warn("damaged checkpoint skipped", "checkpoint", d, "error", err)
				damaged = append(damaged, err.Error())
				continue
			}
			dir = d
		}
		if dir == "" {
			return fmt.Errorf("trainer: resume: no intact checkpoint in %s (%s): remove the damaged ones to start the run again, "+
				"or set trainer.resume_mode=disable with another trainer.run_dir", ckpt.Dir(t.runDir), strings.Join(damaged, "; "))
		}
	}
	if tc.ResumeMode == "resume_path" {
		if err := t.verifyCheckpoint(dir); err != nil {
			return fmt.Errorf("trainer: trainer.resume_from_path: %w", err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return fmt.Errorf("trainer: resume from %s: %w", dir, err)
	}
	var st trainerState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("trainer: resume from %s: state.json: %w", dir, err)
	}
	if t.actor.LoRA() != nil {
		if err := t.actor.LoadLoRA(filepath.Join(dir, "actor_lora")); err != nil {
			return fmt.Errorf("trainer: resume from %s: %w", dir, err)
		}
	} else {
		ck, err := weights.Load(filepath.Join(dir, "actor"))
		if err != nil {
			return fmt.Errorf("trainer: resume: %w", err)
		}
		if err := t.actor.Params.Load(ck); err != nil {
			return fmt.Errorf("trainer: resume from %s: %w", dir, err)
		}
	}
	if err := t.loadMoments(filepath.Join(dir, "optimizer.bin"), st.OptStep); err != nil {
		return fmt.Errorf("trainer: resume: %w", err)
	}
	if t.critic != nil {
		if err := t.critic.load(dir, st.CriticStep); err != nil {
			return err
		}
	}
	t.step = st.Step
	if t.sampler != nil {
		t.sampler.Seek(st.Epoch, st.Pos)
	}
	if kc := t.cfg.Algorithm.KLCtrl; kc.Type == "adaptive" && st.KLCoef > 0 {
		t.klCtl = algo.NewAdaptiveKLController(st.KLCoef, kc.TargetKL, kc.Horizon)
	}
	// Metrics logged after the checkpoint belong to steps that will run again.
	if err := truncateMetrics(filepath.Join(t.runDir, "metrics.jsonl"), st.Step); err != nil {
		return err
	}
	fmt.Fprintf(t.opts.Progress, "resumed from %s (step %d)\n", dir, st.Step)
	return nil
}

// verifyCheckpoint checks a checkpoint against its manifest; one written before checkpoints had
// manifests is accepted as it is, with a note.
func (t *Trainer) verifyCheckpoint(dir string) error {
	err := ckpt.Verify(dir)
	if errors.Is(err, ckpt.ErrNoManifest) {
		fmt.Fprintf(t.opts.Progress, "%s has no %s (written by an older rlhost): resuming from it unverified\n", dir, ckpt.ManifestName)
		return nil
	}
	return err
}

// truncateMetrics drops the lines of steps after step from metrics.jsonl.
func truncateMetrics(path string, step int) error {
	steps, err := metrics.ReadJSONL(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil && !errors.Is(err, metrics.ErrTornLine):
		return fmt.Errorf("trainer: resume: %w", err)
	}
	var keep []metrics.Step
	for _, s := range steps {
		if s.Step <= step {
			keep = append(keep, s)
		}
	}
	if len(keep) == len(steps) {
		return nil
	}
	tmp := path + ".tmp"
	os.Remove(tmp)
	l, err := metrics.NewJSONL(tmp)
	if err != nil {
		return err
	}
	for _, s := range keep {
		if err := l.Log(s); err != nil {
			return err
		}
	}
	if err := l.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// saveMoments writes the actor's AdamW moments to path (optimizer.bin: m then v, each in
// the parameters' order), the same file whether the optimizer is whole or sharded over
// the ranks, so a checkpoint resumes at any world size. Sharded, it is a collective
// (writeShardedMoments): rank 0 passes the path, the others "".
func (t *Trainer) saveMoments(ctx context.Context, path string) error {
	if t.dp.zero == nil {
		if path == "" {
			return nil
		}
		m, v := t.opt.Moments()
		return writeFloats(path, m, v)
	}
	params, _ := t.actor.Trainable()
	return writeShardedMoments(ctx, path, t.dp.zero, len(params), nil, nil)
}

// loadMoments restores the actor's AdamW moments and step from path (saveMoments' file);
// with the optimizer sharded each rank reads its own shard's.
func (t *Trainer) loadMoments(path string, step int) error {
	if t.dp.zero == nil {
		m, v := t.opt.Moments() // host copies: read into them, then upload
		if err := readFloats(path, m, v); err != nil {
			return err
		}
		return t.opt.SetMoments(m, v, step)
	}
	params, _ := t.actor.Trainable() // no gradients before the first update
	lo, hi := t.dp.zero.Range()
	mv, err := readMomentRanges(path, len(params), [2]int{lo, hi})
	if err != nil {
		return err
	}
	t.opt.Step = step
	return t.dp.zero.SetMoments(mv[0][0], mv[0][1], step)
}

// writeShardedMoments writes an optimizer file (m then v over n parameters, each in the
// parameters' order) whose first parameters are z's, sharded over the ranks (gathered to
// rank 0 in pieces, dist.ZeRO1.GatherMoments), and whose last len(tm) every rank keeps
// whole (tm, tv: a critic's value head). A collective: every rank calls it, rank 0 with the
// path, the others with "".
func writeShardedMoments(ctx context.Context, path string, z *dist.ZeRO1, zn int, tm, tv []float32) error {
	if path == "" {
		return z.GatherMoments(ctx, 0, nil)
	}
	n := int64(zn + len(tm))
	return writeFileAtomic(path, func(f *os.File) error {
		if err := f.Truncate(8 * n); err != nil {
			return err
		}
		put := func(off int64, m, v []float32) error {
			if _, err := f.WriteAt(floatBytes(m), 4*off); err != nil {
				return err
			}
			_, err := f.WriteAt(floatBytes(v), 4*(n+off))
			return err
		}
		if err := z.GatherMoments(ctx, 0, func(off int, m, v []float32) error { return put(int64(off), m, v) }); err != nil {
			return err
		}
		return put(int64(zn), tm, tv)
	})
}

// readMomentRanges reads the moments of the parameter ranges [lo, hi) from an optimizer file
// of n parameters (m then v): for each range its m and v.
func readMomentRanges(path string, n int, ranges ...[2]int) ([][2][]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if st.Size() != 8*int64(n) {
		return nil, fmt.Errorf("%s: %d bytes, want %d (the moments of %d parameters)", path, st.Size(), 8*int64(n), n)
	}
	out := make([][2][]float32, len(ranges))
	for r, rg := range ranges {
		for i := range 2 {
			x := make([]float32, rg[1]-rg[0])
			b := make([]byte, 4*len(x))
			if _, err := f.ReadAt(b, 4*(int64(i*n)+int64(rg[0]))); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for j := range x {
				x[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
			}
			out[r][i] = x
		}
	}
	return out, nil
}

// floatBytes is xs little-endian.
func floatBytes(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func writeFloats(path string, xs ...[]float32) error {
	return writeFileAtomic(path, func(w *os.File) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		var buf [4]byte
		for _, x := range xs {
			for _, f := range x {
				binary.LittleEndian.PutUint32(buf[:], math.Float32bits(f))
				if _, err := bw.Write(buf[:]); err != nil {
					return err
				}
			}
		}
		return bw.Flush()
	})
}

func readFloats(path string, xs ...[]float32) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	want := 0
	for _, x := range xs {
		want += 4 * len(x)
	}
	if st, err := f.Stat(); err != nil {
		return err
	} else if st.Size() != int64(want) {
		return fmt.Errorf("%s: %d bytes, want %d", path, st.Size(), want)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var buf [4]byte
	for _, x := range xs {
		for i := range x {
			if _, err := io.ReadFull(br, buf[:]); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[:]))
		}
	}
	return nil
}

// writeFileAtomic writes through a temporary file and a rename.
func writeFileAtomic(path string, write func(*os.File) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if err := write(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
