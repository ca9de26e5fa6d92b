package cuda

// Sampling on the device (kernels/sample.cuh): one token per row of logits,
// temperature, top-k, top-p, with each row's uniform draw from the host.
// The kernel is sample_tokens_hist, which finds the cuts of rows of many
// candidates by radix select (an H100 proof at b593c0c measured it faster
// than the bisection it replaced, sample_tokens, since deleted).
// CPU reference: gpu/cpu/sample.go; the checks are in sample_check.go.

import (
	"fmt"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
)

// SampleTokens: tokens [M] and logp [M] (may be nil) from logits [M,V] and
// params [M]. The params go up (24 bytes a row); with host tokens and logp
// the op waits for the stream and downloads 8 bytes a row, nothing else.
func (b *Backend) SampleTokens(tokens []int32, logp []float32, logits []float32, params []gpu.SampleParams, M, V int) {
	if M == 0 {
		return
	}
	if len(tokens) < M || len(params) < M || (logp != nil && len(logp) < M) {
		panic(&Error{"SampleTokens", fmt.Errorf("%d tokens, %d log-probs, %d params for %d rows", len(tokens), len(logp), len(params), M)})
	}
	b.d.run("SampleTokens", func(a *arena) {
		if h := b.d.sampleHook; h != nil && h(a, tokens, logp, logits, params, M, V) {
			return
		}
		pz := a.in(logits, M*V)
		pp := a.stage(unsafe.Pointer(&params[0]), int64(M)*int64(unsafe.Sizeof(params[0])), true, false)
		e, cand, sorted := a.alloc(int64(M*V)*4), a.alloc(int64(M*V)*4), a.alloc(int64(M*V)*4)
		pt := a.stage(unsafe.Pointer(&tokens[0]), int64(M)*4, false, true)
		b.d.launch("sample_tokens_hist", M, ptr(pt), ptr(a.out(logp, M)), ptr(pz), ptr(pp), ptr(e), ptr(cand), ptr(sorted),
			i64(M), i64(V))
	})
}

// putBack writes n bytes of host memory src to dst: up to the device where
// dst is a tensor's host slice, into dst itself otherwise.
func (d *device) putBack(dst, src unsafe.Pointer, n int64) {
	if p, t := d.mem.find(dst, n); t != nil {
		must(d.htod(p, src, n))
		return
	}
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}
