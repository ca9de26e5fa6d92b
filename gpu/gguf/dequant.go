package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dequantize decodes src, holding len(dst) elements of type t, into dst.
//
// Block layouts (ggml-common.h) of the simple types, 32 elements per block (the K-quants,
// 256 elements per block, are described at their decoders):
//
//	Q8_0: fp16 d, int8 q[32];              x[j] = q[j]*d
//	Q4_0: fp16 d, u8 qs[16];               x[j] = (qs[j]&15 - 8)*d, x[j+16] = (qs[j]>>4 - 8)*d
//	Q4_1: fp16 d, fp16 m, u8 qs[16];       x[j] = (qs[j]&15)*d + m, x[j+16] = (qs[j]>>4)*d + m
func Dequantize(dst []float32, src []byte, t Type) error {
	n := uint64(len(dst))
	bs, ts := t.BlockSize(), t.TypeSize()
	if !t.CanDequantize() {
		return fmt.Errorf("cannot dequantise ggml type %s (supported: %s)", t, supportedTypes)
	}
	if n%bs != 0 {
		return fmt.Errorf("%d elements is not a multiple of the %s block size %d", n, t, bs)
	}
	if want := n / bs * ts; uint64(len(src)) != want {
		return fmt.Errorf("%d elements of %s need %d bytes, have %d", n, t, want, len(src))
	}
	switch t {
	case F32:
		if littleEndian {
			copy(float32Bytes(dst), src)
			break
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = HalfToFloat(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*34 : b*34+34]
			d := HalfToFloat(binary.LittleEndian.Uint16(blk))
			out := dst[b*32 : b*32+32]
			for j := range out {
				out[j] = float32(int8(blk[2+j])) * d
			}
		}
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*18 : b*18+18]
			d := HalfToFloat(binary.LittleEndian.Uint16(blk))
			out := dst[b*32 : b*32+32]
			for j := 0; j < 16; j++ {
				q := blk[2+j]
				out[j] = float32(int(q&15)-8) * d
				out[j+16] = float32(int(q>>4)-8) * d
			}
		}
	case Q4_1:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*20 : b*20+20]
			d := HalfToFloat(binary.LittleEndian.Uint16(blk))
			m := HalfToFloat(binary.LittleEndian.Uint16(blk[2:]))
			out := dst[b*32 : b*32+32]
			for j := 0; j < 16; j++ {
				q := blk[4+j]
				out[j] = float32(float32(q&15)*d) + m // float32(): no fused multiply-add, as in ggml
				out[j+16] = float32(float32(q>>4)*d) + m
			}
		}
	case Q5_0, Q5_1:
		dequantQ5(dst, src, t == Q5_1)
	case Q4_K, Q5_K:
		dequantQ45K(dst, src, t == Q5_K)
	case Q6_K:
		dequantQ6K(dst, src)
	case Q2_K:
		dequantQ2K(dst, src)
	case Q3_K:
		dequantQ3K(dst, src)
	}
	return nil
}

// dequantQ5 decodes Q5_0 (fp16 d, u32 qh, u8 qs[16]; x = (q-16)*d) and Q5_1 (fp16 d, fp16 m,
// u32 qh, u8 qs[16]; x = q*d + m), where q = low nibble | bit j of qh << 4.
func dequantQ5(dst []float32, src []byte, withMin bool) {
	size := 22
	if withMin {
		size = 24
	}
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*size : b*size+size]
		d := HalfToFloat(binary.LittleEndian.Uint16(blk))
		var m float32
		if withMin {
			m = HalfToFloat(binary.LittleEndian.Uint16(blk[2:]))
			blk = blk[2:]
		}
		qh := binary.LittleEndian.Uint32(blk[2:])
		qs := blk[6:22]
		out := dst[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			x0 := int(qs[j]&15) | int(qh>>j&1)<<4
			x1 := int(qs[j]>>4) | int(qh>>(j+16)&1)<<4
			if withMin {
				out[j] = float32(float32(x0)*d) + m
				out[j+16] = float32(float32(x1)*d) + m
			} else {
				out[j] = float32(x0-16) * d
				out[j+16] = float32(x1-16) * d
			}
		}
	}
}

// scaleMinK4 unpacks the j-th 6-bit scale and min of a Q4_K/Q5_K block (get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// dequantQ45K decodes Q4_K (fp16 d, fp16 dmin, u8 scales[12], u8 qs[128]) and Q5_K (the same
// plus u8 qh[32] before qs): 8 sub-blocks of 32, x = d*sc*q - dmin*m.
func dequantQ45K(dst []float32, src []byte, five bool) {
	size := 144
	if five {
		size = 176
	}
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*size : b*size+size]
		d := HalfToFloat(binary.LittleEndian.Uint16(blk))
		dmin := HalfToFloat(binary.LittleEndian.Uint16(blk[2:]))
		scales := blk[4:16]
		var qh []byte
		ql := blk[16:]
		if five {
			qh, ql = blk[16:48], blk[48:]
		}
		y := dst[b*256 : b*256+256]
		var u1, u2 uint8 = 1, 2
		for j, is := 0, 0; j < 256; j, is = j+64, is+2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := float32(d*float32(sc)), float32(dmin*float32(m))
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := float32(d*float32(sc)), float32(dmin*float32(m))
			q := ql[j/2 : j/2+32]
			for l := 0; l < 32; l++ {
				lo, hi := q[l]&15, q[l]>>4
				if five {
					if qh[l]&u1 != 0 {
						lo += 16
					}
					if qh[l]&u2 != 0 {
						hi += 16
					}
				}
				y[j+l] = float32(d1*float32(lo)) - m1
				y[j+32+l] = float32(d2*float32(hi)) - m2
			}
			u1 <<= 2
			u2 <<= 2
		}
	}
}

// dequantQ6K decodes Q6_K (u8 ql[128], u8 qh[64], i8 scales[16], fp16 d): 16 sub-blocks of 16,
// x = d*scale*(q-32) with 6-bit q.
func dequantQ6K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*210 : b*210+210]
		d := HalfToFloat(binary.LittleEndian.Uint16(blk[208:]))
		y := dst[b*256 : b*256+256]
		for n := 0; n < 2; n++ {
			ql := blk[n*64 : n*64+64]
			qh := blk[128+n*32 : 128+n*32+32]
			sc := blk[192+n*8 : 192+n*8+8]
			yy := y[n*128 : n*128+128]
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int(ql[l]&15|(qh[l]>>0&3)<<4) - 32
				q2 := int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				yy[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				yy[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				yy[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				yy[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
		}
	}
}

// dequantQ2K decodes Q2_K (u8 scales[16], u8 qs[64], fp16 d, fp16 dmin): 16 sub-blocks of 16
// with a 4-bit scale (low nibble) and min (high nibble) each, x = d*sc*q - dmin*m with 2-bit q.
// Byte l of a 32-byte half of qs holds sub-block 2j's element l (l < 16; 2j+1's for l >= 16)
// in bits 2j..2j+1.
func dequantQ2K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*84 : b*84+84]
		scales, qs := blk[:16], blk[16:80]
		d := HalfToFloat(binary.LittleEndian.Uint16(blk[80:]))
		dmin := HalfToFloat(binary.LittleEndian.Uint16(blk[82:]))
		y := dst[b*256 : b*256+256]
		for n, is := 0, 0; n < 2; n++ {
			q := qs[n*32 : n*32+32]
			for shift := uint(0); shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					sc := scales[is]
					is++
					dl, ml := float32(d*float32(sc&15)), float32(dmin*float32(sc>>4))
					for l := 0; l < 16; l++ {
						y[l] = float32(dl*float32(q[half*16+l]>>shift&3)) - ml
					}
					y = y[16:]
				}
			}
		}
	}
}

// dequantQ3K decodes Q3_K (u8 hmask[32], u8 qs[64], u8 scales[12], fp16 d): 16 sub-blocks of
// 16 with a 6-bit signed scale, x = d*(sc-32)*q where q is 2 low bits from qs (laid out as in
// Q2_K) minus 4 where the sub-block's bit of hmask is clear. Scale s has its low 4 bits in
// nibble s/8 of scales[s%8] and its high 2 bits at bit 2*(s/4) of scales[8+s%4].
func dequantQ3K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*110 : b*110+110]
		hmask, qs, scales := blk[:32], blk[32:96], blk[96:108]
		d := HalfToFloat(binary.LittleEndian.Uint16(blk[108:]))
		y := dst[b*256 : b*256+256]
		var m uint8 = 1
		for n, is := 0, 0; n < 2; n++ {
			q := qs[n*32 : n*32+32]
			for shift := uint(0); shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					lo := scales[is%8] >> (4 * uint(is/8)) & 15
					hi := scales[8+is%4] >> (2 * uint(is/4)) & 3
					is++
					dl := d * float32(int(lo|hi<<4)-32)
					for l := 0; l < 16; l++ {
						v := int(q[half*16+l] >> shift & 3)
						if hmask[half*16+l]&m == 0 {
							v -= 4
						}
						y[l] = dl * float32(v)
					}
					y = y[16:]
				}
				m <<= 1
			}
		}
	}
}

// HalfToFloat converts an IEEE 754 binary16 value to float32 exactly (subnormals, infinities
// and NaNs included).
func HalfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0: // signed zero
		return math.Float32frombits(sign)
	}
	// Subnormal: man * 2^-24, exact in float32.
	f := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}
