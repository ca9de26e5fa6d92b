//go:build cudaemu && !cuda

package emu

import (
	"syscall"
	"testing"
	"unsafe"
)

// TestEmulatorAllocator: the emulated device's allocator reuses freed
// blocks (lowest first fit, neighbours merged), hands out zeroed memory,
// and when the top block is freed gives the pages above the used range
// back to the system (none of them stays resident).
func TestEmulatorAllocator(t *testing.T) {
	m := &Memory{}
	defer m.Close()
	m.Enter()
	defer m.Leave()
	alloc := func(n int64) uintptr {
		p, err := m.Malloc(n)
		if err != nil {
			t.Fatal(err)
		}
		b := unsafe.Slice((*byte)(addr(p)), n)
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("block of %d bytes at %#x: byte %d is %d, want 0", n, p, i, b[i])
			}
		}
		for i := range b {
			b[i] = 0xAB // dirty it
		}
		return p
	}
	free := func(p uintptr) {
		if err := m.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	const big = 16 << 20
	a, b, c := alloc(1000), alloc(big), alloc(3000)
	if b != a+1024 || c != b+big {
		t.Fatalf("blocks at %#x, %#x, %#x: not packed at 256-byte alignment", a, b, c)
	}
	free(a)
	free(b) // merges with a's span
	if p := alloc(big + 1000); p != a {
		t.Errorf("a block of a's and b's size together at %#x, want %#x (their merged span)", p, a)
	} else {
		free(p)
	}
	if p := alloc(200); p != a {
		t.Errorf("a small block at %#x, want the lowest free span %#x", p, a)
	} else {
		free(p)
	}
	if got := m.top; got != int(c-a)+3072 {
		t.Errorf("top %d with c live, want %d", got, int(c-a)+3072)
	}
	if err := m.Free(a + 256); err == nil {
		t.Error("freeing an address that is no block succeeded")
	}
	free(c) // the top block: everything is free now
	if m.top != 0 || len(m.spans) != 0 || len(m.live) != 0 {
		t.Errorf("all freed: top %d, spans %v, %d live; want 0, none, 0", m.top, m.spans, len(m.live))
	}
	if n := residentPages(t, m.region[:big+8192]); n != 0 {
		t.Errorf("all freed: %d pages of the device still resident, want 0", n)
	}
	alloc(big) // zeroed again (alloc checks)
}

// residentPages counts the pages of b in memory (mincore).
func residentPages(t *testing.T, b []byte) int {
	vec := make([]byte, (len(b)+pageSize-1)/pageSize)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
