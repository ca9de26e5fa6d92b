package rollout

import (
	"runtime"
	"sync"

	"github.com/rlhost/rlhost/gpu/tokenizer"
)

// ResponseTexts decodes the trajectories' responses without special tokens
// (the reward's solutions), spread over the cores: one after another they
// are ~25 ms a GRPO step of 256 responses of 256 tokens on 2 cores
// (BenchmarkGRPOAgentLoop), host time in which the device idles. The
// tokenizer is safe for concurrent use (the agent loops decode from their
// own goroutines).
func ResponseTexts(tk *tokenizer.Tokenizer, outs []*Output) []string {
	texts := make([]string, len(outs))
	parallelFor(len(outs), runtime.GOMAXPROCS(0), func(i int) { texts[i] = tk.Decode(outs[i].ResponseIDs, true) })
	return texts
}

// parallelFor runs f(0) .. f(n-1) on up to workers goroutines at once and
// returns when all have.
func parallelFor(n, workers int, f func(i int)) {
	workers = max(1, min(workers, n))
	if workers == 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
