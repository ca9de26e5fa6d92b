// Package socktest is a communicator between processes over local sockets, for tests only:
// it lets the tests start several `rlhost train` processes the way torchrun or srun would and
// run them as one data-parallel job on the CPU, where NCCL cannot run. The product links it
// only in a binary built with the tag disttest (cmd/rlhost/comm_disttest.go).
//
// Rank 0 listens on a port of 127.0.0.1 and hands its address to the other ranks through the
// job's rendezvous store (dist.Share); each of them dials it. Every collective goes to rank 0,
// which runs it on an in-process group (dist.NewLocal) for the rank that asked, so a job over
// sockets has the in-process communicator's semantics: the ranks' values reduced in rank
// order, a rank missing from a collective named after the timeout, mismatched calls and
// aborts failing every rank. A rank whose connection breaks (its process died) aborts the
// group, naming it.
package socktest

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/rlhost/rlhost/host/dist"
)

// request is one call of a rank's communicator, sent to rank 0.
type request struct {
	Kind  string // the method
	Buf   []float32
	Buf64 []float64
	Op    dist.Op
	Root  int
	N     int // the length of the result (AllGather, ReduceScatter)
	Cause string
}

// response is its result.
type response struct {
	Buf     []float32
	Buf64   []float64
	Err     string
	Aborted bool
}

// Open makes rank w.Rank's communicator of the job w. timeout bounds a collective's wait for
// the other ranks (actor_rollout_ref.nccl_timeout). close ends it.
func Open(ctx context.Context, w dist.World, timeout time.Duration) (c dist.Comm, close func(), err error) {
	if w.Single() {
		return dist.NewLocal(1, timeout)[0], func() {}, nil
	}
	if w.Rank == 0 {
		return serve(ctx, w, timeout)
	}
	addr, err := dist.Share(ctx, w, "socktest/addr", nil)
	if err != nil {
		return nil, nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", string(addr))
	if err != nil {
		return nil, nil, fmt.Errorf("socktest: rank %d dialing rank 0 at %s: %w", w.Rank, addr, err)
	}
	p := &proxy{rank: w.Rank, size: w.WorldSize, conn: conn, enc: gob.NewEncoder(conn), dec: gob.NewDecoder(conn)}
	if err := p.enc.Encode(w.Rank); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("socktest: rank %d: %w", w.Rank, err)
	}
	return p, func() { conn.Close() }, nil
}

// serve is rank 0's side: the group, the listener, a goroutine per other rank.
func serve(ctx context.Context, w dist.World, timeout time.Duration) (dist.Comm, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("socktest: %w", err)
	}
	group := dist.NewLocal(w.WorldSize, timeout)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				dec, enc := gob.NewDecoder(conn), gob.NewEncoder(conn)
				var rank int
				if err := dec.Decode(&rank); err != nil || rank <= 0 || rank >= w.WorldSize {
					return
				}
				answer(group[rank], rank, dec, enc)
			}()
		}
	}()
	stop := func() {
		ln.Close()
		for _, c := range group {
			c.Abort(errors.New("rank 0 closed the job's communicator"))
		}
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
	if _, err := dist.Share(ctx, w, "socktest/addr", func() ([]byte, error) { return []byte(ln.Addr().String()), nil }); err != nil {
		stop()
		return nil, nil, err
	}
	return group[0], stop, nil
}

// answer runs rank's calls on its member c of the group until the connection ends; a
// connection that breaks aborts the group.
func answer(c dist.Comm, rank int, dec *gob.Decoder, enc *gob.Encoder) {
	ctx := context.Background() // the group's timeout bounds every call
	for {
		var q request
		if err := dec.Decode(&q); err != nil {
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("socktest: rank %d's connection broke: %w", rank, err)
			} else {
				err = fmt.Errorf("socktest: rank %d left the job", rank)
			}
			c.Abort(err)
			return
		}
		var r response
		var err error
		switch q.Kind {
		case "AllReduce":
			err = c.AllReduce(ctx, q.Buf, q.Op)
			r.Buf = q.Buf
		case "AllReduce64":
			err = c.AllReduce64(ctx, q.Buf64, q.Op)
			r.Buf64 = q.Buf64
		case "Broadcast":
			err = c.Broadcast(ctx, q.Buf, q.Root)
			r.Buf = q.Buf
		case "AllGather":
			r.Buf = make([]float32, q.N)
			err = c.AllGather(ctx, q.Buf, r.Buf)
		case "ReduceScatter":
			r.Buf = make([]float32, q.N)
			err = c.ReduceScatter(ctx, q.Buf, r.Buf, q.Op)
		case "Abort":
			c.Abort(errors.New(q.Cause))
		default:
			err = fmt.Errorf("socktest: rank %d sent %q", rank, q.Kind)
		}
		if err != nil {
			r.Err, r.Aborted = err.Error(), errors.Is(err, dist.ErrAborted)
		}
		if err := enc.Encode(r); err != nil {
			c.Abort(fmt.Errorf("socktest: answering rank %d: %w", rank, err))
			return
		}
	}
}

// proxy is a rank's communicator other than rank 0's: each call a round trip to rank 0.
type proxy struct {
	rank, size int
	mu         sync.Mutex
	conn       net.Conn
	enc        *gob.Encoder
	dec        *gob.Decoder
}

func (p *proxy) Rank() int { return p.rank }
func (p *proxy) Size() int { return p.size }

func (p *proxy) call(q request) (response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var r response
	if err := p.enc.Encode(q); err != nil {
		return r, fmt.Errorf("socktest: rank %d's %s: %w", p.rank, q.Kind, err)
	}
	if err := p.dec.Decode(&r); err != nil {
		return r, fmt.Errorf("socktest: rank %d's %s: rank 0 is gone: %w", p.rank, q.Kind, err)
	}
	if r.Err != "" {
		if r.Aborted {
			return r, fmt.Errorf("%w: %s", dist.ErrAborted, r.Err)
		}
		return r, errors.New(r.Err)
	}
	return r, nil
}

func (p *proxy) AllReduce(_ context.Context, buf []float32, op dist.Op) error {
	r, err := p.call(request{Kind: "AllReduce", Buf: buf, Op: op})
	copy(buf, r.Buf)
	return err
}

func (p *proxy) AllReduce64(_ context.Context, buf []float64, op dist.Op) error {
	r, err := p.call(request{Kind: "AllReduce64", Buf64: buf, Op: op})
	copy(buf, r.Buf64)
	return err
}

func (p *proxy) Broadcast(_ context.Context, buf []float32, root int) error {
	r, err := p.call(request{Kind: "Broadcast", Buf: buf, Root: root})
	copy(buf, r.Buf)
	return err
}

func (p *proxy) AllGather(_ context.Context, send, recv []float32) error {
	r, err := p.call(request{Kind: "AllGather", Buf: send, N: len(recv)})
	copy(recv, r.Buf)
	return err
}

func (p *proxy) ReduceScatter(_ context.Context, send, recv []float32, op dist.Op) error {
	r, err := p.call(request{Kind: "ReduceScatter", Buf: send, N: len(recv), Op: op})
	copy(recv, r.Buf)
	return err
}

func (p *proxy) Abort(cause error) {
	p.call(request{Kind: "Abort", Cause: cause.Error()}) //nolint:errcheck // the group is aborted either way
}

// FreePort is a port of 127.0.0.1 free a moment ago: a MASTER_PORT for a test's job.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, p, err := net.SplitHostPort(l.Addr().String())
	return p, err
}
