package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
)

// OverlapEnv, set to 0 when a device opens, makes the generator read each
// decode step's samples before it queues the next step, as it did before
// overlap scheduling (A/B timings; Backend.SetDecodeOverlap does the same).
// See docs/gpu.md, "Overlapping the host's work with the device's".
const OverlapEnv = "RLHOST_CUDA_OVERLAP"

func overlapOffFromEnv() (bool, error) { return offFromEnv(OverlapEnv) }

// downloadSlots is the downloads in flight at most (tickets not yet waited
// for), round robin: a generator keeps one step's samples in flight while
// it queues the next, so two, and a few generators may share a backend. A
// ticket whose slot has been taken again was abandoned (its generator
// stopped on an error): waiting for it is an error.
const downloadSlots = 8

// asyncDownloader is implemented by a driver that can queue a copy to the
// host on the stream (cuMemcpyDtoHAsync into page-locked memory).
type asyncDownloader interface {
	dtohAsync(dst unsafe.Pointer, src dptr, bytes int64) error
}

// downloads are the device's queued copies to the host (gpu.DecodeOverlap).
type downloads struct {
	off    bool // OverlapEnv=0 or SetDecodeOverlap(false)
	ticket int  // the last ticket handed out
	slots  [downloadSlots]download
	// plant names a defect planted in the downloads (a planted bug for the
	// tests; never set otherwise): "oneslot" puts every download in the
	// first slot, so a queued copy overwrites samples not yet read.
	plant string
}

// download is one slot: its page-locked buffer and the event after its copy.
type download struct {
	buf    unsafe.Pointer
	size   int64
	ev     event
	ticket int // the download it holds; 0: none in flight
	n      int
	logp   bool
	host   []byte // where the copy lands when the driver has no queued copies (copied at once)
}

// DecodeOverlap reports whether the generator should queue a decode step
// before it reads the previous one's samples (on unless OverlapEnv=0 or
// SetDecodeOverlap(false)).
func (b *Backend) DecodeOverlap() bool {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	return !b.d.dl.off
}

// SetDecodeOverlap switches overlap scheduling on or off (see OverlapEnv).
// For A/B timings; the tokens and log-probs are the same.
func (b *Backend) SetDecodeOverlap(on bool) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	b.d.dl.off = !on
}

// CopyInt32 copies the int32 tensor src into dst on the device (queued).
func (b *Backend) CopyInt32(dst, src []int32) {
	n := min(len(dst), len(src))
	if n == 0 {
		return
	}
	b.d.run("CopyInt32", func(a *arena) {
		ps := a.ints(src, n)
		pd := a.stage(unsafe.Pointer(&dst[0]), int64(n)*4, false, true)
		must(b.d.dtod(pd, ps, int64(n)*4))
	})
}

// DownloadQueued queues the copies of the tensors ids [n] and logp [n]
// (nil: none) to the host behind the work queued so far and returns their
// ticket without waiting (gpu.DecodeOverlap): the copies land in a slot
// of page-locked memory, with an event recorded after them. A driver
// without queued copies (or events, or page-locked memory) copies them at
// once, after a synchronisation.
func (b *Backend) DownloadQueued(ids []int32, logp []float32, n int) int {
	if len(ids) < n || (logp != nil && len(logp) < n) {
		panic(&Error{"DownloadQueued", fmt.Errorf("%d ids and %d log-probs for %d rows", len(ids), len(logp), n)})
	}
	var t int
	b.d.run("DownloadQueued", func(a *arena) {
		d := b.d
		q := &d.dl
		q.ticket++
		t = q.ticket
		s := &q.slots[t%downloadSlots]
		if q.plant == "oneslot" {
			s = &q.slots[0]
		} else if s.ticket != 0 && s.buf != nil && s.ev != nil {
			// an abandoned download (its generator stopped on an error): its
			// copy may still be landing in the buffer this one reuses or frees
			if err := d.waiter().waitEvent(s.ev); err != nil {
				panic(&Error{"", fmt.Errorf("wait for an abandoned download: %w", err)})
			}
		}
		s.ticket, s.n, s.logp = t, n, logp != nil
		if n == 0 {
			return
		}
		bytes := int64(n) * 4
		if logp != nil {
			bytes *= 2
		}
		pi := a.ints(ids, n)
		var pl dptr
		if logp != nil {
			pl = a.in(logp, n)
		}
		ad, w, pin := d.asyncDownloads()
		if ad == nil {
			// no queued copies: the samples come down now
			if int64(cap(s.host)) < bytes {
				s.host = make([]byte, bytes)
			}
			s.host = s.host[:bytes]
			must(d.dtoh(unsafe.Pointer(&s.host[0]), pi, int64(n)*4))
			if logp != nil {
				must(d.dtoh(unsafe.Pointer(&s.host[n*4]), pl, int64(n)*4))
			}
			return
		}
		if s.size < bytes {
			if s.buf != nil {
				must(pin.hostFree(s.buf))
				s.buf, s.size = nil, 0
			}
			size := max(bytes, 8<<10)
			buf, err := pin.hostAlloc(size)
			if err != nil {
				panic(&Error{"", fmt.Errorf("allocate %d bytes of page-locked memory for the samples: %w", size, err)})
			}
			s.buf, s.size = buf, size
		}
		if s.ev == nil {
			ev, err := w.newSyncEvent()
			if err != nil {
				panic(&Error{"", fmt.Errorf("create an event: %w", err)})
			}
			s.ev = ev
		}
		d.queueDownload(ad, s.buf, pi, int64(n)*4)
		if logp != nil {
			d.queueDownload(ad, unsafe.Add(s.buf, n*4), pl, int64(n)*4)
		}
		if err := w.record(s.ev); err != nil {
			panic(&Error{"", fmt.Errorf("record an event: %w", err)})
		}
	})
	return t
}

// queueDownload queues one copy to the host, counted.
func (d *device) queueDownload(ad asyncDownloader, dst unsafe.Pointer, src dptr, bytes int64) {
	d.count.Downloads++
	d.count.DeviceToHost += bytes
	d.count.Largest = max(d.count.Largest, bytes)
	t := d.enqStart()
	err := ad.dtohAsync(dst, src, bytes)
	d.enqEnd(t)
	if err != nil {
		panic(&Error{"", fmt.Errorf("queue a copy of %d bytes to the host: %w", bytes, err)})
	}
}

// WaitDownload waits for the copies of ticket alone (the event after
// them: the work queued since runs on) and fills ids [n] and logp [n]
// (gpu.DecodeOverlap). The time is the host's, blocked on the device
// (Counters.SyncWait), and the wait is counted in DownloadWaits.
func (b *Backend) WaitDownload(ticket int, ids []int32, logp []float32) {
	b.d.run("WaitDownload", func(a *arena) {
		d := b.d
		q := &d.dl
		s := &q.slots[ticket%downloadSlots]
		if q.plant == "oneslot" {
			s = &q.slots[0]
		} else if s.ticket != ticket {
			panic(&Error{"", fmt.Errorf("download %d is not in flight (waited for already, or abandoned: the slot holds %d)", ticket, s.ticket)})
		}
		n := s.n
		if len(ids) < n || (s.logp && logp != nil && len(logp) < n) {
			panic(&Error{"", fmt.Errorf("%d ids and %d log-probs for %d rows", len(ids), len(logp), n)})
		}
		s.ticket = 0
		if n == 0 {
			return
		}
		src := unsafe.Pointer(unsafe.SliceData(s.host))
		if s.buf != nil && len(s.host) == 0 {
			start := time.Now()
			err := d.waiter().waitEvent(s.ev)
			d.count.SyncWait += time.Since(start)
			d.count.DownloadWaits++
			if err != nil {
				panic(&Error{"", fmt.Errorf("wait for the samples' copy: %w", err)})
			}
			src = s.buf
		}
		copy(ids[:n], unsafe.Slice((*int32)(src), n))
		if s.logp && logp != nil {
			copy(logp[:n], unsafe.Slice((*float32)(unsafe.Add(src, n*4)), n))
		}
	})
}

// asyncDownloads returns the driver's queued copies (the profiler's
// wrapper times them), its events and page-locked memory, or nil when the
// device's own driver lacks one of them.
func (d *device) asyncDownloads() (asyncDownloader, queueWaiter, pinner) {
	own, _ := d.ownDriver().(asyncDownloader)
	w, pin := d.waiter(), d.pinner()
	if own == nil || w == nil || pin == nil {
		return nil, nil, nil
	}
	if ad, ok := d.drv.(asyncDownloader); ok {
		return ad, w, pin
	}
	return own, w, pin
}

// release gives the slots' page-locked memory and events back (Close,
// after a synchronisation).
func (q *downloads) release(d *device) error {
	var errs []error
	for i := range q.slots {
		s := &q.slots[i]
		if s.buf != nil {
			if pin := d.pinner(); pin != nil {
				errs = append(errs, pin.hostFree(s.buf))
			}
		}
		if s.ev != nil {
			if w := d.waiter(); w != nil {
				errs = append(errs, w.destroyEvent(s.ev))
			}
		}
		*s = download{}
	}
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("downloads: %w", err)
		}
	}
	return nil
}

var _ gpu.DecodeOverlap = (*Backend)(nil)
