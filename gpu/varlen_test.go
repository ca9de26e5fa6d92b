package gpu

import (
	"strings"
	"testing"
)

func TestCuSeqlens(t *testing.T) {
	cu, maxT := CuSeqlens([]int{3, 0, 5, 2})
	if want := []int32{0, 3, 3, 8, 10}; !equalInt32(cu, want) || maxT != 5 {
		t.Fatalf("CuSeqlens = %v, %d; want %v, 5", cu, maxT, want)
	}
	if err := ValidateSeqlens(cu, 4, 10, 5); err != nil {
		t.Fatal(err)
	}
}

func equalInt32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestValidateSeqlens(t *testing.T) {
	for _, tc := range []struct {
		cu         []int32
		S, N, maxT int
		err        string
	}{
		{[]int32{0, 3}, 2, 3, 4, "2 entries for 2 sequences"},
		{[]int32{1, 3}, 1, 3, 4, "cuSeqlens[0] is 1"},
		{[]int32{0, 3, 2}, 2, 2, 4, "sequence 1 has length -1"},
		{[]int32{0, 5}, 1, 5, 4, "sequence 0 has length 5"},
		{[]int32{0, 3, 4}, 2, 5, 4, "cuSeqlens[2] is 4, want N 5"},
	} {
		err := ValidateSeqlens(tc.cu, tc.S, tc.N, tc.maxT)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ValidateSeqlens(%v, %d, %d, %d) = %v, want %q", tc.cu, tc.S, tc.N, tc.maxT, err, tc.err)
		}
	}
}
