package cuda

// Sampling on the device (kernels/sample.cuh): one token per row of logits,
// temperature, top-k, top-p, with each row's uniform draw from the host.
// The kernel is sample_tokens_hist, which finds the cuts of rows of many
// candidates by radix select; with the sample_bisect variant
// (Variants.SampleBisect) it is sample_tokens, which finds them by
// bisection: the same tokens and log-probs bit for bit.
// CPU reference: gpu/cpu/sample.go; the checks are in sample_check.go.

import (
	"fmt"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
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
		if b.d.sampleOnHost {
			b.d.sampleHost(a, tokens, logp, logits, params, M, V)
			return
		}
		pz := a.in(logits, M*V)
		pp := a.stage(unsafe.Pointer(&params[0]), int64(M)*int64(unsafe.Sizeof(params[0])), true, false)
		e, cand, sorted := a.alloc(int64(M*V)*4), a.alloc(int64(M*V)*4), a.alloc(int64(M*V)*4)
		pt := a.stage(unsafe.Pointer(&tokens[0]), int64(M)*4, false, true)
		if b.d.vars.SampleBisect { // the same tokens, the cuts of flat rows by bisection
			b.d.launch("sample_tokens", M, ptr(pt), ptr(a.out(logp, M)), ptr(pz), ptr(pp), ptr(e), ptr(cand), ptr(sorted),
				i64(M), i64(V))
			return
		}
		b.d.launch("sample_tokens_hist", M, ptr(pt), ptr(a.out(logp, M)), ptr(pz), ptr(pp), ptr(e), ptr(cand), ptr(sorted),
			i64(M), i64(V))
	})
}

// sampleHost is the planted bug of the transfer tests (sampleOnHost): the
// logits [M,V] come down and the host samples them, as generation did
// before sampling ran on the device.
func (d *device) sampleHost(a *arena, tokens []int32, logp []float32, logits []float32, params []gpu.SampleParams, M, V int) {
	h := make([]float32, M*V)
	if err := d.dtoh(unsafe.Pointer(&h[0]), a.in(logits, M*V), int64(M*V)*4); err != nil {
		panic(&Error{"", err})
	}
	ids, lp := make([]int32, M), make([]float32, M)
	cpu.New().SampleTokens(ids, lp, h, params, M, V)
	// the outputs may be tensors (overlap scheduling samples into the
	// generator's): those go up
	if p, t := d.mem.find(unsafe.Pointer(&tokens[0]), int64(M)*4); t != nil {
		must(d.htod(p, unsafe.Pointer(&ids[0]), int64(M)*4))
	} else {
		copy(tokens, ids)
	}
	if logp == nil {
		return
	}
	if p, t := d.mem.find(unsafe.Pointer(&logp[0]), int64(M)*4); t != nil {
		must(d.htod(p, unsafe.Pointer(&lp[0]), int64(M)*4))
	} else {
		copy(logp, lp)
	}
}
