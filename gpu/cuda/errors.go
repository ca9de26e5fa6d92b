package cuda

import "errors"

// ErrNotBuilt is returned by New in a binary built without the cuda tag.
var ErrNotBuilt = errors.New("cuda: this binary was built without CUDA support; " +
	"rebuild with `go build -tags cuda` (see docs/gpu.md) on a machine with the CUDA toolkit")

// ErrNoDevice is returned by New when the driver reports no CUDA device.
var ErrNoDevice = errors.New("cuda: no CUDA device found (check nvidia-smi and CUDA_VISIBLE_DEVICES)")

// Error is a failure of the CUDA driver or cuBLAS during an op.
type Error struct {
	Op  string // the gpu.Backend method or setup step
	Err error
}

func (e *Error) Error() string { return "cuda: " + e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrClosed is the error of an op on a Backend after Close.
var ErrClosed = errors.New("the backend is closed")
