package cuda

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
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
var windowPlants = []windowPlant{{window: 1}, {window: -1}, {rows: -1}}

// windowPlantsFail runs every case of the window checks on d with each
// plant that changes what the case computes (a window that stays at or
// past every sequence's length changes nothing; rows only the decode
// attention's) and requires the case to fail.
func windowPlantsFail(t *testing.T, d Device) {
	changes := func(w, longest int, p windowPlant) bool {
		return w > 0 && p.window != 0 && min(w, p.win(w)) < longest
	}
	runs := 0
	defer func() { t.Logf("%d planted runs, each failing its check", runs) }()
	expect := func(what string, p windowPlant, err error) {
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
	for i, c := range attentionWindowCases {
		for _, p := range windowPlants {
			if changes(c.window, c.T, p) {
				expect("AttentionWindow case "+strconv.Itoa(i), p, attentionWindowCase(d, i, p))
			}
		}
	}
	for _, prec := range []Precision{FP32, BF16} {
		fwd, bwd, name := 1e-5, 2e-5, "fp32"
		if prec == BF16 {
			fwd, bwd, name = flashMMAFwdTol, flashMMABwdTol, "flash_mma"
		}
		for i, c := range flashWindowCases {
			for _, p := range windowPlants {
				if !changes(c.window, slices.Max(c.lengths), p) {
					continue
				}
				err := withVariant(d, func(v *Variants) { v.FlashSIMT = false }, func() error {
					prev := d.Precision()
					d.SetPrecision(prec)
					defer d.SetPrecision(prev)
					return flashWindowCase(d, uint64(i), c.lengths, c.NH, c.NKV, c.HD, c.window, fwd, bwd, p)
				})
				expect(name+" AttentionVarlenWindow case "+strconv.Itoa(i), p, err)
			}
		}
	}
	for _, path := range []Variants{{}, {DecodeBlock: true}, {DecodeVec: true}} {
		for i, c := range cachedWindowCases {
			for _, p := range windowPlants {
				longest := int(slices.Max(c.pos)) + 1
				if p.rows == 0 && !changes(min(c.window, c.maxT), longest, p) || p.rows == 0 && c.window+p.window > c.maxT {
					continue
				}
				err := refused(func() error {
					return withVariant(d, func(v *Variants) { *v = path }, func() error {
						return cachedWindowCompare(d, []cachedWindowCase{c}, p)
					})
				})
				expect("AttentionCachedWindow "+path.String()+" case "+strconv.Itoa(i), p, err)
			}
		}
	}
	expect("GeGLU", windowPlant{}, geGLUCompare(d, true))
	expect("Softcap", windowPlant{}, softcapCompare(d, 0.1))
}
