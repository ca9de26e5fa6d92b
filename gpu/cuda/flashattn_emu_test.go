//go:build cudaemu && !cuda

package cuda_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// TestFlashAttentionEmulator runs the fused attention's check on the
// emulator (TestKernelsOnEmulator runs it too, among all the checks).
func TestFlashAttentionEmulator(t *testing.T) {
	if err := (cudacheck.Check{Name: "AttentionVarlen", Run: cudacheck.CheckAttentionVarlen}).Do(openEmulator(t)); err != nil {
		t.Fatal(err)
	}
}

// TestFlashAttentionPlantedBugs runs the check with a defect planted in one
// kernel at a time (dev/cuda/flashattn.edits: a missing __syncthreads, the
// diagonal tile left out of the causal range, a log-sum-exp without the row
// maximum): each must make the check fail, naming the tensor it broke.
func TestFlashAttentionPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	for _, tc := range []struct {
		kernel, defect, tensor string
	}{
		{"flash_attention_forward", "nosync", "out"},
		{"flash_attention_forward", "tile", "out"},
		{"flash_attention_forward", "lse", "lse"},
		{"flash_attention_backward_dkv", "nosync", "dk"},
		{"flash_attention_backward_dkv", "tile", "dk"},
		{"flash_attention_backward_dq", "nosync", "dq"},
		{"flash_attention_backward_dq", "tile", "dq"},
	} {
		t.Run(tc.kernel+"/"+tc.defect, func(t *testing.T) {
			cuda.EmuPlanted[tc.kernel] = tc.defect
			defer delete(cuda.EmuPlanted, tc.kernel)
			err := (cudacheck.Check{Name: "AttentionVarlen", Run: cudacheck.CheckAttentionVarlen}).Do(be)
			if err == nil {
				t.Fatalf("the check passed with %s planted in %s", tc.defect, tc.kernel)
			}
			if !strings.Contains(err.Error(), tc.tensor) {
				t.Errorf("error %q does not name %s", err, tc.tensor)
			}
			t.Log(err)
		})
	}
}

// TestFlashMMAErrors measures the FlashMMA kernels (bf16 tensor-core
// products, the default with bf16 products) against the fp32 CPU
// reference over flashCases: the forward, the backward on its out and
// lse, and the backward alone on the reference's. Each error (the largest |diff| over the tensor's largest
// value, as compare has it) must be within the check's tolerance, and the
// forward's and the backward's above 1e-4, the bf16 rounding that shows
// the FlashMMA kernels ran (the fp32 kernels are within 1e-5). The
// figures are logged (-v) and quoted in docs/bench/history/gpu-experiments.md.
func TestFlashMMAErrors(t *testing.T) {
	be := openEmulator(t)
	be.SetPrecision(cuda.BF16) // the default variants: FlashMMA
	for i, c := range cudacheck.FlashCases {
		r := rand.New(rand.NewPCG(21, uint64(i)))
		NH, NKV, HD := c.NH, c.NKV, c.HD
		cu, maxT, S, N, q, k, v := cudacheck.FlashOperands(r, c.Lengths, NH, NKV, HD)
		o1, o2 := make([]float32, len(q)), make([]float32, len(q))
		l1, l2 := make([]float32, N*NH), make([]float32, N*NH)
		checkutil.Ref.AttentionVarlenForward(o1, l1, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
		be.AttentionVarlenForward(o2, l2, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
		dout := checkutil.Randn(r, len(q), 1)
		dq1, dq2 := make([]float32, len(q)), make([]float32, len(q))
		dk1, dk2 := make([]float32, len(k)), make([]float32, len(k))
		dv1, dv2 := make([]float32, len(v)), make([]float32, len(v))
		checkutil.Ref.AttentionVarlenBackward(dq1, dk1, dv1, dout, o1, l1, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
		be.AttentionVarlenBackward(dq2, dk2, dv2, dout, o2, l2, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
		eo, el := relErr(o2, o1), relErr(l2, l1)
		eq, ek, ev := relErr(dq2, dq1), relErr(dk2, dk1), relErr(dv2, dv1)
		t.Logf("lengths %v NH %d NKV %d HD %d: out %.2e lse %.2e; dq %.2e dk %.2e dv %.2e", c.Lengths, NH, NKV, HD, eo, el, eq, ek, ev)
		if eo > cudacheck.FlashMMAFwdTol || el > cudacheck.FlashMMAFwdTol || eq > cudacheck.FlashMMABwdTol || ek > cudacheck.FlashMMABwdTol || ev > cudacheck.FlashMMABwdTol {
			t.Errorf("case %d: beyond the tolerances %g (forward), %g (backward)", i, cudacheck.FlashMMAFwdTol, cudacheck.FlashMMABwdTol)
		}
		if eo < 1e-4 {
			t.Errorf("case %d: out within %.2e of fp32: the bf16 products did not run", i, eo)
		}
		// the backward alone, on the reference's out and lse
		be.AttentionVarlenBackward(dq2, dk2, dv2, dout, o1, l1, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
		bq, bk, bv := relErr(dq2, dq1), relErr(dk2, dk1), relErr(dv2, dv1)
		t.Logf("  the backward on the reference's out and lse: dq %.2e dk %.2e dv %.2e", bq, bk, bv)
		if bq > cudacheck.FlashMMABwdTol || bk > cudacheck.FlashMMABwdTol || bv > cudacheck.FlashMMABwdTol {
			t.Errorf("case %d: the backward alone beyond %g", i, cudacheck.FlashMMABwdTol)
		}
		if min(bq, bk, bv) < 1e-4 {
			t.Errorf("case %d: the backward within %.2e %.2e %.2e of fp32: its bf16 products did not run", i, bq, bk, bv)
		}
	}
}

// TestFlashMMAPlantedBugs runs the FlashMMA checks with a defect planted in
// one of their kernels (dev/cuda/flashattn.edits and flash_fwd_ldsm.edits:
// a missing __syncthreads after a tile's staging, the diagonal tile left
// out, a log-sum-exp without the row maximum, P's or dS's A fragment, or
// the ldmatrix forward's K or V B fragment, with two registers swapped);
// each must make the check of the calls that launch the kernel fail,
// naming the tensor it broke: AttentionVarlenWindowMMA for
// flash_attention_forward_mma64, which runs the windowed calls of HD <= 64,
// AttentionVarlenMMA for the others.
func TestFlashMMAPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	const ldsm = "flash_attention_forward_ldsm_mma64"
	for _, tc := range []struct {
		kernel, defect, tensor string
	}{
		{"flash_attention_forward_mma64", "nosync", "out"},
		{"flash_attention_forward_mma64", "tile", "out"},
		{"flash_attention_forward_mma64", "lse", "lse"},
		{"flash_attention_forward_mma64", "frag", "out"},
		{ldsm, "nosync", "out"},
		{ldsm, "tile", "out"},
		{ldsm, "lse", "lse"},
		{ldsm, "frag", "out"},
		{ldsm, "vfrag", "out"},
		{ldsm, "kfrag", "out"},
		{"flash_attention_forward_mma128", "frag", "out"},
		{"flash_attention_backward_dq_mma128", "frag", "dq"},
		{"flash_attention_backward_dk_mma128", "frag", "dk"},
		{"flash_attention_backward_dv_mma128", "frag", "dv"},
		{"flash_attention_backward_dv_mma128", "tile", "dv"},
	} {
		t.Run(tc.kernel+"/"+tc.defect, func(t *testing.T) {
			check := checkNamed(t, "AttentionVarlenMMA")
			if tc.kernel == "flash_attention_forward_mma64" {
				check = checkNamed(t, "AttentionVarlenWindowMMA")
			}
			defer cuda.UseBuild(tc.kernel, tc.defect)()
			err := check.Do(be)
			if err == nil {
				t.Fatalf("%s passed with %s planted in %s", check.Name, tc.defect, tc.kernel)
			}
			if !strings.Contains(err.Error(), tc.tensor) {
				t.Errorf("error %q does not name %s", err, tc.tensor)
			}
			t.Log(err)
		})
	}
	if len(cuda.EmuPlanted) != 0 {
		t.Errorf("builds left in their kernels' place: %v", cuda.EmuPlanted)
	}
}

// TestFlashFwdLdsmLaunches: on resident tensors AttentionVarlenForward in
// bf16 with HD 64 launches one kernel, flash_attention_forward_ldsm_mma64
// without a window and flash_attention_forward_mma64 with one, and nothing
// moves between host and device, nothing synchronises and nothing is
// allocated either way.
func TestFlashFwdLdsmLaunches(t *testing.T) {
	be := openEmulator(t)
	if err := be.EnableProfile(); err != nil {
		t.Fatal(err)
	}
	be.SetPrecision(cuda.BF16)
	c := cudacheck.FlashCases[4] // 4 sequences, GQA 4/2, HD 64
	cuHost, maxT := gpu.CuSeqlens(c.Lengths)
	S, N := len(c.Lengths), int(cuHost[len(c.Lengths)])
	NH, NKV, HD := c.NH, c.NKV, c.HD
	cu := be.AllocInt32("cu", S+1)
	be.UploadInt32(cu, cuHost)
	alloc := func(name string, n int) []float32 { return be.Alloc(name, n) }
	q, out, k, v, lse := alloc("q", N*NH*HD), alloc("out", N*NH*HD), alloc("k", N*NKV*HD), alloc("v", N*NKV*HD), alloc("lse", N*NH)
	for _, w := range []struct {
		window int
		kernel string
	}{{0, "flash_attention_forward_ldsm_mma64"}, {17, "flash_attention_forward_mma64"}} {
		be.AttentionVarlenForward(out, lse, q, k, v, cu, S, N, maxT, NH, NKV, HD, w.window) // the arena grows here
		be.ResetCounters()
		be.ResetProfile()
		be.AttentionVarlenForward(out, lse, q, k, v, cu, S, N, maxT, NH, NKV, HD, w.window)
		got := be.Counters()
		if got.Launches != 1 || got.HostToDevice+got.DeviceToHost != 0 || got.Syncs != 0 || got.Allocs != 0 {
			t.Errorf("window %d: %v; want 1 launch, no copy, sync or allocation", w.window, got)
		}
		p, err := be.Profile()
		if err != nil {
			t.Fatal(err)
		}
		var kernels []string
		for _, e := range p.Entries {
			if e.Kind == "kernel" {
				kernels = append(kernels, e.Op)
			}
		}
		if len(kernels) != 1 || kernels[0] != w.kernel {
			t.Errorf("window %d: kernels %v, want %s", w.window, kernels, w.kernel)
		}
	}
}

// relErr is the largest |got - want| over the largest |want| (at least 1),
// as the checks' compare measures a tensor's error.
func relErr(got, want []float32) float64 {
	scale, worst := 1.0, 0.0
	for i := range want {
		scale = max(scale, math.Abs(float64(want[i])))
		worst = max(worst, math.Abs(float64(got[i])-float64(want[i])))
	}
	return worst / scale
}

// TestFlashFwdLdsmEmulator compares the forward with ldmatrix and
// double-buffered key tiles (flash_attention_forward_ldsm_mma64) with the
// kernel that ran its calls before (flash_forward_mma without a window, the
// build flash_attention_forward_ldsm_mma64/mma64) over flashCases: built
// with expf (the build expf) its out and lse must equal the former's bit for
// bit (the same products in the same order, the same softmax), so that the
// staging, the fragments and the double buffering are proven exact; the
// kernel itself (a base-2 softmax, fa_ex2) must stay within fwdLdsmTol of
// the former (the differences and both kernels' errors against the CPU
// reference are logged, -v, and quoted in
// docs/bench/history/gpu-experiments.md).
func TestFlashFwdLdsmEmulator(t *testing.T) {
	be := openEmulator(t)
	const kernel = "flash_attention_forward_ldsm_mma64"
	const fwdLdsmTol = 5e-4
	prec := be.Precision()
	be.SetPrecision(cuda.BF16)
	defer be.SetPrecision(prec)
	for i, c := range cudacheck.FlashCases {
		r := rand.New(rand.NewPCG(23, uint64(i)))
		NH, NKV, HD := c.NH, c.NKV, c.HD
		cu, maxT, S, N, q, k, v := cudacheck.FlashOperands(r, c.Lengths, NH, NKV, HD)
		refOut, refLse := make([]float32, len(q)), make([]float32, N*NH)
		checkutil.Ref.AttentionVarlenForward(refOut, refLse, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
		// the former kernel, the kernel built with expf, the kernel
		var out, lse [3][]float32
		for j, build := range []string{"mma64", "expf", ""} {
			restore := cuda.UseBuild(kernel, build)
			out[j], lse[j] = checkutil.Randn(r, len(q), 100), checkutil.Randn(r, N*NH, 100)
			be.AttentionVarlenForward(out[j], lse[j], q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
			restore()
		}
		if HD > 64 { // the same kernel (_mma128) either way
			continue
		}
		for _, p := range [][3][]float32{out, lse} {
			for e := range p[0] {
				if math.Float32bits(p[0][e]) != math.Float32bits(p[1][e]) {
					t.Fatalf("case %d (lengths %v NH %d NKV %d HD %d): element %d: the ldmatrix forward with expf %g, the former kernel %g",
						i, c.Lengths, NH, NKV, HD, e, p[1][e], p[0][e])
				}
			}
		}
		do, dl := relErr(out[2], out[0]), relErr(lse[2], lse[0])
		t.Logf("lengths %v NH %d NKV %d HD %d: ldmatrix forward - former: out %.2e lse %.2e; against the CPU: out %.2e lse %.2e (former %.2e %.2e)",
			c.Lengths, NH, NKV, HD, do, dl, relErr(out[2], refOut), relErr(lse[2], refLse), relErr(out[0], refOut), relErr(lse[0], refLse))
		if do > fwdLdsmTol || dl > fwdLdsmTol {
			t.Errorf("case %d: the ldmatrix forward beyond %g of the former kernel", i, fwdLdsmTol)
		}
	}
	if len(cuda.EmuPlanted) != 0 {
		t.Errorf("builds left in their kernels' place: %v", cuda.EmuPlanted)
	}
}

// TestFlashFwdLdsmUnalignedViews: forward_ldsm_mma64 loads two floats of K
// and V at a time only where every pair is 8-byte aligned; views of
// resident tensors that start one element in (4-byte aligned) give the
// same out and lse, bit for bit, as the same values staged from the host
// (256-byte aligned). On the emulator a misaligned 8-byte load traps, as
// it faults on a GPU.
func TestFlashFwdLdsmUnalignedViews(t *testing.T) {
	be := openEmulator(t)
	be.SetPrecision(cuda.BF16)
	c := cudacheck.FlashCases[4] // 4 sequences, GQA 4/2, HD 64
	r := rand.New(rand.NewPCG(24, 4))
	NH, NKV, HD := c.NH, c.NKV, c.HD
	cu, maxT, S, N, q, k, v := cudacheck.FlashOperands(r, c.Lengths, NH, NKV, HD)
	out, lse := make([]float32, len(q)), make([]float32, N*NH)
	be.AttentionVarlenForward(out, lse, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
	view := func(name string, x []float32) []float32 {
		d := be.Alloc(name, len(x)+1)
		be.Upload(d[1:], x)
		return d[1:]
	}
	qd, kd, vd := view("q", q), view("k", k), view("v", v)
	od, ld := view("out", out), view("lse", lse)
	be.AttentionVarlenForward(od, ld, qd, kd, vd, cu, S, N, maxT, NH, NKV, HD, 0)
	out2, lse2 := make([]float32, len(out)), make([]float32, len(lse))
	be.Download(out2, od)
	be.Download(lse2, ld)
	for _, p := range [][2][]float32{{out, out2}, {lse, lse2}} {
		for e := range p[0] {
			if math.Float32bits(p[0][e]) != math.Float32bits(p[1][e]) {
				t.Fatalf("element %d: %g from the views, %g from the host", e, p[1][e], p[0][e])
			}
		}
	}
}
