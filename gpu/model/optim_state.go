package model

import "fmt"

// Moments returns the optimizer's first and second moments (host copies, in
// the parameters' flat layout), for checkpoints.
func (o *AdamW) Moments() (m, v []float32) {
	if o.be == nil {
		return o.m, o.v
	}
	m, v = make([]float32, len(o.m)), make([]float32, len(o.v))
	o.be.Download(m, o.m)
	o.be.Download(v, o.v)
	return m, v
}

// SetMoments restores the moments and the step count of a checkpoint.
func (o *AdamW) SetMoments(m, v []float32, step int) error {
	if len(m) != len(o.m) || len(v) != len(o.v) {
		return fmt.Errorf("model: optimizer checkpoint has %d/%d moment values, the model needs %d", len(m), len(v), len(o.m))
	}
	if o.be == nil {
		copy(o.m, m)
		copy(o.v, v)
	} else {
		o.be.Upload(o.m, m)
		o.be.Upload(o.v, v)
	}
	o.Step = step
	return nil
}
