package cudacheck_test

import "github.com/rlhost/rlhost/gpu"

// cpuDevice's gpu.DecodeFused: the separate ops on the host, so that the
// checks of the fused ops (decode_check.go) and the generation checks'
// fused path run without a GPU, with planted errors: "decode-qkv-slot"
// writes the keys and values at the token's position in slot 0 (the cache
// rows ignored; wrapped at the cache's end), "swiglu-rows-swap" swaps gate and up.

func (d *cpuDevice) DecodeFusion() bool { return true }

func (d *cpuDevice) QKVRopeCacheForward(q, kcache, vcache, qkv, bias []float32, pos, rows []int32, cos, sin []float32,
	N, NH, NKV, HD int, layout gpu.RopeLayout) {
	QD, KD := NH*HD, NKV*HD
	W := QD + 2*KD
	k, v := make([]float32, N*KD), make([]float32, N*KD)
	for n := range N {
		x := qkv[n*W : (n+1)*W]
		copy(q[n*QD:(n+1)*QD], x[:QD])
		copy(k[n*KD:(n+1)*KD], x[QD:QD+KD])
		copy(v[n*KD:(n+1)*KD], x[QD+KD:])
		if bias != nil {
			for i := range QD {
				q[n*QD+i] += bias[i]
			}
			for i := range KD {
				k[n*KD+i] += bias[QD+i]
				v[n*KD+i] += bias[QD+KD+i]
			}
		}
	}
	d.RopeQKForward(q, k, pos, cos, sin, N, NH, NKV, HD, layout)
	if d.perturb == "decode-qkv-slot" {
		rows = slotZeroRows(pos, len(kcache)/KD)
	}
	d.ScatterRows(kcache, k, rows, N, KD)
	d.ScatterRows(vcache, v, rows, N, KD)
}

func (d *cpuDevice) RopeCacheForward(q, kcache, vcache, k, v []float32, pos, rows []int32, cos, sin []float32,
	N, NH, NKV, HD int, layout gpu.RopeLayout) {
	KD := NKV * HD
	k = append([]float32(nil), k[:N*KD]...)
	d.RopeQKForward(q, k, pos, cos, sin, N, NH, NKV, HD, layout)
	if d.perturb == "decode-qkv-slot" {
		rows = slotZeroRows(pos, len(kcache)/KD)
	}
	d.ScatterRows(kcache, k, rows, N, KD)
	d.ScatterRows(vcache, v, rows, N, KD)
}

// slotZeroRows is the planted "decode-qkv-slot": the token's position as
// its row (in slot 0), within the cache's cap rows (a rolling cache's
// positions pass its rows).
func slotZeroRows(pos []int32, cap int) []int32 {
	rows := make([]int32, len(pos))
	for i, p := range pos {
		rows[i] = p % int32(cap)
	}
	return rows
}

func (d *cpuDevice) SwiGLURowsForward(out, gu []float32, N, F int) {
	gate, up := make([]float32, N*F), make([]float32, N*F)
	for n := range N {
		copy(gate[n*F:(n+1)*F], gu[2*n*F:(2*n+1)*F])
		copy(up[n*F:(n+1)*F], gu[(2*n+1)*F:(2*n+2)*F])
	}
	if d.perturb == "swiglu-rows-swap" {
		gate, up = up, gate
	}
	d.SwiGLUForward(out, gate, up, N*F)
}
