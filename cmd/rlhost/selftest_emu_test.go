//go:build cudaemu && !cuda

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
)

// useEmulator makes `--device cuda` open kernel emulators for the test,
// each closed at its end.
func useEmulator(t *testing.T) {
	old := openCUDA
	var opened []*cuda.Backend
	openCUDA = func() (gpu.Backend, error) {
		be := cuda.OpenEmulator()
		opened = append(opened, be)
		return be, nil
	}
	t.Cleanup(func() {
		openCUDA = old
		for _, be := range opened {
			be.Close()
		}
	})
}

// TestSelftestBenchCUDA: `selftest --device cuda --bench` on the CUDA
// backend (its emulator) reports what proof.sh reads from a GPU: the
// products' path, the packed attention, per-step syncs and bytes, the
// host's share of the time, sampling on the device (a decode forward
// downloads far less than a row of logits per sequence) and prefix sharing.
func TestSelftestBenchCUDA(t *testing.T) {
	useEmulator(t)
	const DB, P, NEW = 8, 20, 2
	stdout, _, err := run(t, "selftest", "--device", "cuda", "--bench", "../../gpu/model/testdata/tiny-llama", "--dtype", "bfloat16",
		"--batch", "2", "--seq", "6", "--decode-batch", "8", "--prompt", "20", "--new-tokens", "2", "--steps", "1")
	if err != nil {
		t.Fatal(err)
	}
	got := benchLines(t, stdout)
	if len(got) != 4 {
		t.Fatalf("%d lines, want train, decode x2, decode-grpo", len(got))
	}
	for _, r := range got {
		if !strings.HasPrefix(r.Device, "cuda/emulator") || r.Dtype != "bfloat16" || !strings.Contains(r.Products, "CUDA_R_16BF") {
			t.Errorf("%s: device %q dtype %q products %q", r.Kind, r.Device, r.Dtype, r.Products)
		}
		// a decode step's samples come down behind an event the host waits
		// for alone (overlap scheduling), the training step's results after
		// synchronisations
		waits := float64(r.Syncs) + r.DownloadWaits
		if r.HostFrac == nil || *r.HostFrac < 0 || *r.HostFrac > 1 || waits <= 0 || r.UpBytes <= 0 || r.DownBytes <= 0 {
			t.Errorf("%s at batch %d: host_frac %v, %d syncs and %v waits for samples, %d B up, %d B down per step",
				r.Kind, r.B, r.HostFrac, r.Syncs, r.DownloadWaits, r.UpBytes, r.DownBytes)
		}
		if strings.HasPrefix(r.Kind, "decode") && r.DownloadWaits < 1 {
			t.Errorf("%s at batch %d: %v waits for samples per forward, want at least 1 (overlap scheduling)", r.Kind, r.B, r.DownloadWaits)
		}
		if strings.HasPrefix(r.Kind, "decode") && (r.T != P+NEW || r.Prompt != P) {
			t.Errorf("%s at batch %d: seq %d, prompt %d; want %d, %d", r.Kind, r.B, r.T, r.Prompt, P+NEW, P)
		}
		if strings.HasPrefix(r.Kind, "decode") && r.DownBytes >= int64(4*r.Vocab) {
			t.Errorf("%s at batch %d downloads %d B per forward, a row of logits (%d B) or more: sampled on the host", r.Kind, r.B, r.DownBytes, 4*r.Vocab)
		}
	}
	if tr := got[0]; tr.Kind != "train" || !strings.Contains(tr.Attention, "AttentionVarlen") || tr.Syncs > 4 {
		t.Errorf("train: %+v", tr)
	}
	if g := got[3]; g.Kind != "decode-grpo" || g.SharedTokens == nil || *g.SharedTokens != (DB-1)*(P-1) {
		t.Errorf("decode-grpo: %+v (shared %v, want %d)", g, g.SharedTokens, (DB-1)*(P-1))
	}
}

// TestSelftestBenchCUDAProfile: with --profile the timed lines come first,
// as without it, then one profile line per phase (train, decode at
// --decode-batch, decode-grpo) naming the kernels that ran (the fused
// attention of the packed step, the cached attention of decoding, the
// bfloat16 GemmEx), largest first, their shares adding to 1. Without
// --device cuda, --profile is refused.
func TestSelftestBenchCUDAProfile(t *testing.T) {
	useEmulator(t)
	args := []string{"selftest", "--device", "cuda", "--bench", "../../gpu/model/testdata/tiny-llama", "--dtype", "bfloat16",
		"--batch", "2", "--seq", "6", "--decode-batch", "4", "--prompt", "5", "--new-tokens", "2", "--steps", "1", "--profile"}
	stdout, _, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines, want train, decode x2, decode-grpo, then 3 profiles:\n%s", len(lines), stdout)
	}
	timed := benchLines(t, strings.Join(lines[:4], "\n"))
	for i, k := range []string{"train", "decode", "decode", "decode-grpo"} {
		if timed[i].Kind != k || timed[i].Seconds <= 0 {
			t.Errorf("line %d: kind %q, %v s; want %s", i+1, timed[i].Kind, timed[i].Seconds, k)
		}
	}
	for i, x := range []struct {
		phase string
		batch int
		ops   []string
	}{
		{"train", 2, []string{"flash_attention_forward_ldsm_mma64", "flash_attention_backward_dkv_heads_mma64", "adamw", "memcpy HtoD"}},
		{"decode", 4, []string{"attention_cached_split", "memcpy DtoH"}},
		{"decode-grpo", 4, []string{"attention_cached_split", "sample_split_sum"}},
	} {
		t.Logf("%s", lines[4+i])
		var p profileLine
		if err := json.Unmarshal([]byte(lines[4+i]), &p); err != nil {
			t.Fatalf("line %d %q: %v", 5+i, lines[4+i], err)
		}
		if p.Kind != "profile" || p.Phase != x.phase || p.B != x.batch || !strings.HasPrefix(p.Device, "cuda/emulator") ||
			p.WallMS <= 0 || p.DeviceMS <= 0 || len(p.Entries) == 0 {
			t.Errorf("profile line %d: %s; want phase %s, batch %d, times > 0", i+1, lines[4+i], x.phase, x.batch)
			continue
		}
		have := map[string]bool{}
		share, gemm := 0.0, false
		for j, e := range p.Entries {
			have[e.Op] = true
			share += e.Share
			gemm = gemm || (e.Kind == "cublas" && strings.HasPrefix(e.Op, "cublasGemmEx bf16->f32"))
			if e.Calls <= 0 || e.MS < 0 || (j > 0 && e.MS > p.Entries[j-1].MS) {
				t.Errorf("%s: entry %d %+v: want calls > 0, sorted by time", x.phase, j, e)
			}
		}
		for _, op := range x.ops {
			if !have[op] {
				t.Errorf("%s: no entry %q", x.phase, op)
			}
		}
		if !gemm || share < 0.99 || share > 1.01 {
			t.Errorf("%s: bf16 GemmEx entry %v, shares add to %v; want an entry and 1", x.phase, gemm, share)
		}
	}
	if _, _, err := run(t, "selftest", "--device", "cpu", "--bench", "../../gpu/model/testdata/tiny-llama", "--profile"); err == nil ||
		!strings.Contains(err.Error(), "--profile needs --device cuda") {
		t.Errorf("--profile on the CPU: %v, want it refused", err)
	}
}
