package cudacheck_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/cuda/internal/round"
)

// cpuDevice is gpu/cpu as a Device, with an optional error planted in one
// op: the checks must pass on it unperturbed and fail when it is perturbed.
type cpuDevice struct {
	cpu.Backend
	perturb string
	prec    cuda.Precision
}

func (d *cpuDevice) SetPrecision(p cuda.Precision) { d.prec = p }
func (d *cpuDevice) Precision() cuda.Precision     { return d.prec }

// bf16 is round.BF16, or the planted truncation.
func (d *cpuDevice) bf16(v float32) uint16 {
	if d.perturb == "bf16-truncate" {
		return uint16(math.Float32bits(v) >> 16)
	}
	return round.BF16(v)
}

func (d *cpuDevice) ToBF16(out []uint16, x []float32) {
	for i, v := range x {
		out[i] = d.bf16(v)
	}
}

// round returns x as the products of the device's precision read it.
func (d *cpuDevice) round(x []float32) []float32 {
	switch d.prec {
	case cuda.BF16:
		y := make([]float32, len(x))
		for i, v := range x {
			y[i] = round.BF16Float(d.bf16(v))
		}
		return y
	case cuda.TF32:
		return round.TF32s(x)
	}
	return x
}

func (d *cpuDevice) GemmBF16(transA, transB bool, M, N, K int, alpha float32, A []float32, lda int,
	B []float32, ldb int, beta float32, C []float32, ldc int) {
	defer d.SetPrecision(d.prec)
	d.prec = cuda.BF16
	cpu.Sgemm(transA, transB, M, N, K, alpha, d.round(A), lda, d.round(B), ldb, beta, C, ldc)
}

func (d *cpuDevice) GemmStridedBatchedBF16(transA, transB bool, M, N, K int, alpha float32, A []float32, lda, strideA int,
	B []float32, ldb, strideB int, beta float32, C []float32, ldc, strideC, count int) {
	defer d.SetPrecision(d.prec)
	d.prec = cuda.BF16
	A, B = d.round(A), d.round(B)
	for i := 0; i < count; i++ {
		cpu.Sgemm(transA, transB, M, N, K, alpha, A[i*strideA:], lda, B[i*strideB:], ldb, beta, C[i*strideC:], ldc)
	}
}

func (d *cpuDevice) MatmulForward(out, inp, weight, bias []float32, N, C, OC int) {
	d.Backend.MatmulForward(out, d.round(inp), d.round(weight), bias, N, C, OC)
}

func (d *cpuDevice) MatmulBackward(dinp, dweight, dbias []float32, dout, inp, weight []float32, N, C, OC int, accumulate bool) {
	if d.perturb == "matmul-accumulate-overwrite" { // dinp overwritten where it should be added to
		accumulate = false
	}
	if d.prec == cuda.FP32 || d.perturb == "matmul-backward-fp32" { // the backward's products left unrounded
		d.Backend.MatmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate)
		return
	}
	d.Backend.MatmulBackward(dinp, dweight, nil, d.round(dout), d.round(inp), d.round(weight), N, C, OC, accumulate)
	d.Backend.MatmulBackward(nil, nil, dbias, dout, inp, weight, N, C, OC, false)
}

func (d *cpuDevice) SgemmStridedBatched(transA, transB bool, M, N, K int, alpha float32, A []float32, lda, strideA int,
	B []float32, ldb, strideB int, beta float32, C []float32, ldc, strideC, count int) {
	for i := 0; i < count; i++ {
		cpu.Sgemm(transA, transB, M, N, K, alpha, A[i*strideA:], lda, B[i*strideB:], ldb, beta, C[i*strideC:], ldc)
	}
	if d.perturb == "batched" {
		C[strideC*(count-1)] += 0.01
	}
}

func (d *cpuDevice) GemmEx(transA, transB bool, M, N, K int, alpha float32, A []float32, lda int,
	B []float32, ldb int, beta float32, C []float32, ldc int, compute cuda.ComputeType) {
	cpu.Sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
}

func (d *cpuDevice) SwiGLUForward(out, gate, up []float32, n int) {
	d.Backend.SwiGLUForward(out, gate, up, n)
	if d.perturb == "swiglu" {
		out[n/2] += 1e-3
	}
}

func (d *cpuDevice) SwiGLUBackwardH(dgate, dup, h, dout, gate, up []float32, n int) {
	d.Backend.SwiGLUBackwardH(dgate, dup, h, dout, gate, up, n)
	if d.perturb == "swiglu-backward-h" {
		h[n/2] += 1e-3
	}
}

func (d *cpuDevice) GeGLUForward(out, gate, up []float32, n int) {
	d.Backend.GeGLUForward(out, gate, up, n)
	if d.perturb == "geglu" {
		out[n/2] += 1e-3
	}
}

func (d *cpuDevice) GeGLUBackwardH(dgate, dup, h, dout, gate, up []float32, n int) {
	d.Backend.GeGLUBackwardH(dgate, dup, h, dout, gate, up, n)
	if d.perturb == "geglu" {
		dgate[n/3] += 1e-3
	}
}

func (d *cpuDevice) SoftcapBackward(dx, y []float32, cap float32, n int) {
	if d.perturb == "softcap" { // the cap's derivative at the uncapped scale
		cap *= 1.01
	}
	d.Backend.SoftcapBackward(dx, y, cap, n)
}

func (d *cpuDevice) ResidualRMSNormForward(res, out, rstd []float32, a, b, weight []float32, N, C int, eps float32) {
	d.Backend.ResidualRMSNormForward(res, out, rstd, a, b, weight, N, C, eps)
	if d.perturb == "residual-rmsnorm-res" {
		res[N*C-1] += 1e-3
	}
}

func (d *cpuDevice) ResidualRMSNormBackward(dres, dweight []float32, dout, dout2, res, weight, rstd []float32, N, C int) {
	switch d.perturb {
	case "residual-rmsnorm-overwrite": // dres overwritten, as RMSNormBackward does
		d.Backend.RMSNormBackward(dres, dweight, dout, res, weight, rstd, N, C)
		return
	case "residual-rmsnorm-no-dout2":
		dout2 = nil
	}
	d.Backend.ResidualRMSNormBackward(dres, dweight, dout, dout2, res, weight, rstd, N, C)
}

func (d *cpuDevice) AttentionBackward(dq, dk, dv, scratch []float32, dout, q, k, v []float32, B, T, NH, NKV, HD, window int) {
	d.Backend.AttentionBackward(dq, dk, dv, scratch, dout, q, k, v, B, T, NH, NKV, HD, window)
	if d.perturb == "attention-dk" {
		dk[3] += 1e-2
	}
}

func (d *cpuDevice) AttentionVarlenForward(out, lse []float32, q, k, v []float32, cuSeqlens []int32, S, N, maxT, NH, NKV, HD, window int) {
	d.Backend.AttentionVarlenForward(out, lse, q, k, v, cuSeqlens, S, N, maxT, NH, NKV, HD, window)
	if d.perturb == "varlen-lse" {
		lse[N*NH-1] += 1e-3
	}
}

func (d *cpuDevice) AttentionVarlenBackward(dq, dk, dv []float32, dout, out, lse, q, k, v []float32, cuSeqlens []int32,
	S, N, maxT, NH, NKV, HD, window int) {
	d.Backend.AttentionVarlenBackward(dq, dk, dv, dout, out, lse, q, k, v, cuSeqlens, S, N, maxT, NH, NKV, HD, window)
	if d.perturb == "varlen-dv" {
		dv[0] += 1e-3
	}
}

func (d *cpuDevice) AdamW(params, grads, m, v []float32, step int, lr, beta1, beta2, eps, weightDecay float32) {
	if d.perturb == "adamw-no-decay" {
		weightDecay = 0
	}
	d.Backend.AdamW(params, grads, m, v, step, lr, beta1, beta2, eps, weightDecay)
}

func (d *cpuDevice) AttentionCachedForward(out, q, kcache, vcache []float32, slot, pos []int32, N, NH, NKV, HD, maxT, window int) {
	d.Backend.AttentionCachedForward(out, q, kcache, vcache, slot, pos, N, NH, NKV, HD, maxT, window)
	if d.perturb == "cached-attention" {
		for i := range out[:NH*HD] {
			out[i] *= 1.01
		}
	}
}

func (d *cpuDevice) RopeBackward(dinp, dout []float32, pos []int32, cos, sin []float32, N, H, HD int, layout gpu.RopeLayout) {
	if d.perturb == "rope-backward-forward" { // rotating the wrong way
		d.Backend.RopeForward(dinp, dout, pos, cos, sin, N, H, HD, layout)
		return
	}
	d.Backend.RopeBackward(dinp, dout, pos, cos, sin, N, H, HD, layout)
}

func (d *cpuDevice) RopeQKBackward(dq, dk []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, layout gpu.RopeLayout) {
	if d.perturb == "rope-backward-forward" { // rotating the wrong way
		d.Backend.RopeQKForward(dq, dk, pos, cos, sin, N, NH, NKV, HD, layout)
		return
	}
	d.Backend.RopeQKBackward(dq, dk, pos, cos, sin, N, NH, NKV, HD, layout)
}

func (d *cpuDevice) SampleTokens(tokens []int32, logp []float32, logits []float32, params []gpu.SampleParams, M, V int) {
	if d.perturb == "sample-no-top-p" || d.perturb == "sample-no-top-k" {
		params = dropFilter(params, d.perturb)
	}
	d.Backend.SampleTokens(tokens, logp, logits, params, M, V)
}

// dropFilter plants a sampling defect: the parameters with the nucleus
// (sample-no-top-p) or the top-k cut (sample-no-top-k) left out, as a
// device that ignored it would sample.
func dropFilter(params []gpu.SampleParams, defect string) []gpu.SampleParams {
	params = slices.Clone(params)
	for i := range params {
		switch defect {
		case "sample-no-top-p":
			params[i].TopP = 0
		case "sample-no-top-k":
			params[i].TopK = 0
		default:
			panic("dropFilter: unknown defect " + defect)
		}
	}
	return params
}

// TestChecksPassOnReference runs every check with gpu/cpu in the device's
// place: they must run through (no index errors in their setups) and accept
// identical arithmetic.
func TestChecksPassOnReference(t *testing.T) {
	d := &cpuDevice{}
	for _, c := range cudacheck.Checks {
		if err := c.Run(d); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
}

// TestChecksDetectErrors plants an error in one op at a time and expects the
// named checks to report it.
func TestChecksDetectErrors(t *testing.T) {
	for _, tc := range []struct {
		perturb string
		checks  []string // checks that must fail
	}{
		{"batched", []string{"SgemmStridedBatched"}},
		// SwiGLUForward's output off by 1e-3 at one element: the training
		// step's h comes from SwiGLUBackwardH (perturbed below), but the
		// forward's error moves the loss, and so gradients by up to 1e-3 of
		// their tensor's largest, which the steps' parameters show
		{"swiglu", []string{"GenerateWindow", "SwiGLU", "SwiGLUBackwardH", "SwiGLURows", "ResidentTensors", "GenerateGroups", "TrainStep", "TrainStepPacked", "GenerateSampleSplit"}},
		{"swiglu-backward-h", []string{"SwiGLUBackwardH", "TrainStep", "TrainStepPacked"}},
		{"attention-dk", []string{"AttentionWindow", "TrainStepWindow", "Attention", "TrainStep", "TrainStepTF32"}},
		{"adamw-no-decay", []string{"TrainStepWindow", "AdamW", "TrainStep", "TrainStepPacked", "TrainStepTF32"}},
		{"rope-backward-forward", []string{"TrainStepWindow", "TrainStepWindowBF16", "Rope", "RopeQK", "TrainStep", "TrainStepPacked", "TrainStepTF32"}},
		{"bf16-truncate", []string{"TrainStepWindowBF16", "ToBF16", "GemmBF16", "GemmStridedBatchedBF16", "MatmulBF16"}},
		{"matmul-backward-fp32", []string{"MatmulBF16"}},
		{"matmul-accumulate-overwrite", []string{"TrainStepWindow", "TrainStepWindowBF16", "Matmul", "MatmulBF16", "MatmulTF32", "TrainStep", "TrainStepPacked", "TrainStepTF32"}},
		{"cached-attention", []string{"AttentionCachedWindow", "GenerateWindow", "AttentionCached", "Generate", "GenerateSampled", "GenerateGroups", "GenerateQwen", "GenerateSampleSplit"}},
		{"varlen-lse", []string{"AttentionVarlenWindow", "AttentionVarlen"}},
		{"varlen-dv", []string{"AttentionVarlenWindow", "TrainStepWindow", "AttentionVarlen", "TrainStepPacked"}},
		{"sample-no-top-p", []string{"Sample", "SampleShapes", "GenerateSampled", "GenerateGroups", "SampleSplit", "GenerateSampleSplit"}},
		{"sample-no-top-k", []string{"Sample", "SampleShapes", "GenerateSampled", "GenerateGroups", "SampleSplit", "GenerateSampleSplit"}},
		{"residual-rmsnorm-res", []string{"TrainStepWindow", "ResidualRMSNorm", "TrainStep", "TrainStepPacked"}},
		{"residual-rmsnorm-overwrite", []string{"TrainStepWindow", "TrainStepWindowBF16", "ResidualRMSNorm", "TrainStep", "TrainStepPacked", "TrainStepBF16", "TrainStepTF32"}},
		// the model sums the products' input gradients in the products
		// (MatmulBackward's accumulate) and passes no second gradient
		{"residual-rmsnorm-no-dout2", []string{"ResidualRMSNorm"}},
		// generation's fused ops (decode_test.go): the keys and values in
		// the wrong cache rows, gate and up swapped
		{"decode-qkv-slot", []string{"GenerateWindow", "DecodeQKV", "Generate", "GenerateSampled", "GenerateGroups", "GenerateQwen", "GenerateSampleSplit"}},
		// GeGLU's output and dgate off by 1e-3 at one element; the
		// soft-cap's derivative with the cap 1% off
		{"geglu", []string{"GeGLU", "TrainStepWindow"}},
		{"softcap", []string{"Softcap", "TrainStepWindow"}},
		{"swiglu-rows-swap", []string{"GenerateWindow", "SwiGLURows", "Generate", "GenerateSampled", "GenerateGroups", "GenerateQwen", "GenerateSampleSplit"}},
	} {
		t.Run(tc.perturb, func(t *testing.T) {
			for _, n := range tc.checks {
				if !slices.ContainsFunc(cudacheck.Checks, func(c cudacheck.Check) bool { return c.Name == n }) {
					t.Errorf("%s is not a check", n)
				}
			}
			d := &cpuDevice{perturb: tc.perturb}
			for _, c := range cudacheck.Checks {
				err := c.Run(d)
				want := false
				for _, n := range tc.checks {
					want = want || n == c.Name
				}
				switch {
				case want && err == nil:
					t.Errorf("%s did not detect the planted error", c.Name)
				case !want && err != nil:
					t.Errorf("%s failed on an op it does not check: %v", c.Name, err)
				case err != nil && !strings.Contains(err.Error(), "cpu"):
					t.Errorf("%s: error %q does not show both values", c.Name, err)
				}
			}
		})
	}
}

// TestCompareDetectsDifference keeps compare honest: a check that cannot
// fail would prove nothing.
func TestCompareDetectsDifference(t *testing.T) {
	want := []float32{1, 2, 3}
	if err := checkutil.Compare("x", []float32{1, 2, 3.01}, want, 1e-3); err == nil {
		t.Fatal("compare accepted a difference of 0.01 at tolerance 1e-3*3")
	}
	if err := checkutil.Compare("x", []float32{1, 2, 3.001}, want, 1e-3); err != nil {
		t.Fatalf("compare rejected a difference within tolerance: %v", err)
	}
}
