//go:build cudaemu && !cuda

package main

import (
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
)

// TestSelftestBenchCUDA: `selftest --device cuda --bench` on the CUDA
// backend (its emulator) reports what proof.sh reads from a GPU: the
// products' path, the packed attention, per-step syncs and bytes, the
// host's share of the time, sampling on the device (a decode forward
// downloads far less than a row of logits per sequence) and prefix sharing.
func TestSelftestBenchCUDA(t *testing.T) {
	old := openCUDA
	var opened []*cuda.Backend
	openCUDA = func() (gpu.Backend, error) {
		be := cuda.OpenEmulator()
		opened = append(opened, be)
		return be, nil
	}
	defer func() {
		openCUDA = old
		for _, be := range opened {
			be.Close()
		}
	}()
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
		if r.HostFrac == nil || *r.HostFrac < 0 || *r.HostFrac > 1 || r.Syncs <= 0 || r.UpBytes <= 0 || r.DownBytes <= 0 {
			t.Errorf("%s at batch %d: host_frac %v, %d syncs, %d B up, %d B down per step", r.Kind, r.B, r.HostFrac, r.Syncs, r.UpBytes, r.DownBytes)
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
