package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
)

// Counters count what crossed between the host and the device, the
// allocations and the synchronisations, since the backend opened or the
// last ResetCounters. The transfer tests bound them per training and
// decode step (docs/gpu.md lists them).
type Counters struct {
	HostToDevice, DeviceToHost int64 // bytes
	Uploads, Downloads         int64 // copies
	DeviceToDevice             int64 // bytes copied within the device (Copy), not counted above
	DeviceCopies               int64 // device-to-device copies
	Largest                    int64 // bytes of the largest single copy, either way
	Allocs                     int64 // device allocations (cuMemAlloc calls)
	AllocBytes                 int64
	Syncs                      int64 // stream synchronisations
	Launches                   int64 // kernel launches (cuBLAS calls not included), those of the graphs too
	// GraphLaunches are the decode graphs launched (graph.go), and
	// GraphKernels the kernel launches their replays ran (counted in
	// Launches too: the host queued Launches - GraphKernels of them
	// itself, those of a capture included).
	GraphLaunches, GraphKernels int64
	// SyncWait is the host's time blocked on the device: in stream
	// synchronisations, device->host copies and the waits that keep the
	// host at most QueueDepth ops ahead of the stream (QueueWaits,
	// queue.go). Wall time less SyncWait bounds from above the time the
	// device sat idle.
	SyncWait time.Duration
	// QueueWaits are the waits for an event of the stream that keep the
	// host at most QueueDepth ops ahead of it (queue.go); not in Syncs.
	QueueWaits int64
	// DownloadWaits are the waits for the event after a queued copy to the
	// host (WaitDownload: a decode step's samples, overlap.go); not in
	// Syncs: the work queued after the copy runs on.
	DownloadWaits int64
	// PinnedUploads are the uploads made through the device's page-locked
	// buffer (pinned.go; the others went from the caller's memory), and
	// UploadTime the host's time in host->device copies, the copy into
	// that buffer included: a copy from pageable memory that waits for the
	// stream shows here, not in SyncWait.
	PinnedUploads int64
	UploadTime    time.Duration
	// EnqueueTime is the host's time in the driver's and cuBLAS's calls
	// that queue work on the stream: kernel launches, products, device
	// copies and clears, graph launches (uploads are UploadTime), while
	// SetEnqueueTiming is on. A call the driver holds because its queue of
	// pending work is full waits on the device here, not in SyncWait.
	EnqueueTime time.Duration
	// AllocTime is the host's time in device allocations (cuMemAlloc), which
	// a GPU's driver may hold: a step that meets a larger batch than any
	// before allocates its tensors there.
	AllocTime time.Duration
}

// Sub is the counts from c0 to c: c - c0, field by field, except Largest,
// a maximum, which stays c's.
func (c Counters) Sub(c0 Counters) Counters {
	return Counters{
		HostToDevice: c.HostToDevice - c0.HostToDevice, DeviceToHost: c.DeviceToHost - c0.DeviceToHost,
		Uploads: c.Uploads - c0.Uploads, Downloads: c.Downloads - c0.Downloads,
		DeviceToDevice: c.DeviceToDevice - c0.DeviceToDevice, DeviceCopies: c.DeviceCopies - c0.DeviceCopies,
		Largest: c.Largest, Allocs: c.Allocs - c0.Allocs, AllocBytes: c.AllocBytes - c0.AllocBytes,
		Syncs: c.Syncs - c0.Syncs, QueueWaits: c.QueueWaits - c0.QueueWaits, DownloadWaits: c.DownloadWaits - c0.DownloadWaits, Launches: c.Launches - c0.Launches, SyncWait: c.SyncWait - c0.SyncWait,
		GraphLaunches: c.GraphLaunches - c0.GraphLaunches, GraphKernels: c.GraphKernels - c0.GraphKernels,
		PinnedUploads: c.PinnedUploads - c0.PinnedUploads, UploadTime: c.UploadTime - c0.UploadTime,
		EnqueueTime: c.EnqueueTime - c0.EnqueueTime, AllocTime: c.AllocTime - c0.AllocTime,
	}
}

// Counts is c without its times (SyncWait, UploadTime, EnqueueTime,
// AllocTime): the
// counts, which two runs of the same work give equal.
func (c Counters) Counts() Counters {
	c.SyncWait, c.UploadTime, c.EnqueueTime, c.AllocTime = 0, 0, 0, 0
	return c
}

// HostFrac is 1 - SyncWait / wall, at least 0: the share of wall seconds
// in which the host was not waiting on the device, an upper bound on the
// device's idle share over the span the counts cover (c from Sub).
func (c Counters) HostFrac(wall float64) float64 {
	return 1 - min(1, c.SyncWait.Seconds()/wall)
}

func (c Counters) String() string {
	return fmt.Sprintf("up %d B in %d copies (%d through page-locked memory, %v), down %d B in %d copies, on the device %d B in %d copies, %d allocations (%d B, %v), %d syncs, %d queue waits and %d download waits (%v waiting), %d launches (%d in %d graphs; %v queueing)",
		c.HostToDevice, c.Uploads, c.PinnedUploads, c.UploadTime, c.DeviceToHost, c.Downloads, c.DeviceToDevice, c.DeviceCopies, c.Allocs, c.AllocBytes, c.AllocTime, c.Syncs, c.QueueWaits, c.DownloadWaits, c.SyncWait, c.Launches,
		c.GraphKernels, c.GraphLaunches, c.EnqueueTime)
}

// Counters returns the counts so far.
func (b *Backend) Counters() Counters {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	return b.d.count
}

// SetEnqueueTiming turns on or off the timing of the calls that queue
// work on the stream (Counters.EnqueueTime; off when the device opens,
// the trainer turns it on for perf/enqueue_s). It reads the clock twice
// per call: on the dev machine's VM about 50 ns a read, 110-120 ns per
// queued op in BenchmarkHostCost's eager workloads; nothing inside
// decode-graph regions, whose calls queue nothing.
func (b *Backend) SetEnqueueTiming(on bool) {
	d := b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	d.enqTiming = on
}

// ResetCounters sets every count to 0.
func (b *Backend) ResetCounters() {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	b.d.count = Counters{}
	b.d.conv = convCounts{}
}

// tensors are the device allocations a Backend owns, sorted by address, and
// the freed ones kept for reuse (by size), as a caching allocator does.
type tensors struct {
	live []tensor
	pool map[int64][]dptr
	// hint[slot of an address] is the index in live of the tensor find
	// last returned for an operand at an address of that slot: an op's
	// operands recur (the same weights' views, the same activations at
	// every step). A hint is checked, never trusted: when live changes
	// it may point at another tensor or past the end, and then the
	// search runs.
	hint [tensorHints]int32
}

// tensorHints is the slots of tensors.hint: room for the few hundred
// operand addresses of a step (BenchmarkHostCost's decode: 256 slots
// missed 8% of the lookups, 1024 3%; its training step 21% and 8%).
const tensorHintBits = 10
const tensorHints = 1 << tensorHintBits

type tensor struct {
	p     dptr
	bytes int64
	name  string
}

// owned reports whether [host, host+bytes) lies inside a live tensor, and
// its device address (the same number: a tensor's slice points at device
// memory).
func (m *tensors) owned(host unsafe.Pointer, bytes int64) (dptr, bool) {
	p, t := m.find(host, bytes)
	return p, t != nil
}

// find is owned that also returns the tensor (nil when none holds the range).
// Every operand of every op comes through it: a binary search written out
// over the tensors in place (no comparison closure, no copy of a tensor per
// step).
func (m *tensors) find(host unsafe.Pointer, bytes int64) (dptr, *tensor) {
	h := dptr(uintptr(host))
	slot := (uint64(h) * 0x9E3779B97F4A7C15) >> (64 - tensorHintBits)
	if k := int(m.hint[slot]); k < len(m.live) {
		if t := &m.live[k]; h >= t.p && h+dptr(bytes) <= t.p+dptr(t.bytes) {
			return h, t
		}
	}
	// i: the first tensor that does not end at or before h
	i, j := 0, len(m.live)
	for i < j {
		k := int(uint(i+j) >> 1)
		if t := &m.live[k]; t.p+dptr(t.bytes) <= h {
			i = k + 1
		} else {
			j = k
		}
	}
	if i < len(m.live) {
		t := &m.live[i]
		if h >= t.p && h+dptr(bytes) <= t.p+dptr(t.bytes) {
			m.hint[slot] = int32(i)
			return h, t
		}
	}
	return 0, nil
}

func (m *tensors) add(t tensor) {
	i, _ := slices.BinarySearchFunc(m.live, t.p, func(x tensor, p dptr) int {
		switch {
		case x.p < p:
			return -1
		case x.p > p:
			return 1
		}
		return 0
	})
	m.live = slices.Insert(m.live, i, t)
}

// malloc allocates device memory, counted; out of memory is a
// *gpu.MemoryError naming the tensor and what the device has free.
func (d *device) malloc(name string, bytes int64) (dptr, error) {
	start := time.Now()
	p, err := d.drv.malloc(bytes)
	d.count.AllocTime += time.Since(start)
	if err != nil {
		free, total, _ := d.drv.memInfo()
		return 0, &gpu.MemoryError{Device: d.label(), Tensor: name, Bytes: bytes, Free: free, Total: total, Err: err}
	}
	d.count.Allocs++
	d.count.AllocBytes += bytes
	return p, nil
}

func (d *device) label() string { return fmt.Sprintf("cuda/%s/sm_%d%d", d.name, d.cc[0], d.cc[1]) }

// alloc returns a zeroed tensor of bytes (rounded up to 256) in device
// memory, reusing a freed one of that size; it panics with a
// *gpu.MemoryError when the device is full.
func (d *device) alloc(name string, bytes int64) dptr {
	bytes = max(256, (bytes+255)&^255)
	var p dptr
	if free := d.mem.pool[bytes]; len(free) > 0 {
		p = free[len(free)-1]
		d.mem.pool[bytes] = free[:len(free)-1]
	} else {
		var err error
		if p, err = d.malloc(name, bytes); err != nil {
			// memory kept for reuse may be what is missing: give it back and retry once
			d.sync()
			for _, ps := range d.mem.pool {
				for _, q := range ps {
					d.drv.free(q)
				}
			}
			d.mem.pool = nil
			if p, err = d.malloc(name, bytes); err != nil {
				panic(err)
			}
		}
	}
	t := d.enqStart()
	err := d.drv.zero(p, bytes)
	d.enqEnd(t)
	if err != nil {
		panic(&Error{"Alloc " + name, err})
	}
	d.mem.add(tensor{p: p, bytes: bytes, name: name})
	return p
}

// Alloc returns n zeroed floats of device memory as a tensor: a slice whose
// address is on the device, for ops, Upload, Download, Zero and Copy only
// (the host must not touch its elements). Out of memory panics with a
// *gpu.MemoryError.
func (b *Backend) Alloc(name string, n int) []float32 {
	if n <= 0 {
		return nil
	}
	var p dptr
	b.d.run("Alloc", func(*arena) { p = b.d.alloc(name, int64(n)*4) })
	return unsafe.Slice(*(**float32)(unsafe.Pointer(&p)), n)
}

// AllocInt32 is Alloc for int32.
func (b *Backend) AllocInt32(name string, n int) []int32 {
	if n <= 0 {
		return nil
	}
	var p dptr
	b.d.run("AllocInt32", func(*arena) { p = b.d.alloc(name, int64(n)*4) })
	return unsafe.Slice(*(**int32)(unsafe.Pointer(&p)), n)
}

// Free keeps a tensor from Alloc for reuse by a later Alloc of its size.
// A slice that is not a whole live tensor is left alone.
func (b *Backend) Free(x any) {
	var h unsafe.Pointer
	switch x := x.(type) {
	case []float32:
		if len(x) > 0 {
			h = unsafe.Pointer(&x[0])
		}
	case []int32:
		if len(x) > 0 {
			h = unsafe.Pointer(&x[0])
		}
	}
	if h == nil {
		return
	}
	b.d.run("Free", func(*arena) { b.d.release(dptr(uintptr(h))) })
}

// release moves the live tensor at p (and its bf16 copy, if any) to the
// pool, and invalidates the shared activation copy if it was made from the
// tensor (a later Alloc may hand its memory to another tensor); an address
// that starts no live tensor is left alone.
func (d *device) release(p dptr) {
	i, ok := slices.BinarySearchFunc(d.mem.live, p, func(t tensor, p dptr) int { return cmp.Compare(t.p, p) })
	if !ok {
		return
	}
	t := d.mem.live[i]
	d.mem.live = slices.Delete(d.mem.live, i, i+1)
	if d.mem.pool == nil {
		d.mem.pool = map[int64][]dptr{}
	}
	d.mem.pool[t.bytes] = append(d.mem.pool[t.bytes], t.p)
	d.dropBF16(t.p)
}

// Close gives the device memory the backend holds back to the driver:
// every tensor (live or kept for reuse), their bfloat16 copies, the shared
// activation copy and the staging buffers; a driver that holds more
// releases it too (the emulator unmaps its device memory). The backend and
// its tensors must not be used afterwards: an op then panics with an *Error
// wrapping ErrClosed. On a GPU the context, stream, module and cuBLAS stay
// loaded for the process. A second Close does nothing.
func (b *Backend) Close() error {
	d := b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	unlock, err := d.drv.lock()
	if err != nil {
		return &Error{"Close", err}
	}
	defer unlock()
	errs := []error{d.drv.sync()} // queued work may still use the memory
	d.dropGraphs()
	for _, t := range d.mem.live {
		errs = append(errs, d.drv.free(t.p))
	}
	for _, ps := range d.mem.pool {
		for _, p := range ps {
			errs = append(errs, d.drv.free(p))
		}
	}
	for _, c := range d.arena.chunks {
		errs = append(errs, d.drv.free(c.p))
	}
	for _, c := range d.shared() {
		if c.p != 0 {
			errs = append(errs, d.drv.free(c.p))
		}
	}
	errs = append(errs, d.pin.release())
	errs = append(errs, d.queue.release())
	errs = append(errs, d.dl.release(d))
	if c, ok := d.drv.(interface{ close() error }); ok {
		errs = append(errs, c.close())
	}
	d.mem, d.bf16, d.act, d.grad, d.arena, d.closed = tensors{}, nil, actCopy{}, [2]actCopy{}, arena{}, true
	d.pin = pinned{off: d.pin.off, tried: true, why: "the backend is closed"}
	if err := errors.Join(errs...); err != nil {
		return &Error{"Close", err}
	}
	return nil
}

// tensorPtr is the device address of a tensor's first element; x must be
// (a view of) a live tensor of at least n elements.
func (d *device) tensorPtr(op string, x unsafe.Pointer, n int) dptr {
	p, ok := d.mem.owned(x, int64(n)*4)
	if !ok {
		panic(&Error{op, fmt.Errorf("%d elements at %p are not a tensor of this backend (use Alloc)", n, x)})
	}
	return p
}

// Upload copies host src into the tensor dst.
func (b *Backend) Upload(dst, src []float32) {
	if len(src) == 0 {
		return
	}
	b.d.run("Upload", func(*arena) {
		p := b.d.tensorPtr("Upload", unsafe.Pointer(&dst[0]), len(src))
		if _, t := b.d.mem.find(unsafe.Pointer(&dst[0]), 4); t != nil {
			b.d.wrote(t.p)
		}
		must(b.d.htod(p, unsafe.Pointer(&src[0]), int64(len(src))*4))
	})
}

// UploadInt32 copies host src into the tensor dst.
func (b *Backend) UploadInt32(dst, src []int32) {
	if len(src) == 0 {
		return
	}
	b.d.run("UploadInt32", func(*arena) {
		p := b.d.tensorPtr("UploadInt32", unsafe.Pointer(&dst[0]), len(src))
		if _, t := b.d.mem.find(unsafe.Pointer(&dst[0]), 4); t != nil {
			b.d.wrote(t.p)
		}
		must(b.d.htod(p, unsafe.Pointer(&src[0]), int64(len(src))*4))
	})
}

// Download copies the tensor src into host dst, after the queued work.
func (b *Backend) Download(dst, src []float32) {
	if len(dst) == 0 {
		return
	}
	b.d.run("Download", func(*arena) {
		p := b.d.tensorPtr("Download", unsafe.Pointer(&src[0]), len(dst))
		must(b.d.dtoh(unsafe.Pointer(&dst[0]), p, int64(len(dst))*4))
	})
}

// Zero clears the tensor x on the device.
func (b *Backend) Zero(x []float32) {
	if len(x) == 0 {
		return
	}
	b.d.run("Zero", func(a *arena) {
		p := a.inout(x, len(x))
		t := b.d.enqStart()
		err := b.d.drv.zero(p, int64(len(x))*4)
		b.d.enqEnd(t)
		must(err)
	})
}

// Copy copies the tensor src into the tensor dst on the device.
func (b *Backend) Copy(dst, src []float32) {
	n := min(len(dst), len(src))
	if n == 0 {
		return
	}
	b.d.run("Copy", func(a *arena) {
		ps := a.in(src, n)
		must(b.d.dtod(a.out(dst, n), ps, int64(n)*4))
	})
}

// GatherRows: out[m,:] = inp[rows[m],:].
func (b *Backend) GatherRows(out, inp []float32, rows []int32, M, C int) {
	if M == 0 {
		return
	}
	b.d.run("GatherRows", func(a *arena) {
		b.d.launch("gather_rows", gridFor(M*C), ptr(a.out(out, M*C)), ptr(a.in(inp, len(inp))), ptr(a.ints(rows, M)),
			i64(M), i64(C))
	})
}

// ScatterRows: out[rows[m],:] = inp[m,:].
func (b *Backend) ScatterRows(out, inp []float32, rows []int32, M, C int) {
	if M == 0 {
		return
	}
	b.d.run("ScatterRows", func(a *arena) {
		b.d.launch("scatter_rows", gridFor(M*C), ptr(a.inout(out, len(out))), ptr(a.in(inp, M*C)), ptr(a.ints(rows, M)),
			i64(M), i64(C))
	})
}

// MemInfo reports the device's free and total memory in bytes (cuMemGetInfo).
func (b *Backend) MemInfo() (free, total int64, err error) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	return b.d.drv.memInfo()
}
