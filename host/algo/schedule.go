package algo

import "math"

// LRSchedule is the learning-rate schedule of an optimiser, the one `rlhost train` (the actor
// and the critic) and `rlhost sft` use: a linear warm-up over WarmupSteps optimiser steps, then
// the rate LR, constant or, with Cosine, decaying along a half cosine to MinLRRatio*LR at the
// last step. Step 1 of a warm-up has LR/WarmupSteps (transformers' schedulers start at 0).
type LRSchedule struct {
	LR          float64
	WarmupSteps int     // steps of linear warm-up; 0: none
	Cosine      bool    // decay after the warm-up; false: constant
	MinLRRatio  float64 // the cosine's final rate as a fraction of LR
}

// At is the learning rate of optimiser step step (1-based) of a run of total steps: during the
// warm-up LR*step/WarmupSteps, then LR or, with Cosine,
// min + (LR-min) * (1 + cos(pi * (step-WarmupSteps)/(total-WarmupSteps))) / 2 with
// min = MinLRRatio*LR.
func (s LRSchedule) At(step, total int) float64 {
	warm := s.WarmupSteps
	if warm > 0 && step <= warm {
		return s.LR * float64(step) / float64(warm)
	}
	if s.Cosine && total > warm {
		p := float64(step-warm) / float64(total-warm)
		lo := s.LR * s.MinLRRatio
		return lo + (s.LR-lo)*0.5*(1+math.Cos(math.Pi*p))
	}
	return s.LR
}
