package cpu

import "syscall"

// adviseHuge asks for transparent huge pages over the whole huge pages of b;
// failure (no THP support) leaves ordinary pages.
func adviseHuge(b []byte) {
	if r := hugeRange(b); len(r) > 0 {
		_ = syscall.Madvise(r, syscall.MADV_HUGEPAGE)
	}
}
