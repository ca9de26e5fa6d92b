package model

// ActsCache keeps activation buffers per batch shape (B x T), so that a loop over micro-batches
// of a few shapes allocates each shape once. It holds at most Max shapes; when a new shape
// would pass that bound, the buffers it holds are freed first (device memory is not collected
// by Go's garbage collector).
type ActsCache struct {
	m     *Model
	max   int
	byKey map[[2]int]*Acts
}

// NewActsCache returns an empty cache of m's activations holding at most max shapes (at least 1).
func NewActsCache(m *Model, max int) *ActsCache {
	if max < 1 {
		max = 1
	}
	return &ActsCache{m: m, max: max, byKey: map[[2]int]*Acts{}}
}

// Get returns the activations for a B x T batch, allocating them on first use.
func (c *ActsCache) Get(B, T int) *Acts {
	k := [2]int{B, T}
	if a, ok := c.byKey[k]; ok {
		return a
	}
	if len(c.byKey) >= c.max {
		c.Free()
	}
	a := c.m.NewActs(B, T)
	c.byKey[k] = a
	return a
}

// For returns the activations for the batch b: Get(b.B, b.T), or for a packed batch
// (b.Lengths) packed activations of b.T rows (NewPackedActs), kept under their own key.
func (c *ActsCache) For(b Batch) *Acts {
	if b.Lengths == nil {
		return c.Get(b.B, b.T)
	}
	k := [2]int{0, b.T}
	if a, ok := c.byKey[k]; ok {
		return a
	}
	if len(c.byKey) >= c.max {
		c.Free()
	}
	a := c.m.NewPackedActs(b.T)
	c.byKey[k] = a
	return a
}

// Free releases every buffer the cache holds; the cache stays usable.
func (c *ActsCache) Free() {
	for _, a := range c.byKey {
		a.Free()
	}
	c.byKey = map[[2]int]*Acts{}
}
