package trainer

import (
	"fmt"
	"io"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
)

// setPrecision sets how the CUDA backend's products compute
// (actor_rollout_ref.actor.dtype) and says so on progress.
func setPrecision(be gpu.Backend, dtype string, progress io.Writer) error {
	cb, ok := be.(*cuda.Backend)
	if !ok {
		return nil
	}
	p, err := cuda.ParsePrecision(dtype)
	if err != nil {
		return fmt.Errorf("trainer: actor_rollout_ref.actor.dtype: %w", err)
	}
	cb.SetPrecision(p)
	fmt.Fprintf(progress, "products on %s: %s\n", cb.Name(), p.Path())
	return nil
}
