package cpu

// Attention over packed batches (gpu.Backend's AttentionVarlen ops): each
// sequence runs through the same code as AttentionForward / AttentionBackward
// at its own length, so no work is spent on padding and the attention costs
// the sum of the squared lengths, not B*T^2.

import (
	"sync"

	"github.com/rlhost/rlhost/gpu"
)

// attnScratch holds *[]float32 buffers for the probabilities of one sequence.
var attnScratch sync.Pool

func getScratch(n int) *[]float32 {
	if s, ok := attnScratch.Get().(*[]float32); ok && cap(*s) >= n {
		*s = (*s)[:n]
		return s
	}
	s := make([]float32, n)
	return &s
}

func mustSeqlens(op string, cuSeqlens []int32, S, N, maxT int) {
	if err := gpu.ValidateSeqlens(cuSeqlens, S, N, maxT); err != nil {
		panic("cpu: " + op + ": " + err.Error())
	}
}

// AttentionVarlenForward: see gpu.Backend. N rows, S sequences, maxT the
// longest; the probabilities of one sequence ([NH,T,T]) are pooled scratch.
func (Backend) AttentionVarlenForward(out, lse []float32, q, k, v []float32, cuSeqlens []int32, S, N, maxT, NH, NKV, HD, window int) {
	mustSeqlens("AttentionVarlenForward", cuSeqlens, S, N, maxT)
	qs, ks := NH*HD, NKV*HD
	buf := getScratch(NH*maxT*maxT + NH*maxT)
	defer attnScratch.Put(buf)
	for s := 0; s < S; s++ {
		off, T := int(cuSeqlens[s]), int(cuSeqlens[s+1]-cuSeqlens[s])
		if T == 0 {
			continue
		}
		p, l := (*buf)[:NH*T*T], (*buf)[NH*maxT*maxT:NH*maxT*maxT+NH*T] // l [NH,T]
		attentionSeqForward(out[off*qs:], l, p, q[off*qs:], k[off*ks:], v[off*ks:], 0, T, NH, NKV, HD, window)
		for h := 0; h < NH; h++ {
			for t := 0; t < T; t++ {
				lse[(off+t)*NH+h] = l[h*T+t]
			}
		}
	}
}

// AttentionVarlenBackward: see gpu.Backend. Like AttentionBackward it
// recomputes the probabilities of each sequence, so out and lse are not read.
func (Backend) AttentionVarlenBackward(dq, dk, dv []float32, dout, out, lse, q, k, v []float32, cuSeqlens []int32,
	S, N, maxT, NH, NKV, HD, window int) {
	mustSeqlens("AttentionVarlenBackward", cuSeqlens, S, N, maxT)
	qs, ks := NH*HD, NKV*HD
	buf := getScratch(2 * NH * maxT * maxT)
	defer attnScratch.Put(buf)
	for s := 0; s < S; s++ {
		off, T := int(cuSeqlens[s]), int(cuSeqlens[s+1]-cuSeqlens[s])
		if T == 0 {
			continue
		}
		p, dp := (*buf)[:NH*T*T], (*buf)[NH*T*T:2*NH*T*T]
		attentionSeqBackward(dq[off*qs:], dk[off*ks:], dv[off*ks:], p, dp, dout[off*qs:], q[off*qs:], k[off*ks:], v[off*ks:],
			0, T, NH, NKV, HD, window)
	}
}
