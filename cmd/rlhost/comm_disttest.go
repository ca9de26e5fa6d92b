//go:build disttest

package main

import (
	"context"
	"time"

	"github.com/rlhost/rlhost/host/dist"
	"github.com/rlhost/rlhost/host/dist/socktest"
)

const commAvailable = true

// openComm is, in a binary built for the tests of several ranks (tag disttest), the job's
// communicator over local sockets (host/dist/socktest): never a product path.
func openComm(ctx context.Context, w dist.World, timeout time.Duration) (dist.Comm, func(), error) {
	return socktest.Open(ctx, w, timeout)
}
