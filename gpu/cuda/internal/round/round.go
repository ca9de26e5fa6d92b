// Package round holds the host's references of the roundings gpu/cuda's
// kernels and cuBLAS apply (bfloat16 and TF32), for the emulator
// (gpu/cuda's cudaemu build) and the checks (gpu/cuda/cudacheck).
package round

import "math"

// BF16 is the CPU reference of gpu/cuda's f32_to_bf16 kernel: the bfloat16
// nearest to x, ties to the one with an even last mantissa bit; values
// beyond the largest finite bfloat16 (after rounding) become infinities,
// a NaN stays a quiet NaN with its sign. It is written independently of the
// kernel's bit trick: it picks between the two bfloat16 neighbours of x.
func BF16(x float32) uint16 {
	u := math.Float32bits(x)
	if x != x {
		return uint16(u>>16) | 0x40
	}
	lo := uint16(u >> 16) // toward zero
	if u&0xffff == 0 {
		return lo
	}
	hi := lo + 1 // away from zero (the next magnitude; 0x7f7f+1 is infinity)
	dl := math.Abs(float64(x) - float64(BF16Float(lo)))
	dh := math.Abs(float64(BF16Float(hi)) - float64(x))
	if hi&0x7fff == 0x7f80 { // rounding up overflows: the distance to 2^128
		dh = math.Abs(math.Ldexp(1, 128)*math.Copysign(1, float64(x)) - float64(x))
	}
	switch {
	case dl < dh:
		return lo
	case dh < dl:
		return hi
	case lo&1 == 0:
		return lo
	}
	return hi
}

// BF16Float widens a bfloat16 to float32 (exact).
func BF16Float(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// BF16s is x with every element rounded to bfloat16 (as float32).
func BF16s(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = BF16Float(BF16(v))
	}
	return y
}

// TF32 rounds x to TF32 (a 10-bit mantissa, fp32's exponent), to
// nearest with ties away from zero, as the PTX conversion cvt.rna.tf32.f32
// does; the emulator's TF32 products read their operands so.
func TF32(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7f800000 == 0x7f800000 { // Inf, NaN
		return x
	}
	u = (u + 0x1000) &^ 0x1fff
	return math.Float32frombits(u)
}

// TF32s is x with every element rounded to TF32.
func TF32s(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = TF32(v)
	}
	return y
}
