package cudacheck_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestWindowChecksPlanted: the window checks, run with gpu/cpu in the
// device's place, pass unplanted (TestChecksPassOnReference) and fail on
// every case that a plant changes: the device's op launched with the
// window off by one either way, or (the decode attention) a cache's rows
// one short, against the reference's true values; the GeGLU and soft-cap
// checks fail with gate and up swapped and with the cap off.
// window_emu_test.go plants the same on the kernels.
func TestWindowChecksPlanted(t *testing.T) { windowPlantsFail(t, &cpuDevice{}) }

// windowPlants are the off-by-ones planted: the window one longer, one
// shorter, and a cache's rows one short.
var windowPlants = []cudacheck.WindowPlant{{Window: 1}, {Window: -1}, {Rows: -1}}

// windowPlantsFail runs every case of the window checks on d with each
// plant that changes what the case computes (a window that stays at or
// past every sequence's length changes nothing; rows only the decode
// attention's) and requires the case to fail.
func windowPlantsFail(t *testing.T, d cudacheck.Device) {
	changes := func(w, longest int, p cudacheck.WindowPlant) bool {
		return w > 0 && p.Window != 0 && min(w, p.Win(w)) < longest
	}
	runs := 0
	defer func() { t.Logf("%d planted runs, each failing its check", runs) }()
	expect := func(what string, p cudacheck.WindowPlant, err error) {
		t.Helper()
		runs++
		if err == nil {
			t.Errorf("%s, %+v planted: the check passed", what, p)
		}
	}
	// a launch the device refuses (gpu/cpu panics on positions past a
	// slot's rows) fails the check too
	refused := func(f func() error) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("refused: %v", r)
			}
		}()
		return f()
	}
	for i, c := range cudacheck.AttentionWindowCases {
		for _, p := range windowPlants {
			if changes(c.Window, c.T, p) {
				expect("AttentionWindow case "+strconv.Itoa(i), p, cudacheck.AttentionWindowCase(d, i, p))
			}
		}
	}
	for _, prec := range []cuda.Precision{cuda.FP32, cuda.BF16} {
		fwd, bwd, name := 1e-5, 2e-5, "fp32"
		if prec == cuda.BF16 {
			fwd, bwd, name = cudacheck.FlashMMAFwdTol, cudacheck.FlashMMABwdTol, "flash_mma"
		}
		for i, c := range cudacheck.FlashWindowCases {
			for _, p := range windowPlants {
				if !changes(c.Window, slices.Max(c.Lengths), p) {
					continue
				}
				prev := d.Precision()
				d.SetPrecision(prec)
				err := cudacheck.FlashWindowCase(d, uint64(i), c.Lengths, c.NH, c.NKV, c.HD, c.Window, fwd, bwd, p)
				d.SetPrecision(prev)
				expect(name+" AttentionVarlenWindow case "+strconv.Itoa(i), p, err)
			}
		}
	}
	for i, c := range cudacheck.CachedWindowCases {
		for _, p := range windowPlants {
			longest := int(slices.Max(c.Pos)) + 1
			if p.Rows == 0 && !changes(min(c.Window, c.MaxT), longest, p) || p.Rows == 0 && c.Window+p.Window > c.MaxT {
				continue
			}
			err := refused(func() error {
				return cudacheck.CachedWindowCompare(d, []cudacheck.CachedWindowCase{c}, p)
			})
			expect("AttentionCachedWindow case "+strconv.Itoa(i), p, err)
		}
	}
	expect("GeGLU", cudacheck.WindowPlant{}, cudacheck.GeGLUCompare(d, true))
	expect("Softcap", cudacheck.WindowPlant{}, cudacheck.SoftcapCompare(d, 0.1))
}
