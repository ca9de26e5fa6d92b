//go:build cudaemu && !cuda

package cudacheck_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// TestWindowChecksPlantedEmulator is TestWindowChecksPlanted on the
// kernels: every case of the window checks fails with the product kernels
// launched with the window off by one either way (or, for the decode
// attention, a cache's rows one short) against the CPU reference's true
// values; no kernel is built with a planted defect for it.
func TestWindowChecksPlantedEmulator(t *testing.T) { windowPlantsFail(t, openEmulator(t)) }

// TestWindowSkipsTiles: with a sliding window the fused attention's
// kernels never compute with the tiles outside the band. One sequence of
// 256 tokens, a window of 8: the keys and values of the first key tile
// (0..63) are NaN, yet the outputs and dq of queries 128..255 (whose band
// starts at key 121) equal the CPU reference on the clean inputs; and with
// the queries and output gradients of 128..255 NaN, dk and dv of keys
// 0..63 (seen by queries up to 70) do. A kernel that multiplied a tile
// outside the band, even by probabilities of 0, would give NaN there.
// The fp32 kernels, the tensor-core ones up to 64 and up to 128
// dimensions, and the _hd256 ones.
func TestWindowSkipsTiles(t *testing.T) {
	be := openEmulator(t)
	const T, W, cut = 256, 8, 128 // the rows checked start at cut
	for _, c := range []struct {
		p           cuda.Precision
		NH, NKV, HD int
		fwd, bwd    float64
	}{
		{cuda.FP32, 2, 1, 64, 1e-5, 2e-5},
		{cuda.BF16, 2, 1, 64, cudacheck.FlashMMAFwdTol, cudacheck.FlashMMABwdTol},
		{cuda.BF16, 2, 2, 128, cudacheck.FlashMMAFwdTol, cudacheck.FlashMMABwdTol},
		{cuda.BF16, 2, 1, 256, 1e-5, 2e-5},
	} {
		t.Run(fmt.Sprintf("%v HD %d", c.p, c.HD), func(t *testing.T) {
			be.SetPrecision(c.p)
			defer be.SetPrecision(cuda.FP32)
			NH, NKV, HD := c.NH, c.NKV, c.HD
			r := rand.New(rand.NewPCG(47, uint64(HD)))
			cu, maxT, S, N, q, k, v := cudacheck.FlashOperands(r, []int{T}, NH, NKV, HD)
			out, lse := make([]float32, len(q)), make([]float32, N*NH)
			checkutil.Ref.AttentionVarlenForward(out, lse, q, k, v, cu, S, N, maxT, NH, NKV, HD, W)
			dout := checkutil.Randn(r, len(q), 1)
			dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			checkutil.Ref.AttentionVarlenBackward(dq, dk, dv, dout, out, lse, q, k, v, cu, S, N, maxT, NH, NKV, HD, W)
			nan := float32(math.NaN())
			poison := func(x []float32, from, to, heads int) []float32 {
				y := checkutil.Clone(x)
				for i := from * heads * HD; i < to*heads*HD; i++ {
					y[i] = nan
				}
				return y
			}
			qrows, krows := NH*HD, NKV*HD // floats a token
			// the first key tile NaN: queries from cut on
			kp, vp := poison(k, 0, 64, NKV), poison(v, 0, 64, NKV)
			o2, l2 := make([]float32, len(q)), make([]float32, N*NH)
			be.AttentionVarlenForward(o2, l2, q, kp, vp, cu, S, N, maxT, NH, NKV, HD, W)
			if err := checkutil.CompareAll(c.fwd, "out", o2[cut*qrows:], out[cut*qrows:], "lse", l2[cut*NH:], lse[cut*NH:]); err != nil {
				t.Errorf("keys 0..63 NaN, forward of queries %d..: %v", cut, err)
			}
			dq2, dk2, dv2 := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
			be.AttentionVarlenBackward(dq2, dk2, dv2, dout, out, lse, q, kp, vp, cu, S, N, maxT, NH, NKV, HD, W)
			if err := checkutil.Compare("dq", dq2[cut*qrows:], dq[cut*qrows:], c.bwd); err != nil {
				t.Errorf("keys 0..63 NaN, dq of queries %d..: %v", cut, err)
			}
			// the queries from cut on NaN (their q, dout and out): keys 0..63
			qp, dp, op := poison(q, cut, T, NH), poison(dout, cut, T, NH), poison(out, cut, T, NH)
			be.AttentionVarlenBackward(dq2, dk2, dv2, dp, op, lse, qp, k, v, cu, S, N, maxT, NH, NKV, HD, W)
			if err := checkutil.CompareAll(c.bwd, "dk", dk2[:64*krows], dk[:64*krows], "dv", dv2[:64*krows], dv[:64*krows]); err != nil {
				t.Errorf("queries %d.. NaN, dk and dv of keys 0..63: %v", cut, err)
			}
		})
	}
}

// TestDecodeWindowReadsItsRows: the decode attention reads only the rows
// of the positions a token sees: in a full cache of 100 positions with a
// window of 10, the rows no token sees are NaN, and flash-decoding and the decode_vec kernel give the CPU
// reference's output on the clean cache.
func TestDecodeWindowReadsItsRows(t *testing.T) {
	be := openEmulator(t)
	const NH, NKV, HD, S, rows, W = 4, 2, 64, 2, 100, 10
	slot, pos := []int32{1, 0, 1}, []int32{99, 3, 50}
	r := rand.New(rand.NewPCG(48, 48))
	KD := NKV * HD
	kc, vc := checkutil.Randn(r, S*rows*KD, 1), checkutil.Randn(r, S*rows*KD, 1)
	q := checkutil.Randn(r, len(pos)*NH*HD, 1)
	want := make([]float32, len(q))
	checkutil.Ref.AttentionCachedForward(want, q, kc, vc, slot, pos, len(pos), NH, NKV, HD, rows, W)
	// NaN in every row no token sees: slot 0's after position 3, slot 1's
	// before 41 and between 50 and 90
	kp, vp := checkutil.Clone(kc), checkutil.Clone(vc)
	for _, span := range [][3]int{{0, 4, rows}, {1, 0, 41}, {1, 51, 90}} {
		for j := span[1]; j < span[2]; j++ {
			row := (span[0]*rows + j) * KD
			for i := range KD {
				kp[row+i], vp[row+i] = float32(math.NaN()), float32(math.NaN())
			}
		}
	}
	for _, build := range []string{"", "scalar"} { // the kernel, its former output pass
		restore := cuda.UseBuild("attention_cached_split", build)
		got := make([]float32, len(q))
		be.AttentionCachedForward(got, q, kp, vp, slot, pos, len(pos), NH, NKV, HD, rows, W)
		restore()
		if err := checkutil.Compare("out", got, want, 1e-5); err != nil {
			t.Errorf("attention_cached_split/%s: %v", build, err)
		}
	}
}
