//go:build !cuda

package main

import (
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
