package dist

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// The rendezvous store speaks PyTorch's c10d TCPStore protocol (torch/csrc/distributed/c10d/
// TCPStoreBackend.hpp): a query byte, then its arguments in the host's byte order (x86-64 and
// arm64: little-endian), strings and values as a uint64 length and their bytes. torchrun's
// agent serves such a store at MASTER_ADDR:MASTER_PORT for its workers; with Slurm rank 0
// serves one itself (Serve). Only the queries the rendezvous needs are spoken.
const (
	queryValidate = 0
	querySet      = 1
	queryGet      = 3
	queryCheck    = 5
	queryPing     = 13

	storeMagic = 0x3C85F7CE // the validation number a client sends first
	checkReady = 0
)

var le = binary.LittleEndian

// Store is a client of a rendezvous store.
type Store struct {
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
}

// Dial connects to the store at addr, retrying until ctx ends (the server may start after
// the client), and checks that it answers as a TCPStore.
func Dial(ctx context.Context, addr string) (*Store, error) {
	var last error
	for {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			s := &Store{conn: conn, r: bufio.NewReader(conn)}
			if err = s.handshake(ctx); err == nil {
				return s, nil
			}
			conn.Close()
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dist: rendezvous store %s: %w (last: %v)", addr, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Store) handshake(ctx context.Context) error {
	s.deadline(ctx)
	b := []byte{queryValidate}
	b = le.AppendUint32(b, storeMagic)
	nonce := uint32(os.Getpid())
	b = append(b, queryPing)
	b = le.AppendUint32(b, nonce)
	if _, err := s.conn.Write(b); err != nil {
		return err
	}
	var got [4]byte
	if _, err := io.ReadFull(s.r, got[:]); err != nil {
		return fmt.Errorf("no answer to ping: %w", err)
	}
	if le.Uint32(got[:]) != nonce {
		return fmt.Errorf("ping answered %d, sent %d: not a TCPStore", le.Uint32(got[:]), nonce)
	}
	return nil
}

func (s *Store) deadline(ctx context.Context) {
	if d, ok := ctx.Deadline(); ok {
		s.conn.SetDeadline(d)
	} else {
		s.conn.SetDeadline(time.Time{})
	}
}

func appendBytes(b, v []byte) []byte { return append(le.AppendUint64(b, uint64(len(v))), v...) }

// Set stores value under key.
func (s *Store) Set(ctx context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadline(ctx)
	b := appendBytes([]byte{querySet}, []byte(key))
	_, err := s.conn.Write(appendBytes(b, value))
	return err
}

// Get waits until key is set (polling, as PyTorch's clients do) and returns its value; ctx
// bounds the wait.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	for {
		ready, err := s.check(ctx, key)
		if err != nil {
			return nil, err
		}
		if ready {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dist: waiting for %q in the rendezvous store: %w", key, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadline(ctx)
	if _, err := s.conn.Write(appendBytes([]byte{queryGet}, []byte(key))); err != nil {
		return nil, err
	}
	return readBytes(s.r, 1<<20)
}

func (s *Store) check(ctx context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadline(ctx)
	b := le.AppendUint64([]byte{queryCheck}, 1)
	if _, err := s.conn.Write(appendBytes(b, []byte(key))); err != nil {
		return false, err
	}
	r, err := s.r.ReadByte()
	return r == checkReady, err
}

// Close closes the connection.
func (s *Store) Close() error { return s.conn.Close() }

func readBytes(r *bufio.Reader, limit uint64) ([]byte, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := le.Uint64(n[:])
	if size > limit {
		return nil, fmt.Errorf("dist: a store value of %d bytes (at most %d)", size, limit)
	}
	v := make([]byte, size)
	_, err := io.ReadFull(r, v)
	return v, err
}

// Server is a rendezvous store served by this process (rank 0 without torchrun's agent).
type Server struct {
	ln   net.Listener
	mu   sync.Mutex
	data map[string][]byte
	wg   sync.WaitGroup
}

// Serve listens at addr (host:port; port 0 picks one) and serves the store until Close.
func Serve(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dist: serving the rendezvous store at %s: %w", addr, err)
	}
	s := &Server{ln: ln, data: map[string][]byte{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(conn)
			}()
		}
	}()
	return s, nil
}

// Addr is where the server listens.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server (open connections end with their clients).
func (s *Server) Close() error { return s.ln.Close() }

// serve answers one client's queries until it hangs up or sends one the store does not know.
func (s *Server) serve(conn net.Conn) {
	defer conn.Close()
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	var u4 [4]byte
	for {
		q, err := r.ReadByte()
		if err != nil {
			return
		}
		switch q {
		case queryValidate:
			if _, err := io.ReadFull(r, u4[:]); err != nil || le.Uint32(u4[:]) != storeMagic {
				return
			}
		case queryPing:
			if _, err := io.ReadFull(r, u4[:]); err != nil {
				return
			}
			w.Write(u4[:])
		case querySet:
			key, err1 := readBytes(r, 1<<16)
			val, err2 := readBytes(r, 1<<20)
			if err := errors.Join(err1, err2); err != nil {
				return
			}
			s.mu.Lock()
			s.data[string(key)] = val
			s.mu.Unlock()
		case queryGet:
			key, err := readBytes(r, 1<<16)
			if err != nil {
				return
			}
			s.mu.Lock()
			val, ok := s.data[string(key)]
			s.mu.Unlock()
			if !ok {
				return // clients check before they get
			}
			w.Write(appendBytes(nil, val))
		case queryCheck:
			var n [8]byte
			if _, err := io.ReadFull(r, n[:]); err != nil || le.Uint64(n[:]) > 1<<10 {
				return
			}
			ready := byte(checkReady)
			for range le.Uint64(n[:]) {
				key, err := readBytes(r, 1<<16)
				if err != nil {
					return
				}
				s.mu.Lock()
				if _, ok := s.data[string(key)]; !ok {
					ready = 1
				}
				s.mu.Unlock()
			}
			w.WriteByte(ready)
		default:
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}
