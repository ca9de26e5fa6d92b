package cpu

// Memory on the CPU: a tensor is an ordinary slice (gpu.Memory).

// Alloc returns n zeroed floats (huge pages for large tensors, HugeFloats).
func (Backend) Alloc(name string, n int) []float32 { return HugeFloats(n) }

// AllocInt32 returns n zeroed int32.
func (Backend) AllocInt32(name string, n int) []int32 { return make([]int32, n) }

// Free does nothing: the garbage collector reclaims the slice.
func (Backend) Free(x any) {}

// Upload copies src into dst.
func (Backend) Upload(dst, src []float32) { copy(dst, src) }

// UploadInt32 copies src into dst.
func (Backend) UploadInt32(dst, src []int32) { copy(dst, src) }

// Download copies src into dst.
func (Backend) Download(dst, src []float32) { copy(dst, src) }

// Zero clears x.
func (Backend) Zero(x []float32) { clear(x) }

// Copy copies src into dst.
func (Backend) Copy(dst, src []float32) { copy(dst, src) }

// GatherRows: out[m,:] = inp[rows[m],:].
func (Backend) GatherRows(out, inp []float32, rows []int32, M, C int) {
	for m, r := range rows[:M] {
		copy(out[m*C:(m+1)*C], inp[int(r)*C:(int(r)+1)*C])
	}
}

// ScatterRows: out[rows[m],:] = inp[m,:].
func (Backend) ScatterRows(out, inp []float32, rows []int32, M, C int) {
	for m, r := range rows[:M] {
		copy(out[int(r)*C:(int(r)+1)*C], inp[m*C:(m+1)*C])
	}
}
