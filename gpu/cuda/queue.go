package cuda

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// A stream holds a bounded number of pending launches: once about a
// thousand kernels are queued, the driver holds the host inside the next
// launch until one completes (about 4-5 µs a launch below that, the
// kernel's run time above it, as users of the driver report). Held there,
// the host waits on the device in a call that looks like host work: a
// training micro-batch's backward and the next micro-batch's forward,
// queued between two downloads, come to ~900 ops on the null device
// (TestQueueLimitTrainingStep), near that limit. The backend therefore
// keeps the host at most queueDepth ops (launches, cuBLAS calls, copies,
// clears, graph launches) ahead of the stream: every queueDepth/8 ops it
// records an event, and before queueing an op more than queueDepth ops
// beyond the last event it knows the stream has passed it waits for the
// oldest pending events (cuEventSynchronize) until the op is not. The wait is counted (Counters.QueueWaits) and
// timed as a wait on the device (Counters.SyncWait), and the device keeps
// more than queueDepth - queueDepth/8 ops queued (at the training step's
// ops of tens of microseconds and more, milliseconds of work). A
// synchronisation of the stream completes every event. The ops of a
// decode-graph region are recorded, not queued: they do not count, the
// graph's launch does (one op).

// QueueDepthEnv, set when a device opens, is the ops the host may queue
// ahead of the stream (a positive integer; 0: no limit, the driver's own
// queue bounds it); unset, DefaultQueueDepth.
const QueueDepthEnv = "RLHOST_CUDA_QUEUE_DEPTH"

// DefaultQueueDepth is the ops the host queues ahead of the stream at
// most, unless QueueDepthEnv or SetQueueDepth says otherwise: a quarter of
// the driver's ~1000 pending launches, since a cuBLAS product may launch
// more than one kernel; at the training step's ops (tens of microseconds
// and more) still milliseconds of queued work.
const DefaultQueueDepth = 256

// queueDepthFromEnv is QueueDepthEnv's value, DefaultQueueDepth unset.
func queueDepthFromEnv() (int, error) {
	v := os.Getenv(QueueDepthEnv)
	if v == "" {
		return DefaultQueueDepth, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || (n > 0 && n < 8) {
		return 0, fmt.Errorf("cuda: %s=%q: want 0 (no limit) or a number of ops >= 8", QueueDepthEnv, v)
	}
	return n, nil
}

// queueWaiter is a driver that can wait for a point of its stream: an
// event without timing (cuEventCreate with CU_EVENT_DISABLE_TIMING),
// recorded on the stream, waited for (cuEventSynchronize).
type queueWaiter interface {
	newSyncEvent() (event, error)
	record(e event) error
	waitEvent(e event) error
	destroyEvent(e event) error
}

// queueMark is an event recorded after the op numbered at.
type queueMark struct {
	at int64
	ev event
}

// queueLimit is the device's bound on the ops queued ahead of the stream.
type queueLimit struct {
	depth int   // ops ahead at most; 0: no limit (QueueDepthEnv, SetQueueDepth)
	ops   int64 // ops queued since the device opened (while the bound applies)
	next  int64 // the op after which the next event is recorded
	// passed is the ops the host knows the stream has run: those before
	// the last event it waited for or its last synchronisation
	passed int64
	w      queueWaiter
	tried  bool // w is the device's driver's, or nil: it has no events
	marks  []queueMark
	free   []event // events recorded and passed, to record again
	all    []event // every event made, to destroy
	// plant names a defect planted in the limit (a planted bug for the
	// tests; never set otherwise): "nowait" records the events but never
	// waits for them.
	plant string
}

// waiter is the device's own driver (ownDriver) if it can wait for an
// event.
func (d *device) waiter() queueWaiter {
	w, _ := d.ownDriver().(queueWaiter)
	return w
}

// waiterReady reports whether the bound applies now: a bound is set, no
// decode-graph region is open (its calls are recorded, not queued) and
// the device's driver has events (looked up once).
func (d *device) waiterReady() bool {
	q := &d.queue
	if q.depth == 0 || d.graphs.mode != graphIdle {
		return false
	}
	if !q.tried {
		q.w, q.tried = d.waiter(), true
	}
	return q.w != nil
}

// queueRoom, before an op is queued, waits for the oldest events until
// the op will be at most queue.depth ops ahead of what the stream has run
// (see above).
func (d *device) queueRoom() {
	q := &d.queue
	if !d.waiterReady() {
		return
	}
	for len(q.marks) > 0 && q.ops+1-q.passed > int64(q.depth) {
		m := q.marks[0]
		if q.plant != "nowait" {
			start := time.Now()
			err := q.w.waitEvent(m.ev)
			d.count.SyncWait += time.Since(start)
			d.count.QueueWaits++
			if err != nil {
				panic(&Error{"", fmt.Errorf("queue: wait for an event: %w", err)})
			}
			q.passed = m.at
		}
		q.marks = q.marks[:copy(q.marks, q.marks[1:])] // at most 9: no allocation
		q.free = append(q.free, m.ev)
	}
}

// queued counts one op queued on the stream and records an event after
// every queue.depth/8th.
func (d *device) queued() {
	q := &d.queue
	if !d.waiterReady() {
		return
	}
	q.ops++
	if q.ops < q.next {
		return
	}
	q.next = q.ops + int64(max(1, q.depth/8))
	var ev event
	if n := len(q.free); n > 0 {
		ev, q.free = q.free[n-1], q.free[:n-1]
	} else {
		var err error
		if ev, err = q.w.newSyncEvent(); err != nil {
			panic(&Error{"", fmt.Errorf("queue: create an event: %w", err)})
		}
		q.all = append(q.all, ev)
	}
	if err := q.w.record(ev); err != nil {
		panic(&Error{"", fmt.Errorf("queue: record an event: %w", err)})
	}
	q.marks = append(q.marks, queueMark{at: q.ops, ev: ev})
}

// synced marks every event passed: the stream has run everything queued.
func (q *queueLimit) synced() {
	for _, m := range q.marks {
		q.free = append(q.free, m.ev)
	}
	q.marks = q.marks[:0]
	q.passed = q.ops
}

// release destroys the events (Close, after a synchronisation).
func (q *queueLimit) release() error {
	var errs []error
	for _, ev := range q.all {
		if err := q.w.destroyEvent(ev); err != nil {
			errs = append(errs, err)
		}
	}
	q.all, q.free, q.marks = nil, nil, nil
	if len(errs) > 0 {
		return fmt.Errorf("queue: destroy events: %v", errs)
	}
	return nil
}

// SetQueueDepth bounds the ops the host queues ahead of the stream (see
// QueueDepthEnv); 0 takes the bound off. For A/B timings; the results are
// the same.
func (b *Backend) SetQueueDepth(n int) {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	q := &b.d.queue
	q.depth = max(0, n)
	if q.depth == 0 {
		q.synced() // nothing waits for them any more: they are recorded again later
	}
}

// QueueDepth is the bound on the ops queued ahead of the stream (0: none).
func (b *Backend) QueueDepth() int {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	return b.d.queue.depth
}
