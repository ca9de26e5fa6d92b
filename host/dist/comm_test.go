package dist

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// onRanks runs f on every rank of comms at once and returns each rank's error.
func onRanks(comms []Comm, f func(c Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(c)
		}()
	}
	wg.Wait()
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func randVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestLocalCollectives: each collective of the in-process communicator gives every rank
// what NCCL's definition says, reductions added in rank order in float32 (the same bits
// on every rank), over groups of 1 to 4 ranks; reduce-scatter and all-gather in place too.
func TestLocalCollectives(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(n), 1))
			const k = 37
			in := make([][]float32, n)
			for i := range in {
				in[i] = randVec(r, n*k)
			}
			want := map[Op][]float32{}
			for _, op := range []Op{Sum, Max, Min} {
				w := slices.Clone(in[0])
				for _, x := range in[1:] {
					for i, v := range x {
						switch op {
						case Sum:
							w[i] += v
						case Max:
							w[i] = max(w[i], v)
						case Min:
							w[i] = min(w[i], v)
						}
					}
				}
				want[op] = w
			}
			comms := NewLocal(n, 10*time.Second)
			got := make([]map[string][]float32, n)
			noErrors(t, onRanks(comms, func(c Comm) error {
				me := c.Rank()
				g := map[string][]float32{}
				got[me] = g
				for _, op := range []Op{Sum, Max, Min} {
					buf := slices.Clone(in[me])
					if err := c.AllReduce(ctx, buf, op); err != nil {
						return err
					}
					g["allreduce "+op.String()] = buf
					rs := make([]float32, k)
					if err := c.ReduceScatter(ctx, slices.Clone(in[me]), rs, op); err != nil {
						return err
					}
					g["reducescatter "+op.String()] = rs
					// in place: recv is this rank's chunk of send (ZeRO-1's exchange)
					ip := slices.Clone(in[me])
					if err := c.ReduceScatter(ctx, ip, ip[me*k:(me+1)*k], op); err != nil {
						return err
					}
					g["reducescatter in place "+op.String()] = ip[me*k : (me+1)*k]
				}
				b := slices.Clone(in[me])
				if err := c.Broadcast(ctx, b, n-1); err != nil {
					return err
				}
				g["broadcast"] = b
				all := make([]float32, n*k)
				if err := c.AllGather(ctx, in[me][:k], all); err != nil {
					return err
				}
				g["allgather"] = all
				ip := make([]float32, n*k) // in place: send is this rank's chunk of recv
				copy(ip[me*k:], in[me][:k])
				if err := c.AllGather(ctx, ip[me*k:(me+1)*k], ip); err != nil {
					return err
				}
				g["allgather in place"] = ip
				d := []float64{float64(me), 1, -float64(me)}
				if err := c.AllReduce64(ctx, d, Sum); err != nil {
					return err
				}
				g["allreduce64"] = []float32{float32(d[0]), float32(d[1]), float32(d[2])}
				return nil
			}))
			var gathered []float32
			for _, x := range in {
				gathered = append(gathered, x[:k]...)
			}
			for me := range n {
				check := func(what string, got, want []float32) {
					t.Helper()
					if !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
						t.Errorf("rank %d %s: %v, want %v", me, what, got[:min(4, len(got))], want[:min(4, len(want))])
					}
				}
				for _, op := range []Op{Sum, Max, Min} {
					check("allreduce "+op.String(), got[me]["allreduce "+op.String()], want[op])
					check("reducescatter "+op.String(), got[me]["reducescatter "+op.String()], want[op][me*k:(me+1)*k])
					check("reducescatter in place "+op.String(), got[me]["reducescatter in place "+op.String()], want[op][me*k:(me+1)*k])
				}
				check("broadcast", got[me]["broadcast"], in[n-1])
				check("allgather", got[me]["allgather"], gathered)
				check("allgather in place", got[me]["allgather in place"], gathered)
				s := float32(n * (n - 1) / 2)
				check("allreduce64", got[me]["allreduce64"], []float32{s, float32(n), -s})
			}
		})
	}
}

// TestLocalMissingRankTimesOut: a rank that never reaches a collective makes the others
// fail within the timeout with an error naming it, and every later call of every rank
// fails with that error at once: no rank waits forever.
func TestLocalMissingRankTimesOut(t *testing.T) {
	ctx := context.Background()
	comms := NewLocal(3, 200*time.Millisecond)
	start := time.Now()
	errs := onRanks(comms[:2], func(c Comm) error { return c.AllReduce(ctx, make([]float32, 8), Sum) })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the ranks waited %v", took)
	}
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank(s) 2 never reached it") || !strings.Contains(err.Error(), "timed out") {
			t.Errorf("rank %d: %v; want the timeout naming rank 2", r, err)
		}
	}
	for r, c := range comms {
		if err := c.Broadcast(ctx, make([]float32, 8), 0); err == nil || !strings.Contains(err.Error(), "rank(s) 2") {
			t.Errorf("rank %d: a later call gave %v; want the first failure", r, err)
		}
	}
}

// TestLocalMismatchedCalls: ranks calling different collectives, or the same one with
// different sizes, get an error naming both calls (NCCL would hang or corrupt memory).
func TestLocalMismatchedCalls(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func(c Comm) error
		want string
	}{
		{"size", func(c Comm) error { return c.AllReduce(ctx, make([]float32, 8+c.Rank()), Sum) }, "floats"},
		{"op", func(c Comm) error { return c.AllReduce(ctx, make([]float32, 8), Op(c.Rank())) }, "max"},
		{"kind", func(c Comm) error {
			if c.Rank() == 0 {
				return c.Broadcast(ctx, make([]float32, 8), 0)
			}
			return c.AllReduce(ctx, make([]float32, 8), Sum)
		}, "Broadcast"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := onRanks(NewLocal(2, 5*time.Second), tc.call)
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rank 0") || !strings.Contains(err.Error(), "rank 1") {
					t.Errorf("rank %d: %v; want the mismatch of ranks 0 and 1", r, err)
				}
			}
		})
	}
}

// TestLocalAbort: a rank that aborts (its task plugin died, say) fails the collective the
// others wait in at once, with its cause, long before the timeout.
func TestLocalAbort(t *testing.T) {
	ctx := context.Background()
	comms := NewLocal(3, time.Minute)
	cause := errors.New("the task plugin exited")
	start := time.Now()
	errs := onRanks(comms, func(c Comm) error {
		if c.Rank() == 2 {
			time.Sleep(50 * time.Millisecond)
			c.Abort(cause)
			return nil
		}
		return c.AllReduce(ctx, make([]float32, 4), Sum)
	})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the ranks waited %v", took)
	}
	for r, err := range errs[:2] {
		if !errors.Is(err, ErrAborted) || !errors.Is(err, cause) || !strings.Contains(err.Error(), "rank 2") {
			t.Errorf("rank %d: %v; want the abort by rank 2 with its cause", r, err)
		}
	}
}
