//go:build cudaemu

package model

// PlantDecodePadding names a defect planted in the padding of decode steps
// (a planted bug for the emulator tests, gpu/cuda/graph_emu_test.go; never
// set otherwise): "slot0" pads in slot 0, position 0 (a request's first
// prompt token) instead of the padding's own slot; "tail" returns the last
// rows' logits of a padded step (the padding's among them) instead of the
// real rows'. Outside emulator builds it is the constant "".
var PlantDecodePadding string
