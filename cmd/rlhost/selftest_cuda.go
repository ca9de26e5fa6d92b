//go:build cuda

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/urfave/cli/v2"
)

// selftestCUDA runs every check of gpu/cuda against the CPU backend.
func selftestCUDA(w io.Writer) error {
	be, err := cuda.Open(0)
	if err != nil {
		return cli.Exit("selftest: "+err.Error(), 1)
	}
	fmt.Fprintf(w, "device %s, cuBLAS %s\n", be.Name(), be.CublasLibrary())
	for _, p := range []cuda.Precision{cuda.BF16, cuda.TF32, cuda.FP32} {
		fmt.Fprintf(w, "products %s\n", p.Path())
	}
	fmt.Fprintln(w, "(bfloat16 is the default of actor_rollout_ref.actor.dtype; the checks *BF16 and *TF32 compare those paths with the fp32 CPU backend)")
	failed := 0
	for _, c := range cudacheck.Checks {
		start := time.Now()
		err := c.Do(be)
		if err != nil {
			failed++
			fmt.Fprintf(w, "FAIL %-20s %v\n", c.Name, err)
			continue
		}
		fmt.Fprintf(w, "ok   %-20s %v\n", c.Name, time.Since(start).Round(time.Millisecond))
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("selftest: %d of %d CUDA checks disagree with the CPU backend", failed, len(cudacheck.Checks)), 1)
	}
	fmt.Fprintf(w, "all %d CUDA checks agree with the CPU backend\n", len(cudacheck.Checks))
	return nil
}
