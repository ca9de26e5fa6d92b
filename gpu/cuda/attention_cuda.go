//go:build cuda

package cuda

import (
	"sync"

	"gorgonia.org/cu"
)

// smCounts caches each GPU's multiprocessor count (cuDeviceGetAttribute),
// read once per device by flash-decoding (attention.go).
var smCounts sync.Map // cu.Device -> int

// attentionSMs is the GPU's multiprocessor count, 0 if the driver does
// not report it.
func (c *cuDriver) attentionSMs() int {
	if n, ok := smCounts.Load(c.dev); ok {
		return n.(int)
	}
	n, err := c.dev.Attribute(cu.MultiprocessorCount)
	if err != nil {
		n = 0
	}
	smCounts.Store(c.dev, n)
	return n
}
