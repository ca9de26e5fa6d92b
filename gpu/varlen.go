package gpu

import "fmt"

// Packed batches: sequences of different lengths laid end to end, as
// flash-attention's varlen functions take them. A packed batch of S sequences
// is described by cuSeqlens [S+1], the cumulative lengths: sequence s is the
// rows cuSeqlens[s] .. cuSeqlens[s+1]-1 of every [N,...] tensor.

// CuSeqlens returns the cumulative lengths [len(lengths)+1] of sequences of
// the given lengths packed end to end, and the longest length.
func CuSeqlens(lengths []int) (cu []int32, maxT int) {
	cu = make([]int32, len(lengths)+1)
	for s, n := range lengths {
		cu[s+1] = cu[s] + int32(n)
		maxT = max(maxT, n)
	}
	return cu, maxT
}

// ValidateSeqlens checks cuSeqlens of a packed batch of S sequences and N
// rows: cuSeqlens[0] is 0, the lengths cuSeqlens[s+1]-cuSeqlens[s] are
// between 0 and maxT, and cuSeqlens[S] is N.
func ValidateSeqlens(cuSeqlens []int32, S, N, maxT int) error {
	if len(cuSeqlens) < S+1 {
		return fmt.Errorf("gpu: cuSeqlens has %d entries for %d sequences, want %d", len(cuSeqlens), S, S+1)
	}
	if cuSeqlens[0] != 0 {
		return fmt.Errorf("gpu: cuSeqlens[0] is %d, want 0", cuSeqlens[0])
	}
	for s := 0; s < S; s++ {
		if n := int(cuSeqlens[s+1] - cuSeqlens[s]); n < 0 || n > maxT {
			return fmt.Errorf("gpu: sequence %d has length %d (cuSeqlens[%d] %d, cuSeqlens[%d] %d), want 0..maxT %d",
				s, n, s, cuSeqlens[s], s+1, cuSeqlens[s+1], maxT)
		}
	}
	if int(cuSeqlens[S]) != N {
		return fmt.Errorf("gpu: cuSeqlens[%d] is %d, want N %d (the rows of the packed batch)", S, cuSeqlens[S], N)
	}
	return nil
}
