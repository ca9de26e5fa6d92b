//go:build !disttest

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rlhost/rlhost/host/dist"
)

// commAvailable says whether openComm can connect the ranks of a job.
const commAvailable = false

// openComm is the communicator of a job of several ranks. None yet: NCCL's collectives are
// not bound (docs/distributed.md). Tests build rlhost with the tag disttest to run such a
// job over local sockets (comm_disttest.go).
func openComm(_ context.Context, w dist.World, _ time.Duration) (dist.Comm, func(), error) {
	return nil, nil, fmt.Errorf("started as %s: rlhost trains one rank per run until NCCL's collectives are bound "+
		"(docs/distributed.md); start one process (torchrun --nproc-per-node 1)", w)
}
