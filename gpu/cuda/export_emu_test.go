//go:build cudaemu && !cuda

package cuda

// EmuPlanted is emu.go's emuPlanted: per kernel, the planted defect the
// emulator runs in its place.
var EmuPlanted = emuPlanted
