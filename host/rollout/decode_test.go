package rollout

import (
	"sync"
	"testing"
	"time"
)

// parallelFor runs every index once, with workers of them at once: a
// barrier that only workers concurrent calls pass (a serial loop would
// never pass it).
func TestParallelFor(t *testing.T) {
	const n, workers = 64, 4
	var mu sync.Mutex
	seen := make([]int, n)
	arrived, release := 0, make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		parallelFor(n, workers, func(i int) {
			mu.Lock()
			seen[i]++
			arrived++
			if arrived == workers {
				close(release)
			}
			mu.Unlock()
			<-release
		})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a deadlock guard, not a timing: serial calls never pass the barrier
		t.Fatalf("parallelFor(%d, %d) did not run %d calls at once", n, workers, workers)
	}
	for i, c := range seen {
		if c != 1 {
			t.Errorf("index %d ran %d times", i, c)
		}
	}
	parallelFor(0, workers, func(int) { t.Error("a call for n = 0") })
	calls := 0
	parallelFor(3, 0, func(int) { calls++ }) // no workers: one, in the caller
	if calls != 3 {
		t.Errorf("%d calls with workers 0, want 3", calls)
	}
}

// ResponseTexts is each response decoded without special tokens.
func TestResponseTexts(t *testing.T) {
	tk := smolTokenizer(t)
	var outs []*Output
	for i := range 40 {
		ids := tk.Encode("The answer is ", false)
		ids = append(ids, tk.EOS())
		ids = append(ids, tk.Encode(string(rune('a'+i%26))+" and more text", false)...)
		outs = append(outs, &Output{ResponseIDs: ids})
	}
	got := ResponseTexts(tk, outs)
	for i, o := range outs {
		if want := tk.Decode(o.ResponseIDs, true); got[i] != want {
			t.Errorf("response %d: %q, want %q", i, got[i], want)
		}
	}
}
