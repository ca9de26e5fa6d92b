package socktest

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/dist"
)

// openAll opens n ranks' communicators over sockets, each as its own process would (its
// World, rank 0 serving the rendezvous store), and returns them with their closers.
func openAll(t *testing.T, n int, timeout time.Duration) ([]dist.Comm, []func()) {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	comms, closers, errs := make([]dist.Comm, n), make([]func(), n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			w := dist.World{Rank: r, WorldSize: n, LocalRank: r, Launcher: "torchrun", Store: "127.0.0.1:" + port}
			comms[r], closers[r], errs[r] = Open(ctx, w, timeout)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms, closers
}

// onRanks runs f on every rank at once.
func onRanks(comms []dist.Comm, f func(c dist.Comm) error) []error {
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

// TestSocketCollectives: on 1 to 3 ranks over sockets every collective gives the in-process
// communicator's bits on every rank.
func TestSocketCollectives(t *testing.T) {
	for n := 1; n <= 3; n++ {
		socks, closers := openAll(t, n, 10*time.Second)
		local := dist.NewLocal(n, 10*time.Second)
		run := func(comms []dist.Comm) [][]float32 {
			out := make([][]float32, n)
			errs := onRanks(comms, func(c dist.Comm) error {
				r := rand.New(rand.NewPCG(uint64(c.Rank()), 9))
				x := make([]float32, 10*n)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				ctx := context.Background()
				var res []float32
				a := append([]float32(nil), x...)
				if err := c.AllReduce(ctx, a, dist.Sum); err != nil {
					return err
				}
				res = append(res, a...)
				m := append([]float32(nil), x...)
				if err := c.AllReduce(ctx, m, dist.Max); err != nil {
					return err
				}
				res = append(res, m...)
				d := []float64{float64(x[0]), float64(c.Rank())}
				if err := c.AllReduce64(ctx, d, dist.Sum); err != nil {
					return err
				}
				res = append(res, float32(d[0]), float32(d[1]))
				b := append([]float32(nil), x...)
				if err := c.Broadcast(ctx, b, n-1); err != nil {
					return err
				}
				res = append(res, b...)
				g := make([]float32, len(x)*n)
				if err := c.AllGather(ctx, x, g); err != nil {
					return err
				}
				res = append(res, g...)
				s := make([]float32, 10)
				if err := c.ReduceScatter(ctx, x, s, dist.Sum); err != nil {
					return err
				}
				out[c.Rank()] = append(res, s...)
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("%d ranks: rank %d: %v", n, r, err)
				}
			}
			return out
		}
		got, want := run(socks), run(local)
		for r := range n {
			for i := range want[r] {
				if math.Float32bits(got[r][i]) != math.Float32bits(want[r][i]) {
					t.Fatalf("%d ranks: rank %d element %d: %v over sockets, %v in process", n, r, i, got[r][i], want[r][i])
				}
			}
		}
		for _, c := range closers {
			c()
		}
	}
}

// TestSocketFailures: a rank that aborts fails the others' calls with its cause; a rank whose
// process goes (its connection closed) fails them naming it; a rank that never calls is
// named after the timeout.
func TestSocketFailures(t *testing.T) {
	t.Run("abort", func(t *testing.T) {
		comms, closers := openAll(t, 3, 10*time.Second)
		defer func() {
			for _, c := range closers {
				c()
			}
		}()
		errs := onRanks(comms, func(c dist.Comm) error {
			if c.Rank() == 2 {
				c.Abort(errTest("rank 2's task plugin died"))
				return nil
			}
			return c.AllReduce(context.Background(), []float32{1}, dist.Sum)
		})
		for r := range 2 {
			if errs[r] == nil || !strings.Contains(errs[r].Error(), "task plugin died") {
				t.Errorf("rank %d: %v; want the abort's cause", r, errs[r])
			}
		}
	})
	t.Run("gone", func(t *testing.T) {
		comms, closers := openAll(t, 2, 10*time.Second)
		defer closers[0]()
		closers[1]() // rank 1's process ends
		err := comms[0].AllReduce(context.Background(), []float32{1}, dist.Sum)
		if err == nil || !strings.Contains(err.Error(), "rank 1 left the job") {
			t.Errorf("rank 0: %v; want rank 1 named", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		comms, closers := openAll(t, 2, 300*time.Millisecond)
		defer func() {
			for _, c := range closers {
				c()
			}
		}()
		err := comms[1].AllReduce(context.Background(), []float32{1}, dist.Sum)
		if err == nil || !strings.Contains(err.Error(), "rank(s) 0 never reached it") {
			t.Errorf("rank 1: %v; want rank 0 named", err)
		}
	})
}

type errTest string

func (e errTest) Error() string { return string(e) }
