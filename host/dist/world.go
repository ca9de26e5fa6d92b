// Package dist is how a process learns its place among the ranks of a job started the way
// PyTorch users start theirs (torchrun, Slurm's srun, or NCCL_COMM_ID), and how the ranks
// share the one value they need before NCCL can connect them: the communicator's unique id,
// handed out by rank 0 through the launcher's rendezvous store. It also holds what data
// parallelism is built from: a communicator with NCCL's semantics (Comm; NewLocal, the
// in-process one the tests run ranks on), a step's split over the ranks (Shard), the
// gradients' bucketed all-reduce and ZeRO-1's sharded AdamW (docs/distributed.md).
package dist

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// World is this process's place in a job.
type World struct {
	Rank, WorldSize int
	LocalRank       int    // the rank within its node: the GPU it drives
	Launcher        string // "torchrun", "slurm" or "" (one process, no launcher)
	// Store is the rendezvous store's host:port (MASTER_ADDR:MASTER_PORT). With
	// AgentStore torchrun's agent serves it; otherwise rank 0 serves it itself.
	Store      string
	AgentStore bool
	// NCCLCommID is NCCL_COMM_ID (host:port of NCCL's own bootstrap root, which rank 0
	// opens): NCCL then derives the unique id from it on every rank, and the store is
	// not needed for it.
	NCCLCommID string
}

// Single reports a job of one process.
func (w World) Single() bool { return w.WorldSize <= 1 }

// String names the rank for messages: "rank 2 of 8 (torchrun, local rank 2)".
func (w World) String() string {
	if w.Launcher == "" {
		return "a single process"
	}
	return fmt.Sprintf("rank %d of %d (%s, local rank %d)", w.Rank, w.WorldSize, w.Launcher, w.LocalRank)
}

// FromEnv reads the launcher's variables through getenv (os.Getenv): torchrun's RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (and TORCHELASTIC_USE_AGENT_STORE);
// else Slurm's SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID with MASTER_ADDR and MASTER_PORT
// from the job script; NCCL_COMM_ID with either. None of them: a single process. A
// variable that is there but wrong is an error naming it.
func FromEnv(getenv func(string) string) (World, error) {
	w := World{WorldSize: 1, NCCLCommID: getenv("NCCL_COMM_ID")}
	num := func(key string) (int, error) {
		v, err := strconv.Atoi(strings.TrimSpace(getenv(key)))
		if err != nil || v < 0 {
			return 0, fmt.Errorf("dist: %s=%q is not a rank or count", key, getenv(key))
		}
		return v, nil
	}
	var err error
	var rankKey, sizeKey, localKey string
	switch {
	case getenv("RANK") != "" || getenv("WORLD_SIZE") != "":
		w.Launcher, rankKey, sizeKey, localKey = "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"
		w.AgentStore = strings.EqualFold(getenv("TORCHELASTIC_USE_AGENT_STORE"), "true")
	case getenv("SLURM_PROCID") != "" && getenv("SLURM_NTASKS") != "":
		w.Launcher, rankKey, sizeKey, localKey = "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"
	default:
		if w.NCCLCommID != "" {
			return w, fmt.Errorf("dist: NCCL_COMM_ID=%q is set but no launcher says which rank this is (torchrun's RANK and WORLD_SIZE, or Slurm's SLURM_PROCID and SLURM_NTASKS)", w.NCCLCommID)
		}
		return w, nil
	}
	if w.Rank, err = num(rankKey); err != nil {
		return w, err
	}
	if w.WorldSize, err = num(sizeKey); err != nil {
		return w, err
	}
	if w.WorldSize < 1 || w.Rank >= w.WorldSize {
		return w, fmt.Errorf("dist: %s=%d with %s=%d: the rank must be below the world size", rankKey, w.Rank, sizeKey, w.WorldSize)
	}
	if getenv(localKey) != "" {
		if w.LocalRank, err = num(localKey); err != nil {
			return w, err
		}
	} else if w.Launcher == "torchrun" && w.WorldSize > 1 {
		return w, fmt.Errorf("dist: RANK and WORLD_SIZE are set but LOCAL_RANK is not (torchrun sets all three): which GPU this rank drives is unknown")
	}
	if w.NCCLCommID != "" {
		if _, _, err := net.SplitHostPort(w.NCCLCommID); err != nil {
			return w, fmt.Errorf("dist: NCCL_COMM_ID=%q is not host:port", w.NCCLCommID)
		}
	}
	addr, port := getenv("MASTER_ADDR"), getenv("MASTER_PORT")
	if addr == "" || port == "" {
		if w.WorldSize > 1 && w.NCCLCommID == "" {
			hint := ""
			if w.Launcher == "slurm" {
				hint = " (srun sets neither: export them in the job script, e.g. MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) and a free MASTER_PORT)"
			}
			return w, fmt.Errorf("dist: %s needs MASTER_ADDR and MASTER_PORT for the rendezvous, or NCCL_COMM_ID%s", w, hint)
		}
		return w, nil
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return w, fmt.Errorf("dist: MASTER_PORT=%q is not a port", port)
	}
	w.Store = net.JoinHostPort(addr, port)
	return w, nil
}
