package cpu

import (
	"sync"
	"testing"
	"time"
)

// The pool runs every part of every job exactly once: jobs back to back
// (helpers spinning), jobs after a pause longer than the helpers' spin (helpers
// asleep in the futex), more parts than helpers started so far, and callers on
// several goroutines at once (one holds the pool, the others run their jobs
// themselves).
func TestPool(t *testing.T) {
	check := func(n, jobs int) {
		for p, c := range poolCheck(n, jobs) {
			if c != jobs {
				t.Errorf("n=%d: part %d ran %d times in %d jobs", n, p, c, jobs)
			}
		}
	}
	check(1, 10)
	check(2, 10000)
	for i := 0; i < 20; i++ {
		time.Sleep(time.Millisecond) // past the spin: the helper sleeps and is woken
		check(2, 3)
	}
	check(4, 100)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			check(3, 3000)
		}()
	}
	wg.Wait()
}
