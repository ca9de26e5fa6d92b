package dist

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Op is a collective's reduction.
type Op int

const (
	Sum Op = iota
	Max
	Min
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Comm is one rank's communicator, with NCCL's semantics: every rank of the group calls
// the same collectives in the same order with the same sizes, each call returns when its
// result is in place on this rank, and every rank gets the same bits. A collective that
// not every rank reaches within the communicator's timeout, a rank whose call does not
// match the others', or an Abort fails the call on every rank with an error naming the
// ranks and the cause, and every later call with the same error: a job stops instead of
// hanging (NCCL's ncclCommAbort, after which a communicator is unusable).
type Comm interface {
	Rank() int
	Size() int
	// AllReduce reduces buf elementwise across the ranks, in place.
	AllReduce(ctx context.Context, buf []float32, op Op) error
	// AllReduce64 is AllReduce on float64 (counts, sums of squares, metrics).
	AllReduce64(ctx context.Context, buf []float64, op Op) error
	// Broadcast copies root's buf to every rank's buf.
	Broadcast(ctx context.Context, buf []float32, root int) error
	// AllGather writes each rank's send, in rank order, into recv (Size()*len(send)).
	// send may be this rank's chunk of recv (in place, as NCCL allows).
	AllGather(ctx context.Context, send, recv []float32) error
	// ReduceScatter reduces send (Size()*len(recv)) elementwise across the ranks and
	// writes this rank's chunk of the result, chunk Rank(), into recv, which may be that
	// chunk of send (in place, as NCCL allows).
	ReduceScatter(ctx context.Context, send, recv []float32, op Op) error
	// Abort fails every pending and later collective of every rank with cause.
	Abort(cause error)
}

// ErrAborted is wrapped by the error of a collective on an aborted communicator.
var ErrAborted = errors.New("dist: communicator aborted")

// NewLocal makes a group of n communicators of one process, one per rank (goroutine):
// the in-process simulation of a job of n ranks, each driving its own device, that the
// tests prove data parallelism with. Reductions add the ranks' values in rank order, in
// the buffers' precision (NCCL's ring adds them in another fixed order: the same on every
// rank, as here). timeout bounds how long a rank waits for the others in a collective.
func NewLocal(n int, timeout time.Duration) []Comm {
	g := &localGroup{n: n, timeout: timeout, slots: map[uint64]*localCall{}}
	cs := make([]Comm, n)
	for r := range cs {
		cs[r] = &localComm{g: g, rank: r}
	}
	return cs
}

type localGroup struct {
	n       int
	timeout time.Duration

	mu      sync.Mutex
	slots   map[uint64]*localCall // by sequence number
	aborted error
	abortc  chan struct{} // closed by abort
	once    sync.Once
}

// localCall is one collective: what each rank brought, and its result once the last
// rank has arrived.
type localCall struct {
	kind    string
	first   int // the first rank to arrive: the others' calls must match its
	arrived []bool
	args    []localArgs
	n       int // ranks arrived
	done    chan struct{}
	err     error
	left    int // ranks that have not yet taken the result
}

type localArgs struct {
	f32   []float32
	f64   []float64
	out   []float32
	op    Op
	root  int
	shape string
}

type localComm struct {
	g    *localGroup
	rank int
	seq  uint64
}

func (c *localComm) Rank() int { return c.rank }
func (c *localComm) Size() int { return c.g.n }

func (g *localGroup) abortChan() chan struct{} {
	g.once.Do(func() { g.abortc = make(chan struct{}) })
	return g.abortc
}

func (c *localComm) Abort(cause error) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aborted == nil {
		g.aborted = fmt.Errorf("%w by rank %d: %w", ErrAborted, c.rank, cause)
		close(g.abortChan())
	}
}

// call runs one collective: rank c brings a, the last rank to arrive computes the
// result (finish) for all, and every rank returns it or the group's error.
func (c *localComm) call(ctx context.Context, kind string, a localArgs, finish func(args []localArgs) error) error {
	g := c.g
	g.mu.Lock()
	if g.aborted != nil {
		g.mu.Unlock()
		return g.aborted
	}
	seq := c.seq
	c.seq++
	lc := g.slots[seq]
	if lc == nil {
		lc = &localCall{kind: kind, first: c.rank, arrived: make([]bool, g.n), args: make([]localArgs, g.n),
			done: make(chan struct{}), left: g.n}
		g.slots[seq] = lc
	} else if f := lc.args[lc.first]; (lc.kind != kind || f.shape != a.shape) && lc.err == nil {
		lc.err = fmt.Errorf("dist: collective %d: rank %d called %s(%s), rank %d %s(%s)", seq, c.rank, kind, a.shape,
			lc.first, lc.kind, f.shape)
	}
	lc.arrived[c.rank] = true
	lc.args[c.rank] = a
	lc.n++
	if lc.n == g.n {
		if lc.err == nil {
			lc.err = finish(lc.args)
		}
		close(lc.done)
	}
	abortc := g.abortChan()
	g.mu.Unlock()

	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	var err error
	select {
	case <-lc.done:
		err = lc.err
	case <-abortc:
	case <-timer.C:
		err = c.timeoutErr(seq, lc)
	case <-ctx.Done():
		err = fmt.Errorf("dist: rank %d, collective %d (%s): %w", c.rank, seq, kind, ctx.Err())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aborted != nil {
		return g.aborted
	}
	if err != nil {
		// a failed collective leaves the group unusable, as NCCL's would
		g.aborted = err
		close(g.abortChan())
		return err
	}
	if lc.left--; lc.left == 0 {
		delete(g.slots, seq)
	}
	return nil
}

func (c *localComm) timeoutErr(seq uint64, lc *localCall) error {
	c.g.mu.Lock()
	var missing []string
	for r, ok := range lc.arrived {
		if !ok {
			missing = append(missing, fmt.Sprint(r))
		}
	}
	c.g.mu.Unlock()
	return fmt.Errorf("dist: collective %d (%s) timed out after %v on rank %d: rank(s) %s never reached it",
		seq, lc.kind, c.g.timeout, c.rank, strings.Join(missing, ", "))
}

func reduce32(dst []float32, srcs [][]float32, op Op) {
	copy(dst, srcs[0])
	for _, s := range srcs[1:] {
		for i, v := range s {
			switch op {
			case Sum:
				dst[i] += v
			case Max:
				dst[i] = max(dst[i], v)
			case Min:
				dst[i] = min(dst[i], v)
			}
		}
	}
}

func (c *localComm) AllReduce(ctx context.Context, buf []float32, op Op) error {
	return c.call(ctx, "AllReduce", localArgs{f32: buf, op: op, shape: fmt.Sprintf("%d floats, %v", len(buf), op)},
		func(args []localArgs) error {
			srcs := make([][]float32, len(args))
			for r, a := range args {
				srcs[r] = slices.Clone(a.f32)
			}
			for _, a := range args {
				reduce32(a.f32, srcs, op)
			}
			return nil
		})
}

func (c *localComm) AllReduce64(ctx context.Context, buf []float64, op Op) error {
	return c.call(ctx, "AllReduce64", localArgs{f64: buf, op: op, shape: fmt.Sprintf("%d float64s, %v", len(buf), op)},
		func(args []localArgs) error {
			out := slices.Clone(args[0].f64)
			for _, a := range args[1:] {
				for i, v := range a.f64 {
					switch op {
					case Sum:
						out[i] += v
					case Max:
						out[i] = math.Max(out[i], v)
					case Min:
						out[i] = math.Min(out[i], v)
					}
				}
			}
			for _, a := range args {
				copy(a.f64, out)
			}
			return nil
		})
}

func (c *localComm) Broadcast(ctx context.Context, buf []float32, root int) error {
	if root < 0 || root >= c.g.n {
		return fmt.Errorf("dist: Broadcast from rank %d of %d", root, c.g.n)
	}
	return c.call(ctx, "Broadcast", localArgs{f32: buf, root: root, shape: fmt.Sprintf("%d floats from rank %d", len(buf), root)},
		func(args []localArgs) error {
			for r, a := range args {
				if r != root {
					copy(a.f32, args[root].f32)
				}
			}
			return nil
		})
}

func (c *localComm) AllGather(ctx context.Context, send, recv []float32) error {
	if len(recv) != c.g.n*len(send) {
		return fmt.Errorf("dist: AllGather on rank %d: recv holds %d floats, want %d x %d", c.rank, len(recv), c.g.n, len(send))
	}
	return c.call(ctx, "AllGather", localArgs{f32: send, out: recv, shape: fmt.Sprintf("%d floats a rank", len(send))},
		func(args []localArgs) error {
			for _, a := range args {
				for r, b := range args {
					copy(a.out[r*len(b.f32):], b.f32)
				}
			}
			return nil
		})
}

func (c *localComm) ReduceScatter(ctx context.Context, send, recv []float32, op Op) error {
	if len(send) != c.g.n*len(recv) {
		return fmt.Errorf("dist: ReduceScatter on rank %d: send holds %d floats, want %d x %d", c.rank, len(send), c.g.n, len(recv))
	}
	return c.call(ctx, "ReduceScatter", localArgs{f32: send, out: recv, op: op, shape: fmt.Sprintf("%d floats a rank, %v", len(recv), op)},
		func(args []localArgs) error {
			// every result first, then the writes: a rank's recv may be its chunk of its
			// send (NCCL's in-place reduce-scatter), which the other ranks' results read
			k := len(args[0].out)
			res := make([][]float32, len(args))
			for r := range args {
				srcs := make([][]float32, len(args))
				for q, b := range args {
					srcs[q] = b.f32[r*k : (r+1)*k]
				}
				res[r] = make([]float32, k)
				reduce32(res[r], srcs, op)
			}
			for r, a := range args {
				copy(a.out, res[r])
			}
			return nil
		})
}
