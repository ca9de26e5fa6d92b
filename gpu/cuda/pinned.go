package cuda

import (
	"fmt"
	"time"
	"unsafe"
)

// Uploads through page-locked memory.
//
// A copy from pageable host memory is not asynchronous on a GPU: the
// driver must first stage the bytes in page-locked memory of its own, and
// it "may synchronize with the stream" to do so (the CUDA runtime's "API
// synchronization behavior"), so a cuMemcpyHtoDAsync queued behind work
// can hold the host until the stream reaches it. The training step's
// inputs are uploaded while the previous micro-batch's backward is still
// queued, so that wait would fall in the host's time, where the counters
// do not see it. The device therefore uploads through a buffer of
// page-locked memory of its own (cuMemAllocHost): the host copies src
// there (a memcpy) and queues the copy from it, which returns at once.
//
// The buffer is handed out front to back, each upload its own bytes, and
// is whole again when the stream is synchronised (every copy queued
// before has then read its bytes). An upload that does not fit in what is
// left synchronises first (counted with the others) and starts again at
// the front; one larger than pinnedLargest goes from its own memory as
// before (the weights at load).

// pinner is a driver that can allocate page-locked host memory (the CUDA
// driver, the emulator, the null device): a copy from it to the device
// reads its bytes when the stream reaches the copy, not when it is queued.
type pinner interface {
	hostAlloc(bytes int64) (unsafe.Pointer, error)
	hostFree(p unsafe.Pointer) error
}

const (
	// pinnedSize is the device's page-locked upload buffer.
	pinnedSize = 16 << 20
	// pinnedLargest is the largest upload made through it.
	pinnedLargest = 4 << 20
	// pinnedAlign is where each upload starts in it.
	pinnedAlign = 256
)

// PinnedEnv, set to 0 when a device opens, makes its uploads go from the
// caller's (pageable) memory, as they did before the page-locked buffer
// (A/B timings; Backend.SetPinnedUploads does the same).
const PinnedEnv = "RLHOST_CUDA_PINNED"

func pinnedOffFromEnv() (bool, error) { return offFromEnv(PinnedEnv) }

// pinned is a device's page-locked upload buffer.
type pinned struct {
	off   bool           // uploads go from the caller's memory (PinnedEnv, SetPinnedUploads)
	tried bool           // the buffer was asked for (on the first upload)
	buf   unsafe.Pointer // nil when the driver has none or could not allocate it
	from  pinner         // the driver that allocated buf
	used  int64          // bytes handed out since the stream was last synchronised
	why   string         // why there is no buffer
	// reuse hands the buffer out again from the front at every upload,
	// without a synchronisation (a planted bug for the tests; never set
	// otherwise): a queued copy then reads the next upload's bytes.
	reuse bool
}

// ownDriver is the device's own driver: baseDriver, under the profiler's
// wrapper too.
func (d *device) ownDriver() driver {
	dr := d.baseDriver()
	if w, ok := dr.(profDriver); ok {
		dr = w.driver
	}
	return dr
}

// pinner is the device's own driver if it can allocate page-locked memory.
func (d *device) pinner() pinner {
	p, _ := d.ownDriver().(pinner)
	return p
}

// htod copies bytes at src to dst on the stream, counted; src may be
// reused when it returns. See "Uploads through page-locked memory".
func (d *device) htod(dst dptr, src unsafe.Pointer, bytes int64) error {
	d.queueRoom()
	start := nanotime()
	defer func() {
		d.count.UploadTime += time.Duration(nanotime() - start)
		d.queued()
	}()
	d.count.Uploads++
	d.count.HostToDevice += bytes
	d.count.Largest = max(d.count.Largest, bytes)
	p := &d.pin
	if p.off || bytes > pinnedLargest {
		return d.drv.htod(dst, src, bytes)
	}
	if !p.tried {
		p.tried = true
		if p.from = d.pinner(); p.from == nil {
			p.why = "the driver has no page-locked memory"
		} else if buf, err := p.from.hostAlloc(pinnedSize); err != nil {
			p.why = fmt.Sprintf("allocate %d bytes of page-locked memory: %v", pinnedSize, err)
		} else {
			p.buf = buf
		}
	}
	if p.buf == nil {
		return d.drv.htod(dst, src, bytes)
	}
	at := (p.used + pinnedAlign - 1) &^ (pinnedAlign - 1)
	if p.reuse {
		at = 0
	} else if at+bytes > pinnedSize {
		// every byte handed out may still be read by a queued copy
		if err := d.sync(); err != nil {
			return err
		}
		at = 0
	}
	stage := unsafe.Add(p.buf, at)
	copy(unsafe.Slice((*byte)(stage), bytes), unsafe.Slice((*byte)(src), bytes))
	p.used = at + bytes
	d.count.PinnedUploads++
	return d.drv.htod(dst, stage, bytes)
}

// synced marks the page-locked buffer free: the stream has run every copy
// queued from it.
func (p *pinned) synced() { p.used = 0 }

// release gives the buffer back (Close).
func (p *pinned) release() error {
	if p.buf == nil {
		return nil
	}
	err := p.from.hostFree(p.buf)
	p.buf, p.used = nil, 0
	return err
}

// SetPinnedUploads makes the backend's uploads go through its page-locked
// buffer (on, the default) or from the caller's memory (off; PinnedEnv=0
// when the device opens). For A/B timings; the results are the same.
func (b *Backend) SetPinnedUploads(on bool) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	b.d.pin.off = !on
}

// PinnedUploads says whether uploads go through page-locked memory: false
// with the reason when they do not (switched off, the driver has none, or
// it could not be allocated). Before the first upload it reports whether
// they will be tried.
func (b *Backend) PinnedUploads() (bool, string) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	p := &b.d.pin
	switch {
	case p.off:
		return false, PinnedEnv + "=0 (SetPinnedUploads(false))"
	case p.tried && p.buf == nil:
		return false, p.why
	}
	return true, ""
}
