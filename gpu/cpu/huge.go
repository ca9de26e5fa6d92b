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
func HugeFloats(n int) []float32 {
	if n*4 < 4*hugePage {
		return make([]float32, n)
	}
	b := make([]float32, n+hugePage/4)
	adviseHuge(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b)*4))
	return b[:n:n]
}

// HugeUint16s is HugeFloats for uint16 (bfloat16 weights).
func HugeUint16s(n int) []uint16 {
	if n*2 < 4*hugePage {
		return make([]uint16, n)
	}
	b := make([]uint16, n+hugePage/2)
	adviseHuge(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b)*2))
	return b[:n:n]
}

// HugeInt8s is HugeFloats for int8 (int8 weights).
func HugeInt8s(n int) []int8 {
	if n < 4*hugePage {
		return make([]int8, n)
	}
	b := make([]int8, n+hugePage)
	adviseHuge(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b)))
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
