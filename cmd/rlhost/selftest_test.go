//go:build !cuda

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestSelftest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int    // 0: success
		output string // in stdout on success, in the error otherwise
	}{
		{"cpu", []string{"selftest", "--device", "cpu"}, 0, "sgemm matches"},
		{"cuda without the tag", []string{"selftest", "--device", "cuda"}, 1, "built without CUDA support; rebuild with `go build -tags cuda`"},
		{"unknown device", []string{"selftest", "--device", "tpu"}, 2, `unknown --device "tpu"`},
		{"bench on cpu", []string{"selftest", "--device", "cpu", "--bench", "../../gpu/model/testdata/tiny-llama",
			"--batch", "2", "--seq", "8", "--new-tokens", "3", "--steps", "1"}, 0, `"kind":"decode"`},
		{"bench, bad batch", []string{"selftest", "--bench", "x", "--batch", "0"}, 2, "--batch > 0"},
		{"bench, bad prompt", []string{"selftest", "--bench", "x", "--prompt", "-1"}, 2, "--prompt >= 0"},
		{"bench on cuda without the tag", []string{"selftest", "--device", "cuda", "--bench", "../../gpu/model/testdata/tiny-llama"}, 1,
			"built without CUDA support"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, _, err := run(t, tc.args...)
			if tc.code == 0 {
				if err != nil || !strings.Contains(stdout, tc.output) {
					t.Fatalf("got %v, stdout %q; want success with %q", err, stdout, tc.output)
				}
				return
			}
			ec, ok := err.(cli.ExitCoder)
			if !ok || ec.ExitCode() != tc.code || !strings.Contains(err.Error(), tc.output) {
				t.Fatalf("got %v; want exit %d with %q", err, tc.code, tc.output)
			}
		})
	}
}

// TestSelftestBenchCPU: `selftest --bench` at a tiny shape prints what
// proof.sh reads: a training step (packed: through AttentionVarlen), greedy
// decodes at the batch and at batch 1 with the per-token latency, and a
// GRPO-like decode whose groups share their prompt's prefill.
func TestSelftestBenchCPU(t *testing.T) {
	const B, T, DB, P, NEW = 2, 8, 16, 40, 3
	stdout, _, err := run(t, "selftest", "--device", "cpu", "--bench", "../../gpu/model/testdata/tiny-llama",
		"--batch", "2", "--seq", "8", "--decode-batch", "16", "--prompt", "40", "--new-tokens", "3", "--steps", "1")
	if err != nil {
		t.Fatal(err)
	}
	got := benchLines(t, stdout)
	if len(got) != 4 {
		t.Fatalf("%d lines, want train, decode x2, decode-grpo:\n%s", len(got), stdout)
	}
	tr, dec, one, grpo := got[0], got[1], got[2], got[3]
	if tr.Kind != "train" || tr.B != B || tr.T != T || tr.Tokens != B*T || !strings.Contains(tr.Attention, "AttentionVarlen") ||
		!(tr.Seconds > 0) || tr.FLOP <= 6*float64(tr.Params)*B*T || tr.Vocab != 128 {
		t.Errorf("train: %+v", tr)
	}
	for _, d := range []struct {
		r    benchResult
		kind string
		b    int
	}{{dec, "decode", DB}, {one, "decode", 1}, {grpo, "decode-grpo", DB}} {
		r := d.r
		if r.Kind != d.kind || r.B != d.b || r.Prompt != P || r.T != P+NEW || r.Tokens != d.b*NEW ||
			!(r.Seconds > 0) || r.LatencyPerToken != r.Seconds/NEW {
			t.Errorf("%s at batch %d: %+v", d.kind, d.b, r)
		}
		if r.PeakBytes != 0 || r.HostFrac != nil || r.Syncs != 0 {
			t.Errorf("%s on the CPU reports device counts: %+v", d.kind, r)
		}
	}
	// 2 groups of 8 samples: each group prefills its prompt once; the 14 others copy all but its last token
	if grpo.PrefillTokens == nil || grpo.SharedTokens == nil || *grpo.PrefillTokens != 2*P+14 || *grpo.SharedTokens != 14*(P-1) {
		t.Errorf("decode-grpo prefix sharing: prefill %v, shared %v; want %d and %d", grpo.PrefillTokens, grpo.SharedTokens, 2*P+14, 14*(P-1))
	}
	if dec.PrefillTokens != nil {
		t.Errorf("greedy decode reports prefix sharing")
	}
}

// benchLines parses the JSON lines `selftest --bench` printed (each logged).
func benchLines(t *testing.T, stdout string) []benchResult {
	t.Helper()
	var got []benchResult
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r benchResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		t.Logf("%s", l)
		got = append(got, r)
	}
	return got
}
