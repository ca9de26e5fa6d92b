//go:build !cudaemu

package model

// PlantDecodePadding names a defect planted in the padding of decode steps
// (decodeBucket), settable in emulator builds (-tags cudaemu) for their
// tests; "" (none) in every other build.
const PlantDecodePadding = ""
