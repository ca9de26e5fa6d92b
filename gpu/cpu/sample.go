package cpu

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/rlhost/rlhost/gpu"
)

// SampleTokens picks one token per row of logits [M,V] (see
// gpu.Backend.SampleTokens); rows run on up to GOMAXPROCS goroutines. It is
// the reference of the CUDA kernel sample_tokens (gpu/cuda/kernels/sample.cuh).
func (Backend) SampleTokens(tokens []int32, logp []float32, logits []float32, params []gpu.SampleParams, M, V int) {
	eachRow(M, func(i int) {
		tok, lp := SampleRow(logits[i*V:(i+1)*V], params[i])
		tokens[i] = tok
		if logp != nil {
			logp[i] = lp
		}
	})
}

// eachRow runs f(0..n-1) over up to GOMAXPROCS goroutines, rows strided
// over the workers (each row is independent).
func eachRow(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// probBufs holds SampleRow's [V] scratch.
var probBufs sync.Pool

// SampleRow picks a token from logits [V] as p says and returns it with its
// log-probability before filtering. It may run concurrently.
//
// Greedy is the first argmax. Otherwise, with e[i] = exp((z[i]-max)/T) and
// se their sum (float64): without filtering the token is the first i with
// U*se - (e[0]+...+e[i]) < 0; with top-k or top-p, the candidates are the
// tokens whose e is at least a threshold (1e-3*se, divided by 16 until they
// hold the top-p mass (with TopP) and at least K tokens (with TopK), or
// below 1e-30*se), sorted by
// logit (ties: lower id first), cut to K, then to the shortest prefix whose
// probability reaches TopP, and the token is the first of them where
// U*(their e summed) - (a running sum of their e) < 0.
func SampleRow(logits []float32, p gpu.SampleParams) (int32, float32) {
	temp := p.Temperature
	greedy := temp <= 0
	if greedy {
		temp = 1
	}
	V := len(logits)
	m := logits[0]
	best := 0
	for i, z := range logits {
		if z > m {
			m, best = z, i
		}
	}
	// e[i] = exp((z_i - m)/temp), the unnormalised probabilities
	bp, _ := probBufs.Get().(*[]float32)
	if bp == nil || len(*bp) < V {
		b := make([]float32, V)
		bp = &b
	}
	defer probBufs.Put(bp)
	e := (*bp)[:V]
	se := ExpShift(e, logits, m, 1/temp)
	lse := math.Log(se)
	logp := func(i int) float32 { return float32(float64((logits[i]-m)/temp) - lse) }
	if greedy {
		return int32(best), logp(best)
	}
	topK := int(p.TopK)
	keepP := float64(p.TopP)
	if keepP <= 0 || keepP >= 1 {
		keepP = 1
	}
	if keepP == 1 && (topK <= 0 || topK >= V) { // no filtering: the whole distribution
		u := p.U * se
		for i, q := range e {
			u -= float64(q)
			if u < 0 {
				return int32(i), logp(i)
			}
		}
		return int32(best), logp(best) // u exceeded the rounded total mass
	}
	// candidates: a superset of the nucleus / top-k found by a probability
	// threshold, then sorted by probability.
	var cand []int
	for thresh := 1e-3; ; thresh /= 16 {
		cand = cand[:0]
		var mass float64
		t := float32(thresh * se)
		for i, q := range e {
			if q >= t {
				cand = append(cand, i)
				mass += float64(q)
			}
		}
		mass /= se
		enoughK := topK <= 0 || len(cand) >= topK
		enoughP := keepP == 1 || mass >= keepP
		if (enoughP && enoughK) || thresh < 1e-30 {
			break
		}
	}
	order := func(a, b int) int { // by logit, ties by lower id: a total order
		if logits[a] != logits[b] {
			if logits[a] > logits[b] {
				return -1
			}
			return 1
		}
		return a - b
	}
	if topK > 0 && len(cand) > topK {
		cand = firstK(cand, topK, order) // O(n log K), not a sort of all n
	}
	slices.SortFunc(cand, order)
	if keepP < 1 {
		var cum float64
		for j, i := range cand {
			cum += float64(e[i]) / se
			if cum >= keepP {
				cand = cand[:j+1]
				break
			}
		}
	}
	var total float64
	for _, i := range cand {
		total += float64(e[i])
	}
	u := p.U * total
	for _, i := range cand {
		u -= float64(e[i])
		if u < 0 {
			return int32(i), logp(i)
		}
	}
	last := cand[len(cand)-1]
	return int32(last), logp(last)
}

// firstK moves the k first of cand in order (a total order) to cand[:k], in
// no particular order, and returns cand[:k]: a heap of the k best so far
// whose root is the worst of them, so that most of a long list is passed
// over with one comparison.
func firstK(cand []int, k int, order func(a, b int) int) []int {
	h := cand[:k]
	// worse(i, j): h[i] comes after h[j] in order (the root is the last)
	worse := func(i, j int) bool { return order(h[i], h[j]) > 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= k {
				return
			}
			if r := l + 1; r < k && worse(r, l) {
				l = r
			}
			if !worse(l, i) {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, c := range cand[k:] {
		if order(c, h[0]) < 0 {
			h[0] = c
			down(0)
		}
	}
	return h
}
