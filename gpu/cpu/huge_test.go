package cpu

import (
	"testing"
	"unsafe"
)

// The huge-page buffers have the length asked for, are zero, and the range
// given to madvise is whole, aligned huge pages inside the buffer.
func TestHugeBuffers(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 3 << 20, 5<<20 + 7} {
		f, u, i := HugeFloats(n), HugeUint16s(n), HugeInt8s(n)
		if len(f) != n || cap(f) != n || len(u) != n || len(i) != n {
			t.Fatalf("n=%d: lengths %d %d %d", n, len(f), len(u), len(i))
		}
		for j := range f {
			if f[j] != 0 || u[j] != 0 || i[j] != 0 {
				t.Fatalf("n=%d: element %d not zero", n, j)
			}
		}
	}
	b := make([]byte, 9<<20)
	r := hugeRange(b[3:])
	p0, p := uintptr(unsafe.Pointer(&b[3])), uintptr(unsafe.Pointer(&r[0]))
	if p%hugePage != 0 || len(r)%hugePage != 0 || len(r) < 6<<20 || p < p0 || p+uintptr(len(r)) > p0+uintptr(len(b)-3) {
		t.Fatalf("huge range [%#x, +%d) of [%#x, +%d)", p, len(r), p0, len(b)-3)
	}
	if len(hugeRange(b[:1<<20])) != 0 {
		t.Fatal("a 1 MB buffer has a whole huge page")
	}
}
