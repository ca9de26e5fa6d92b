package model

import (
	"fmt"

	"github.com/rlhost/rlhost/gpu"
)

// MomentPair is AdamW's first and second moments in a flat layout, tensors of a backend (nil:
// host memory): the state of AdamW, of ValueAdamW and of a rank's shard (dist.ZeRO1).
type MomentPair struct {
	m, v []float32
	be   gpu.Backend
}

// NewMomentPair allocates n zeroed moments of each kind on be; what names the optimizer.
func NewMomentPair(be gpu.Backend, n int, what string) MomentPair {
	return MomentPair{m: be.Alloc(what+" first moments", n), v: be.Alloc(what+" second moments", n), be: be}
}

// Tensors are the moments themselves.
func (p *MomentPair) Tensors() (m, v []float32) { return p.m, p.v }

// Moments returns the first and second moments (host copies), for checkpoints.
func (p *MomentPair) Moments() (m, v []float32) {
	if p.be == nil {
		return p.m, p.v
	}
	m, v = make([]float32, len(p.m)), make([]float32, len(p.v))
	p.be.Download(m, p.m)
	p.be.Download(v, p.v)
	return m, v
}

// LoadMoments sets the moments from host copies of their lengths (a checkpoint's).
func (p *MomentPair) LoadMoments(m, v []float32) error {
	if len(m) != len(p.m) || len(v) != len(p.v) {
		return fmt.Errorf("model: optimizer checkpoint has %d/%d moment values, the optimizer needs %d", len(m), len(v), len(p.m))
	}
	if p.be == nil {
		copy(p.m, m)
		copy(p.v, v)
	} else {
		p.be.Upload(p.m, m)
		p.be.Upload(p.v, v)
	}
	return nil
}

// SetMoments restores the moments and the step count of a checkpoint.
func (o *AdamW) SetMoments(m, v []float32, step int) error {
	if err := o.LoadMoments(m, v); err != nil {
		return err
	}
	o.Step = step
	return nil
}
