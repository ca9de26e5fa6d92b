package cpu

/*
#include "pool.h"
*/
import "C"

// poolCheck runs jobs jobs of n parts on the C thread pool and returns how
// many times each part ran (each must have run jobs times).
func poolCheck(n, jobs int) []int {
	c := make([]C.int, n)
	C.rl_pool_check(&c[0], C.int(n), C.int(jobs))
	out := make([]int, n)
	for i, x := range c {
		out[i] = int(x)
	}
	return out
}
