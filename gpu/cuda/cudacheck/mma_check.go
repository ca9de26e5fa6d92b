package cudacheck

// The check of the tensor-core product (kernels/mma.cuh): the fragment
// layouts of mma.sync m16n8k16 with bf16 operands, written out here from
// the PTX ISA's tables apart from the kernels and the emulator, against
// the device's product of row-major matrices. On a GPU it tests the
// hardware, on the emulator the emulation (emu.h); the kernels that use
// the product (the FlashMMA attention) are checked through their own ops.

import (
	"fmt"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu/cuda/internal/round"
)

// MMAProber is a device whose kernels can run the bf16 tensor-core
// product on registers laid out by the caller (*Backend: kernel
// mma_bf16_probe).
type MMAProber interface {
	// MMAProbe runs count products of one warp each: per problem p and lane
	// l, registers a[(p*32+l)*4+i] (i < 4), b[(p*32+l)*2+i] (i < 2) and the
	// accumulators c[(p*32+l)*4+i] in, d[(p*32+l)*4+i] out.
	MMAProbe(d []float32, a, b []uint32, c []float32, count int)
}

// MmaA, mmaB and mmaC locate element i of a lane's fragment of A [16x16]
// (a0..a7: register i/2, half i%2, the low half first), B [16x8] (b0..b3)
// and C or D [16x8] (c0..c3: one register each), as the PTX ISA's section
// "Matrix Fragments for mma.m16n8k16 with floating point type" states them
// for .bf16 operands and .f32 accumulators, with groupID = lane>>2 and
// threadID_in_group = lane%4.
func MmaA(lane, i int) (row, col int) {
	g, t := lane>>2, lane%4
	row = g
	if !(i < 2 || (4 <= i && i < 6)) {
		row = g + 8
	}
	col = t*2 + (i & 1)
	if i >= 4 {
		col += 8
	}
	return row, col
}

func MmaB(lane, i int) (row, col int) {
	g, t := lane>>2, lane%4
	row = t*2 + (i & 1)
	if i >= 2 {
		row += 8
	}
	return row, g
}

func MmaC(lane, i int) (row, col int) {
	g, t := lane>>2, lane%4
	row = g
	if i >= 2 {
		row = g + 8
	}
	return row, t*2 + (i & 1)
}

// CheckMMAFragments lays out count random products A [16x16] B [16x8] + C
// in registers by the tables above, runs them on the device and requires D
// exactly: the entries are small integers, so every product and sum is
// exact in fp32 whatever order the tensor cores add in. A device without
// the product (the CPU reference) has nothing to check.
func CheckMMAFragments(dev Device) error {
	p, ok := dev.(MMAProber)
	if !ok {
		return nil
	}
	const count = 11 // more than one block's 8 warps
	r := rand.New(rand.NewPCG(27, 27))
	type problem struct {
		A    [16][16]float32
		B, C [16][8]float32
	}
	probs := make([]problem, count)
	small := func() float32 { return float32(r.IntN(17) - 8) }
	a, b := make([]uint32, count*32*4), make([]uint32, count*32*2)
	c, d := make([]float32, count*32*4), make([]float32, count*32*4)
	for n := range probs {
		pr := &probs[n]
		for i := range pr.A {
			for j := range pr.A[i] {
				pr.A[i][j] = small()
			}
		}
		for i := range pr.B {
			for j := range pr.B[i] {
				pr.B[i][j], pr.C[i][j] = small(), small()*16
			}
		}
		for lane := 0; lane < 32; lane++ {
			at := (n*32 + lane)
			for i := 0; i < 8; i++ {
				row, col := MmaA(lane, i)
				a[at*4+i/2] |= uint32(round.BF16(pr.A[row][col])) << (16 * (i % 2))
			}
			for i := 0; i < 4; i++ {
				row, col := MmaB(lane, i)
				b[at*2+i/2] |= uint32(round.BF16(pr.B[row][col])) << (16 * (i % 2))
				row, col = MmaC(lane, i)
				c[at*4+i] = pr.C[row][col]
			}
		}
	}
	for i := range d {
		d[i] = float32(r.NormFloat64() * 1e6) // poisoned: every element must be written
	}
	p.MMAProbe(d, a, b, c, count)
	for n := range probs {
		pr := &probs[n]
		for lane := 0; lane < 32; lane++ {
			for i := 0; i < 4; i++ {
				row, col := MmaC(lane, i)
				want := pr.C[row][col]
				for k := 0; k < 16; k++ {
					want += pr.A[row][k] * pr.B[k][col]
				}
				if got := d[(n*32+lane)*4+i]; got != want {
					return fmt.Errorf("mma problem %d: lane %d d[%d] (D[%d][%d]) = %g, want %g", n, lane, i, row, col, got, want)
				}
			}
		}
	}
	return nil
}
