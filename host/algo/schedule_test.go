package algo

import (
	"math"
	"testing"
)

// TestLRSchedule: the warm-up's line, the cosine's ends and midpoint, the constant after the
// warm-up, no warm-up, and a run no longer than its warm-up (no decay to divide by zero).
func TestLRSchedule(t *testing.T) {
	cos := LRSchedule{LR: 1, WarmupSteps: 2, Cosine: true, MinLRRatio: 0.1}
	constant := LRSchedule{LR: 1, WarmupSteps: 2}
	for _, c := range []struct {
		name        string
		s           LRSchedule
		step, total int
		want        float64
	}{
		{"warm-up step 1", cos, 1, 10, 0.5},
		{"warm-up end", cos, 2, 10, 1},
		{"cosine midpoint", cos, 6, 10, 0.55}, // 0.1 + 0.9 * (1 + cos(pi/2)) / 2
		{"cosine end", cos, 10, 10, 0.1},
		{"cosine after a quarter", cos, 4, 10, 0.1 + 0.9*0.5*(1+math.Cos(math.Pi/4))},
		{"constant warm-up", constant, 1, 10, 0.5},
		{"constant after warm-up", constant, 9, 10, 1},
		{"no warm-up, cosine from step 0", LRSchedule{LR: 2, Cosine: true}, 0, 4, 2},
		{"no warm-up, cosine end", LRSchedule{LR: 2, Cosine: true}, 4, 4, 0},
		{"run within its warm-up", LRSchedule{LR: 1, WarmupSteps: 5, Cosine: true}, 5, 5, 1},
		{"past a warm-up as long as the run", LRSchedule{LR: 1, WarmupSteps: 5, Cosine: true}, 6, 5, 1},
	} {
		if got := c.s.At(c.step, c.total); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: At(%d, %d) = %.15g, want %.15g", c.name, c.step, c.total, got, c.want)
		}
	}
}
