package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlhost/rlhost/host/dist/socktest"
	"github.com/rlhost/rlhost/host/metrics"
)

// TestTrainTwoProcesses: `rlhost train` started as 2 processes with exactly the variables
// torchrun gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and
// again with Slurm's (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS; the job script's
// MASTER_ADDR and MASTER_PORT), meet at the rendezvous (rank 0 serves the store; under
// torchrun itself, with RLHOST_TORCH_PYTHON, its agent does), agree on
// the world, each run its own task plugin process, and train one job: one metrics line a
// step, written by rank 0, with one process's gradient norm (to 1e-6) and scores. The binary
// is built with the tag disttest, whose communicator between the processes is the test
// transport over local sockets (host/dist/socktest); the product build refuses several
// ranks (TestTrainRefusesSeveralRanks).
func TestTrainTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model in three processes, twice")
	}
	bin := filepath.Join(t.TempDir(), "rlhost")
	if out, err := exec.Command("go", "build", "-tags", "disttest", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags disttest: %v\n%s", err, out)
	}
	args := func(dir string) []string {
		return tinyRun(t, dir, "trainer.total_training_steps=1", "trainer.save_freq=-1", "trainer.val_before_train=false",
			"trainer.test_freq=-1", "trainer.logger=[jsonl]", "actor_rollout_ref.actor.entropy_coeff=0.01")
	}
	oneDir := filepath.Join(t.TempDir(), "one")
	if _, stderr, err := run(t, args(oneDir)...); err != nil {
		t.Fatalf("one process: %v\n%s", err, stderr)
	}
	one := readSteps(t, oneDir)
	for _, launcher := range []string{"torchrun", "slurm", "torchrun itself"} {
		t.Run(launcher, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "two")
			port, err := socktest.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			outs := make([]string, 2)
			errs := make([]error, 2)
			if launcher == "torchrun itself" {
				// PyTorch's launcher, its agent serving the rendezvous store (make test-dist)
				py := os.Getenv("RLHOST_TORCH_PYTHON")
				if py == "" {
					t.Skip("RLHOST_TORCH_PYTHON (a Python with torch) is not set: make test-dist sets it")
				}
				cmd := exec.Command(py, append([]string{"-m", "torch.distributed.run", "--no-python", "--nproc-per-node", "2",
					"--master-addr", "127.0.0.1", "--master-port", port, bin}, args(dir)...)...)
				cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("torchrun: %v\n%s", err, out)
				}
				for r := range 2 {
					if want := fmt.Sprintf("train: rank %d of 2 (torchrun, local rank %d)", r, r); !strings.Contains(string(out), want) {
						t.Errorf("torchrun's output lacks %q:\n%s", want, out)
					}
				}
				checkTwo(t, one, readSteps(t, dir))
				return
			}
			var wg sync.WaitGroup
			for r := range 2 {
				env := map[string]string{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
				if launcher == "torchrun" {
					env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"] = fmt.Sprint(r), fmt.Sprint(r), "2"
				} else {
					env["SLURM_PROCID"], env["SLURM_LOCALID"], env["SLURM_NTASKS"] = fmt.Sprint(r), fmt.Sprint(r), "2"
				}
				cmd := exec.Command(bin, args(dir)...)
				cmd.Env = os.Environ()
				for k, v := range env {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					out, err := cmd.CombinedOutput()
					outs[r], errs[r] = string(out), err
				}()
			}
			wg.Wait()
			for r := range 2 {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v\n%s", r, errs[r], outs[r])
				}
				if want := fmt.Sprintf("train: rank %d of 2 (%s, local rank %d)", r, launcher, r); !strings.Contains(outs[r], want) {
					t.Errorf("rank %d's output lacks %q", r, want)
				}
			}
			checkTwo(t, one, readSteps(t, dir))
		})
	}
}

// checkTwo compares the step of a job of two processes with one process's.
func checkTwo(t *testing.T, one, two map[string]float64) {
	t.Helper()
	g1, g2 := one[metrics.GradNorm], two[metrics.GradNorm]
	t.Logf("gradient norm %v on one process, %v on two", g1, g2)
	if g1 == 0 || math.Abs(g1-g2) > 1e-6*g1 {
		t.Errorf("gradient norm %v on two processes, %v on one", g2, g1)
	}
	for _, k := range []string{metrics.ScoreMean, metrics.ResponseLengthMean, metrics.PGLoss, metrics.Entropy} {
		if math.Abs(one[k]-two[k]) > 1e-4*math.Max(1, math.Abs(one[k])) {
			t.Errorf("%s: %v on two processes, %v on one", k, two[k], one[k])
		}
	}
}

// readSteps is the one step of runDir/metrics.jsonl.
func readSteps(t *testing.T, runDir string) map[string]float64 {
	t.Helper()
	steps, err := metrics.ReadJSONL(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil || len(steps) != 1 {
		t.Fatalf("%s: %d steps, %v", runDir, len(steps), err)
	}
	return steps[0].Values
}
