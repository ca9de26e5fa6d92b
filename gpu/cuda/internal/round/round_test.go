package round

import (
	"math"
	"testing"
)

// The references against values worked out by hand: bfloat16 keeps 8 significant bits (ties
// to an even last bit, overflow to infinity, NaN quiet), TF32 11 (ties away from zero).
func TestBF16(t *testing.T) {
	for _, tc := range []struct {
		x    float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // halfway, 0x3f80 even: down
		{math.Float32frombits(0x3f818000), 0x3f82}, // halfway, 0x3f81 odd: up
		{math.Float32frombits(0x3f808001), 0x3f81}, // past halfway: up
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // the largest float32 rounds to infinity
		{float32(math.Inf(-1)), 0xff80},
		{0, 0},
	} {
		if got := BF16(tc.x); got != tc.want {
			t.Errorf("BF16(%g = %#08x) = %#04x, want %#04x", tc.x, math.Float32bits(tc.x), got, tc.want)
		}
	}
	nan := BF16(float32(math.NaN()))
	if BF16Float(nan) == BF16Float(nan) || nan&0x40 == 0 {
		t.Errorf("BF16(NaN) = %#04x: not a quiet NaN", nan)
	}
	if got := BF16s([]float32{1, 3.140625, 1e-3}); got[0] != 1 || got[1] != 3.140625 || got[2] != BF16Float(BF16(1e-3)) {
		t.Errorf("BF16s = %v", got)
	}
}

func TestTF32(t *testing.T) {
	for _, tc := range []struct{ in, want uint32 }{
		{0x3f800000, 0x3f800000},
		{0x3f801000, 0x3f802000}, // halfway: away from zero
		{0x3f800fff, 0x3f800000}, // below halfway: down
		{0xbf801000, 0xbf802000}, // negative halfway: away from zero
		{0x7f800000, 0x7f800000}, // infinity kept
	} {
		if got := math.Float32bits(TF32(math.Float32frombits(tc.in))); got != tc.want {
			t.Errorf("TF32(%#08x) = %#08x, want %#08x", tc.in, got, tc.want)
		}
	}
	if got := TF32s([]float32{1, 2}); got[0] != 1 || got[1] != 2 {
		t.Errorf("TF32s = %v", got)
	}
}
