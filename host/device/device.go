package device

import (
	"fmt"
	"io"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/cuda"
)

// Open returns the backend of trainer.device: gpu/cpu for cpu, gpu/cuda for
// cuda with its products computing as dtype, the value of the key dtypeKey,
// says (SetPrecision). On cpu dtype is not read: the CPU computes in float32.
// An untagged build refuses cuda with cuda.ErrNotBuilt.
func Open(name, dtypeKey, dtype string, progress io.Writer) (gpu.Backend, error) {
	switch name {
	case "cpu":
		return cpu.New(), nil
	case "cuda":
		be, err := cuda.New()
		if err != nil {
			return nil, fmt.Errorf("trainer.device=cuda: %w", err)
		}
		if err := SetPrecision(be, dtypeKey, dtype, progress); err != nil {
			return nil, err
		}
		return be, nil
	}
	return nil, fmt.Errorf("trainer.device=%q: want cpu or cuda", name)
}

// SetPrecision sets how the CUDA backend's products compute from dtype
// (float32, tf32 or bfloat16; cuda.ParsePrecision), the value of the key
// dtypeKey, and prints the path that runs on progress. Other backends are
// left as they are and nothing is printed; an unknown dtype is an error
// naming the key.
func SetPrecision(be gpu.Backend, dtypeKey, dtype string, progress io.Writer) error {
	cb, ok := be.(*cuda.Backend)
	if !ok {
		return nil
	}
	p, err := cuda.ParsePrecision(dtype)
	if err != nil {
		return fmt.Errorf("%s: %w", dtypeKey, err)
	}
	cb.SetPrecision(p)
	fmt.Fprintf(progress, "products on %s: %s\n", cb.Name(), p.Path())
	return nil
}
