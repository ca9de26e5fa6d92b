package dist

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(string) string
		want World
		err  string
	}{
		{"none", env(), World{WorldSize: 1}, ""},
		{"torchrun", env("RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "3", "MASTER_ADDR", "node1", "MASTER_PORT", "29500", "TORCHELASTIC_USE_AGENT_STORE", "True"),
			World{Rank: 3, WorldSize: 8, LocalRank: 3, Launcher: "torchrun", Store: "node1:29500", AgentStore: true}, ""},
		{"torchrun one process", env("RANK", "0", "WORLD_SIZE", "1", "LOCAL_RANK", "0"), World{WorldSize: 1, Launcher: "torchrun"}, ""},
		{"slurm", env("SLURM_PROCID", "5", "SLURM_NTASKS", "16", "SLURM_LOCALID", "1", "MASTER_ADDR", "n0", "MASTER_PORT", "1234"),
			World{Rank: 5, WorldSize: 16, LocalRank: 1, Launcher: "slurm", Store: "n0:1234"}, ""},
		{"slurm with NCCL_COMM_ID", env("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_LOCALID", "1", "NCCL_COMM_ID", "n0:5000"),
			World{Rank: 1, WorldSize: 2, LocalRank: 1, Launcher: "slurm", NCCLCommID: "n0:5000"}, ""},
		{"slurm without master", env("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_LOCALID", "1"), World{}, "scontrol show hostnames"},
		{"rank past size", env("RANK", "8", "WORLD_SIZE", "8", "LOCAL_RANK", "0", "MASTER_ADDR", "a", "MASTER_PORT", "1"), World{}, "RANK=8 with WORLD_SIZE=8"},
		{"bad rank", env("RANK", "x", "WORLD_SIZE", "8"), World{}, `RANK="x"`},
		{"no local rank", env("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT", "1"), World{}, "LOCAL_RANK is not"},
		{"bad port", env("RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1", "MASTER_ADDR", "a", "MASTER_PORT", "http"), World{}, `MASTER_PORT="http"`},
		{"NCCL_COMM_ID alone", env("NCCL_COMM_ID", "a:1"), World{}, "no launcher says which rank"},
		{"bad NCCL_COMM_ID", env("RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1", "NCCL_COMM_ID", "a"), World{}, "not host:port"},
	} {
		w, err := FromEnv(tc.env)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %+v, %v; want an error with %q", tc.name, w, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && w != tc.want:
			t.Errorf("%s: %+v, want %+v", tc.name, w, tc.want)
		}
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

func newID() ([]byte, error) {
	id := make([]byte, 128) // ncclUniqueId's size
	_, err := rand.Read(id)
	return id, err
}

// Without torchrun's agent, rank 0 serves the store: every rank gets rank 0's value, and a
// rank that never comes is named by rank 0 when the wait ends.
func TestShareOwnStore(t *testing.T) {
	port := freePort(t)
	const n = 4
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r > 0 {
				time.Sleep(time.Duration(r) * 30 * time.Millisecond) // before and after rank 0's server
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			w := World{Rank: r, WorldSize: n, LocalRank: r, Launcher: "slurm", Store: "127.0.0.1:" + port}
			got[r], errs[r] = Share(ctx, w, "nccl_id", newID)
		}()
	}
	wg.Wait()
	for r := range n {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if len(got[r]) != 128 || !bytes.Equal(got[r], got[0]) {
			t.Fatalf("rank %d has %x, rank 0 %x", r, got[r], got[0])
		}
	}

	// world of 3, rank 2 never starts
	port = freePort(t)
	var err0 error
	wg.Add(2)
	for r := range 2 {
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := Share(ctx, World{Rank: r, WorldSize: 3, Launcher: "slurm", Store: "127.0.0.1:" + port}, "nccl_id", newID)
			if r == 0 {
				err0 = err
			}
		}()
	}
	wg.Wait()
	if err0 == nil || !strings.Contains(err0.Error(), "ranks 2 of 3 never reached the rendezvous") {
		t.Errorf("rank 2 missing: rank 0 says %v", err0)
	}
}

// torchPython is RLHOST_TORCH_PYTHON, a python with torch (its torchrun); the test that
// needs it skips without.
func torchPython(t *testing.T) string {
	py := os.Getenv("RLHOST_TORCH_PYTHON")
	if py == "" {
		t.Skip("set RLHOST_TORCH_PYTHON to a python with torch (torchrun)")
	}
	return py
}

// Under real torchrun (its agent serves the store at MASTER_PORT; --no-python, as a
// user starts rlhost), every rank reads its place from torchrun's variables and gets rank 0's
// value through torchrun's own store.
func TestShareTorchrun(t *testing.T) {
	if os.Getenv("RLHOST_DIST_RANK_OUT") != "" {
		t.Skip("the ranks' side: TestTorchrunRank")
	}
	py := torchPython(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	const n = 3
	cmd := exec.Command(py, "-m", "torch.distributed.run", "--no-python", "--nproc-per-node", fmt.Sprint(n),
		"--master-addr", "127.0.0.1", "--master-port", freePort(t), exe, "-test.run", "^TestTorchrunRank$", "-test.v")
	cmd.Env = append(os.Environ(), "RLHOST_DIST_RANK_OUT="+out, "OMP_NUM_THREADS=1")
	logs, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("torchrun: %v\n%s", err, logs)
	}
	var first []byte
	for r := range n {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprint(r)))
		if err != nil {
			t.Fatalf("rank %d wrote nothing: %v\n%s", r, err, logs)
		}
		if r == 0 {
			first = b
		}
		if !bytes.Equal(b, first) || !strings.Contains(string(b), "agent=true") {
			t.Errorf("rank %d: %s; rank 0: %s", r, b, first)
		}
	}
	t.Logf("%d ranks under torchrun: %s", n, first)
}

// TestTorchrunRank is one rank of TestShareTorchrun (skipped unless torchrun started it).
func TestTorchrunRank(t *testing.T) {
	dir := os.Getenv("RLHOST_DIST_RANK_OUT")
	if dir == "" {
		t.Skip("run by TestShareTorchrun under torchrun")
	}
	w, err := FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := Share(ctx, w, "nccl_id", newID)
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("id=%s world=%d agent=%v", hex.EncodeToString(id), w.WorldSize, w.AgentStore)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(w.Rank)), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}
