package cpu

import (
	"runtime"
	"sync"
)

// minWork is the number of scalar operations below which a loop stays on the
// calling goroutine: under it, starting goroutines costs more than it saves.
const minWork = 1 << 15

// parallelRows calls fn(lo, hi) over contiguous chunks covering [0, n), on up
// to GOMAXPROCS goroutines when n*costPerRow is large enough, else once on the
// calling goroutine. fn must only write rows in [lo, hi).
func parallelRows(n, costPerRow int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	if workers <= 1 || n*costPerRow < minWork {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := chunk; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	fn(0, min(chunk, n)) // the first chunk on the calling goroutine: one hand-off fewer
	wg.Wait()
}
