package dist

import (
	"context"
	"fmt"
)

// AllGatherBytes gives every rank each rank's b, in rank order: what the ranks need to agree
// on that is not a tensor (a step's metrics by name, say). It runs on c's float collectives,
// as NCCL would carry it: the longest length (an all-reduce), then each rank's bytes packed
// three to a float32 (exact: below 2^24) behind its length, padded to that size, all-gathered.
func AllGatherBytes(ctx context.Context, c Comm, b []byte) ([][]byte, error) {
	n := []float64{float64(len(b))}
	if err := c.AllReduce64(ctx, n, Max); err != nil {
		return nil, fmt.Errorf("dist: the gathered bytes' length: %w", err)
	}
	words := 1 + (int(n[0])+2)/3
	send := make([]float32, words)
	send[0] = float32(len(b)) // exact up to 2^24 bytes: the check below
	if len(b) >= 1<<24 {
		return nil, fmt.Errorf("dist: %d bytes to gather: at most %d", len(b), 1<<24-1)
	}
	for i := 0; i < len(b); i += 3 {
		var w uint32
		for k := 0; k < 3 && i+k < len(b); k++ {
			w |= uint32(b[i+k]) << (8 * k)
		}
		send[1+i/3] = float32(w)
	}
	recv := make([]float32, words*c.Size())
	if err := c.AllGather(ctx, send, recv); err != nil {
		return nil, fmt.Errorf("dist: gathering bytes: %w", err)
	}
	out := make([][]byte, c.Size())
	for r := range out {
		p := recv[r*words : (r+1)*words]
		m := int(p[0])
		if m < 0 || m > 3*(words-1) {
			return nil, fmt.Errorf("dist: rank %d sent a length of %d bytes in %d words", r, m, words)
		}
		out[r] = make([]byte, m)
		for i := 0; i < m; i++ {
			out[r][i] = byte(uint32(p[1+i/3]) >> (8 * (i % 3)))
		}
	}
	return out, nil
}
