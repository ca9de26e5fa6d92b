package dist

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestAllGatherBytes: on 1 to 4 ranks every rank gets every rank's bytes, in rank order,
// whatever their lengths (none, fewer than a word, not a multiple of three, every byte
// value), each call's longest setting the size.
func TestAllGatherBytes(t *testing.T) {
	for n := 1; n <= 4; n++ {
		comms := NewLocal(n, 5*time.Second)
		mine := func(r, call int) []byte {
			b := make([]byte, (r*7+call*5)%11)
			for i := range b {
				b[i] = byte(255 - (r*31+i*17+call)%256)
			}
			return b
		}
		var mu sync.Mutex
		got := map[int][][][]byte{}
		noErrors(t, onRanks(comms, func(c Comm) error {
			for call := range 3 {
				out, err := AllGatherBytes(context.Background(), c, mine(c.Rank(), call))
				if err != nil {
					return err
				}
				mu.Lock()
				got[c.Rank()] = append(got[c.Rank()], out)
				mu.Unlock()
			}
			return nil
		}))
		for r := range n {
			for call, out := range got[r] {
				if len(out) != n {
					t.Fatalf("%d ranks: rank %d call %d: %d parts", n, r, call, len(out))
				}
				for q := range n {
					if !bytes.Equal(out[q], mine(q, call)) {
						t.Errorf("%d ranks: rank %d call %d: rank %d's bytes %v, want %v", n, r, call, q, out[q], mine(q, call))
					}
				}
			}
		}
	}
}

// TestAllGatherBytesAborted: a gather on an aborted communicator fails on every rank with
// the cause.
func TestAllGatherBytesAborted(t *testing.T) {
	comms := NewLocal(2, 5*time.Second)
	comms[1].Abort(fmt.Errorf("rank 1's task plugin died"))
	for _, err := range onRanks(comms, func(c Comm) error {
		_, err := AllGatherBytes(context.Background(), c, []byte("x"))
		return err
	}) {
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("task plugin died")) {
			t.Errorf("got %v, want the abort's cause", err)
		}
	}
}
