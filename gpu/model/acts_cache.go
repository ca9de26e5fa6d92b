package model

// ActsCache keeps activation buffers for a loop over micro-batches of varying shapes. A batch
// is served by any held activations it fits (Acts.Fits: at least its rows and, padded, its
// T), the smallest such; when none fits, activations of the batch's own shape are allocated,
// and the held ones they make redundant (of the same kind, no more rows and no longer T) are
// freed first. Packed micro-batches, whose row counts vary with every step, so settle on one
// buffer of the largest rows seen instead of re-allocating (device memory is not collected
// by Go's garbage collector, and on the CPU each fresh buffer is page-faulted in again). It
// holds at most Max buffers; when a new one would pass that bound, all are freed first.
type ActsCache struct {
	m    *Model
	max  int
	held []*Acts
}

// NewActsCache returns an empty cache of m's activations holding at most max buffers (at
// least 1).
func NewActsCache(m *Model, max int) *ActsCache {
	return &ActsCache{m: m, max: max}
}

// Get returns activations that fit a B x T right-padded batch, allocating them when none held
// does.
func (c *ActsCache) Get(B, T int) *Acts { return c.For(Batch{B: B, T: T}) }

// For returns activations that fit the batch b (Acts.Fits), allocating them when none held
// does: packed activations of b.T rows for a packed batch (b.Lengths), NewActs(b.B, b.T)
// otherwise.
func (c *ActsCache) For(b Batch) *Acts {
	var a *Acts
	a, c.held = cacheFor(c.held, func(a *Acts) *Acts { return a }, b, c.max, func() *Acts {
		if b.Lengths != nil {
			return c.m.NewPackedActs(b.T)
		}
		return c.m.NewActs(b.B, b.T)
	}, (*Acts).Free)
	return a
}

// Free releases every buffer the cache holds; the cache stays usable.
func (c *ActsCache) Free() {
	for _, a := range c.held {
		a.Free()
	}
	c.held = nil
}

// ValueActsCache is ActsCache for a critic's activations (ValueActs).
type ValueActsCache struct {
	v    *ValueModel
	max  int
	held []*ValueActs
}

// NewValueActsCache returns an empty cache of v's activations holding at most max buffers.
func NewValueActsCache(v *ValueModel, max int) *ValueActsCache {
	return &ValueActsCache{v: v, max: max}
}

// For returns a critic's activations that fit the batch b, allocating them when none held
// does (see ActsCache.For).
func (c *ValueActsCache) For(b Batch) *ValueActs {
	var a *ValueActs
	a, c.held = cacheFor(c.held, func(a *ValueActs) *Acts { return a.acts }, b, c.max, func() *ValueActs {
		if b.Lengths != nil {
			return c.v.NewPackedActs(b.T)
		}
		return c.v.NewActs(b.B, b.T)
	}, (*ValueActs).Free)
	return a
}

// Free releases every buffer the cache holds; the cache stays usable.
func (c *ValueActsCache) Free() {
	for _, a := range c.held {
		a.Free()
	}
	c.held = nil
}

// cacheFor is the policy of ActsCache.For over held buffers X whose activations acts gives:
// the smallest held that fits b, or a new one (alloc) after freeing the held ones it makes
// redundant, or all of them when limit (at least 1) would be passed. It returns the buffer and
// the buffers now held.
func cacheFor[X any](held []X, acts func(X) *Acts, b Batch, limit int, alloc func() X, free func(X)) (X, []X) {
	best := -1
	for i, x := range held {
		if a := acts(x); a.Fits(b) && (best < 0 || a.rows < acts(held[best]).rows) {
			best = i
		}
	}
	if best >= 0 {
		return held[best], held
	}
	// the new buffer serves every batch a held one of its kind with no more rows and no
	// longer T served
	keep := held[:0]
	for _, x := range held {
		if a := acts(x); a.packed == (b.Lengths != nil) && a.rows <= b.B*b.T && (a.packed || a.maxT <= b.T) {
			free(x)
			continue
		}
		keep = append(keep, x)
	}
	held = keep
	if len(held) >= max(limit, 1) {
		for _, x := range held {
			free(x)
		}
		held = held[:0]
	}
	x := alloc()
	return x, append(held, x)
}
