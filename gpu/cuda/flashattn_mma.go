package cuda

// The FlashMMA variant (Variants.FlashMMA, RLHOST_CUDA_VARIANTS=flash_mma):
// the fused attention's products on the bf16 tensor cores
// (kernels/flashattn.cuh, flash_forward_mma; the product kernels/mma.cuh).
// The checks are in flashattn_check.go and mma_check.go.

import (
	"fmt"
	"unsafe"
)

var _ MMAProber = (*Backend)(nil)

// MMAProbe: see MMAProber. One warp per problem, 8 to a block.
func (b *Backend) MMAProbe(d []float32, a, bm []uint32, c []float32, count int) {
	if count <= 0 {
		return
	}
	if len(a) < count*128 || len(bm) < count*64 || len(c) < count*128 || len(d) < count*128 {
		panic(&Error{"MMAProbe", fmt.Errorf("registers for %d problems: a %d (want %d), b %d (%d), c %d and d %d (%d)",
			count, len(a), count*128, len(bm), count*64, len(c), len(d), count*128)})
	}
	b.d.run("MMAProbe", func(ar *arena) {
		pa := ar.stage(unsafe.Pointer(&a[0]), int64(count*128)*4, true, false)
		pb := ar.stage(unsafe.Pointer(&bm[0]), int64(count*64)*4, true, false)
		b.d.launch("mma_bf16_probe", (count+warpsPerBlock-1)/warpsPerBlock, ptr(ar.out(d, count*128)), ptr(pa), ptr(pb),
			ptr(ar.in(c, count*128)), i64(count))
	})
}

// warpsPerBlock is BLOCK/32 of kernels/common.cuh.
const warpsPerBlock = blockSize / 32
