// Package launch holds what a kernel launch costs the host before the
// driver's call, shared by gpu/cuda's CUDA driver (internal/cudrv) and its
// null device (the host-cost benchmark measures it): the kernels by name
// without hashing a constant name, and the argument slots' pointers in a
// buffer kept between launches.
package launch

import "unsafe"

// KernelTable is a driver's kernels by name, resolved once when the module
// loads (byName). The ops name their kernel by a string constant at every
// launch; hot remembers the kernels seen, open-addressed by the address of
// their name's bytes (up to probes slots from the first), so that a
// constant's launches find their handle by comparing strings whose equal
// pointers make the comparison O(1), without hashing the name. A name
// built at run time has another address: it is found by name in byName
// (and remembered if one of its slots is free; the slot keeps the string,
// so the bytes at a remembered address never change).
type KernelTable[F any] struct {
	byName map[string]F
	hot    [hotSlots]kernelEntry[F]
}

type kernelEntry[F any] struct {
	name string
	f    F
}

// hotSlots is the slots of a KernelTable's hot table (a power of 2), and
// probes the slots a name may take from its first: 8, so that the
// ~50 constants, whose slots follow from where the linker puts their
// bytes, find one unless nine of them land within eight slots (with 4,
// five names in four adjacent slots left one unremembered in a build;
// gpu/cuda's TestKernelTable).
const hotSlots, probes = 256, 8

// NewKernelTable returns an empty table.
func NewKernelTable[F any]() *KernelTable[F] { return &KernelTable[F]{byName: map[string]F{}} }

// Add puts the kernel f under name (when the module loads).
func (t *KernelTable[F]) Add(name string, f F) { t.byName[name] = f }

// Get returns the kernel called name.
func (t *KernelTable[F]) Get(name string) (F, bool) {
	h := (uint64(uintptr(unsafe.Pointer(unsafe.StringData(name)))) * 0x9E3779B97F4A7C15) >> 56 // of hotSlots = 1<<8
	free := -1
	for i := range uint64(probes) {
		e := &t.hot[(h+i)%hotSlots]
		if e.name == "" {
			free = int((h + i) % hotSlots)
			break
		}
		if e.name == name {
			return e.f, true
		}
	}
	f, ok := t.byName[name]
	if ok && free >= 0 && name != "" {
		t.hot[free] = kernelEntry[F]{name, f}
	}
	return f, ok
}

// Remembered reports whether the hot table holds name at its address (a
// constant's launches then hash nothing).
func (t *KernelTable[F]) Remembered(name string) bool {
	for _, e := range t.hot {
		if e.name != "" && unsafe.StringData(e.name) == unsafe.StringData(name) {
			return true
		}
	}
	return false
}

// SlotPointers is the pointer to each argument slot that a launch through
// gorgonia.org/cu passes (its Launch copies 8 bytes from each), in a
// buffer kept between launches.
type SlotPointers []unsafe.Pointer

// Of returns a pointer to each of args' slots, valid until the next call.
func (s *SlotPointers) Of(args []uint64) []unsafe.Pointer {
	p := (*s)[:0]
	for i := range args {
		p = append(p, unsafe.Pointer(&args[i]))
	}
	*s = p
	return p
}
