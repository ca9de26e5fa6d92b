package cpu

import "unsafe"

// hugePage is the size of a transparent huge page on x86-64 Linux.
const hugePage = 2 << 20

// HugeFloats returns a zeroed []float32 of length n whose memory the kernel is
// asked to back with transparent huge pages (madvise MADV_HUGEPAGE, before
// the pages are first touched). Decode streams every weight once per step:
// with 4 KB pages each page costs a TLB walk and stops the hardware
// prefetcher at its boundary, and on the development machine huge pages made
// a batch-16 decode step about 20% faster (docs/compute.md). Small buffers,
// and systems without transparent huge pages, get plain memory.
func HugeFloats(n int) []float32 { return hugeSlice[float32](n) }

// HugeUint16s is HugeFloats for uint16 (bfloat16 weights).
func HugeUint16s(n int) []uint16 { return hugeSlice[uint16](n) }

// HugeInt8s is HugeFloats for int8 (int8 weights).
func HugeInt8s(n int) []int8 { return hugeSlice[int8](n) }

func hugeSlice[T float32 | uint16 | int8 | uint8](n int) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if n*size < 4*hugePage {
		return make([]T, n)
	}
	b := make([]T, n+hugePage/size) // room to start a whole huge page inside
	adviseHuge(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b)*size))
	return b[:n:n]
}

// hugeRange is the largest range of whole huge pages inside b.
func hugeRange(b []byte) []byte {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (p + hugePage - 1) &^ (hugePage - 1)
	end := (p + uintptr(len(b))) &^ (hugePage - 1)
	if end <= start {
		return nil
	}
	return b[start-p : end-p]
}
