package cuda

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/internal/launch"
)

// TestKernelTable: every kernel is found by its name, whether the name is
// the constant it was added under or a copy of it built at run time
// (another address, maybe another's hot slot); unknown and empty names are
// not found.
func TestKernelTable(t *testing.T) {
	kt := launch.NewKernelTable[int]()
	for i, k := range kernelNames {
		kt.Add(k, i)
	}
	for round := range 2 { // the first round fills the hot slots, the second hits them
		for i, k := range kernelNames {
			if f, ok := kt.Get(k); !ok || f != i {
				t.Fatalf("round %d: get(%q) = %d, %v; want %d", round, k, f, ok, i)
			}
		}
	}
	// every constant is remembered: its launches hash nothing
	for _, k := range kernelNames {
		if !kt.Remembered(k) {
			t.Errorf("%s is not in the hot table", k)
		}
	}
	for round := range 2 {
		for i, k := range kernelNames {
			built := strings.Clone(k) // same bytes, another address
			if unsafe.StringData(built) == unsafe.StringData(k) {
				t.Fatal("strings.Clone kept the address")
			}
			if f, ok := kt.Get(built); !ok || f != i {
				t.Fatalf("round %d: get(copy of %q) = %d, %v; want %d", round, k, f, ok, i)
			}
			if f, ok := kt.Get(k); !ok || f != i {
				t.Fatalf("round %d: get(%q) after a copy = %d, %v; want %d", round, k, f, ok, i)
			}
		}
	}
	for _, k := range []string{"", "no_such_kernel", "rmsnorm_forward "} {
		if f, ok := kt.Get(k); ok {
			t.Errorf("get(%q) = %d, found", k, f)
		}
	}
}

// TestSlotPointers: each pointer addresses its slot, for argument lists of
// every length in turn through one buffer.
func TestSlotPointers(t *testing.T) {
	var s launch.SlotPointers
	for _, n := range []int{3, 0, 20, 1, 7} {
		args := make([]uint64, n)
		for i := range args {
			args[i] = uint64(1000*n + i)
		}
		p := s.Of(args)
		if len(p) != n {
			t.Fatalf("%d pointers for %d slots", len(p), n)
		}
		for i := range p {
			if p[i] != unsafe.Pointer(&args[i]) || *(*uint64)(p[i]) != args[i] {
				t.Fatalf("pointer %d of %d does not address its slot", i, n)
			}
		}
	}
}

// TestTensorsFind holds find (binary search and address hints) to a linear
// scan over the live tensors, through random adds and releases: ranges
// inside a tensor, across two, past the end, in the gaps between, at
// addresses whose hint names a tensor that was released or moved.
func TestTensorsFind(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	var m tensors
	linear := func(h dptr, bytes int64) *tensor {
		for i := range m.live {
			if x := &m.live[i]; h >= x.p && h+dptr(bytes) <= x.p+dptr(x.bytes) {
				return x
			}
		}
		return nil
	}
	const space = 1 << 20
	next := 0
	var probes []dptr // addresses asked before: their hints are set
	for step := range 4000 {
		switch {
		case len(m.live) < 40 && r.IntN(3) > 0: // add a tensor, in address order or in a gap
			at := dptr(0x10000 + 256*r.IntN(space/256))
			bytes := int64(256 * (1 + r.IntN(16)))
			if linear(at, 1) != nil || linear(at+dptr(bytes)-1, 1) != nil ||
				slices.ContainsFunc(m.live, func(x tensor) bool { return x.p >= at && x.p < at+dptr(bytes) }) {
				continue
			}
			next++
			m.add(tensor{p: at, bytes: bytes, name: "t" + string(rune('a'+next%26))})
		case len(m.live) > 0 && r.IntN(4) == 0: // release one
			i := r.IntN(len(m.live))
			m.live = slices.Delete(m.live, i, i+1)
		}
		for range 8 {
			var h dptr
			if len(probes) > 0 && r.IntN(2) == 0 {
				h = probes[r.IntN(len(probes))]
			} else if len(m.live) > 0 && r.IntN(4) > 0 {
				x := m.live[r.IntN(len(m.live))]
				h = x.p + dptr(4*r.IntN(int(x.bytes)/4))
			} else {
				h = dptr(0x10000 + 4*r.IntN(space/4))
			}
			probes = append(probes, h)
			bytes := int64(4 * (1 + r.IntN(96)))
			want := linear(h, bytes)
			p, got := m.find(*(*unsafe.Pointer)(unsafe.Pointer(&h)), bytes)
			if got != want || (got != nil && p != h) || (got == nil && p != 0) {
				t.Fatalf("step %d: find(%#x, %d) = %#x, %v; want %v", step, uintptr(h), bytes, uintptr(p), got, want)
			}
		}
	}
}
