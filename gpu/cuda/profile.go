package cuda

// Per-op device time (EnableProfile): every kernel launch, cuBLAS call and
// copy is bracketed by two events recorded on the stream, and the time
// between them, read once the stream has passed both, is added to the op's
// entry. Nothing synchronises per op: the event pairs are kept pending and
// resolved together (one stream synchronisation) when the pool of pairs is
// used up, at Profile, DisableProfile and Close. With profiling off the
// device's driver and cuBLAS are the plain ones: no cost at all.

import (
	"errors"
	"fmt"
	"sort"
	"time"
	"unsafe"
)

// event is a driver's event handle (cu.Event on a GPU; the emulator's
// *emuEvent).
type event any

// eventTimer is a driver that can time its stream: an event recorded on the
// stream passes when the work queued before it has finished; elapsed is the
// time between two events once the stream has passed both (after a sync).
type eventTimer interface {
	newEvent() (event, error)
	record(e event) error
	elapsed(start, end event) (time.Duration, error)
	destroyEvent(e event) error
}

// ProfileEntry is the device time of one op of the profile.
type ProfileEntry struct {
	// Op is the kernel's name (kernels.cu), the cuBLAS routine with its
	// operand types, transposes and column-major m x n x k (and batch
	// count), or the copy: "memcpy HtoD", "memcpy DtoH", "memcpy DtoD",
	// "memset".
	Op    string
	Kind  string        // "kernel", "cublas" or "copy"
	Calls int64         // times it ran
	Time  time.Duration // device time of all calls together
	Share float64       // Time over the profile's Total
}

// Mean is the device time of one call.
func (e ProfileEntry) Mean() time.Duration {
	if e.Calls == 0 {
		return 0
	}
	return e.Time / time.Duration(e.Calls)
}

// Profile is the device time by op since profiling started or the last
// ResetProfile, the largest first.
type Profile struct {
	Entries []ProfileEntry
	Total   time.Duration // every entry's Time
}

// Calls is the calls of every entry of kind ("" for all).
func (p Profile) Calls(kind string) int64 {
	var n int64
	for _, e := range p.Entries {
		if kind == "" || e.Kind == kind {
			n += e.Calls
		}
	}
	return n
}

// String is the profile as a table, one op a line.
func (p Profile) String() string {
	s := fmt.Sprintf("%-60s %8s %10s %10s %6s\n", "op", "calls", "ms", "mean µs", "share")
	for _, e := range p.Entries {
		s += fmt.Sprintf("%-60s %8d %10.3f %10.1f %5.1f%%\n", e.Op, e.Calls, float64(e.Time)/1e6,
			float64(e.Mean())/1e3, 100*e.Share)
	}
	return s + fmt.Sprintf("%-60s %8d %10.3f\n", "total", p.Calls(""), float64(p.Total)/1e6)
}

// profileAgg sums the resolved times by op.
type profileAgg map[string]*ProfileEntry

func (a profileAgg) add(op, kind string, d time.Duration) {
	e := a[op]
	if e == nil {
		e = &ProfileEntry{Op: op, Kind: kind}
		a[op] = e
	}
	e.Calls++
	e.Time += d
}

// profile is the aggregate as a Profile: sorted by time (then by name),
// shares filled in.
func (a profileAgg) profile() Profile {
	var p Profile
	for _, e := range a {
		p.Entries = append(p.Entries, *e)
		p.Total += e.Time
	}
	sort.Slice(p.Entries, func(i, j int) bool {
		x, y := p.Entries[i], p.Entries[j]
		if x.Time != y.Time {
			return x.Time > y.Time
		}
		return x.Op < y.Op
	})
	for i := range p.Entries {
		if p.Total > 0 {
			p.Entries[i].Share = float64(p.Entries[i].Time) / float64(p.Total)
		}
	}
	return p
}

// profilePairs is the number of event pairs a profiler keeps; when all are
// pending, the stream is synchronised and they are resolved.
const profilePairs = 4096

type eventPair struct{ start, end event }

type pendingOp struct {
	op, kind string
	ev       eventPair
}

// profiler brackets ops with event pairs from its pool and resolves them
// into agg.
type profiler struct {
	t       eventTimer
	sync    func() error // the driver's own (not counted in Counters)
	free    []eventPair
	all     []eventPair // every pair made, to destroy
	pending []pendingOp
	agg     profileAgg
	// blasNames are the cuBLAS calls' profile keys made so far (blasName)
	blasNames map[blasOp]string
}

// begin records the start event of an op.
func (p *profiler) begin() (eventPair, error) {
	if len(p.pending) >= profilePairs {
		if err := p.resolve(); err != nil {
			return eventPair{}, err
		}
	}
	var ev eventPair
	if n := len(p.free); n > 0 {
		ev, p.free = p.free[n-1], p.free[:n-1]
	} else {
		var err error
		if ev.start, err = p.t.newEvent(); err != nil {
			return ev, fmt.Errorf("profile: create an event: %w", err)
		}
		if ev.end, err = p.t.newEvent(); err != nil {
			p.t.destroyEvent(ev.start)
			return ev, fmt.Errorf("profile: create an event: %w", err)
		}
		p.all = append(p.all, ev)
	}
	if err := p.t.record(ev.start); err != nil {
		p.free = append(p.free, ev)
		return ev, fmt.Errorf("profile: record an event: %w", err)
	}
	return ev, nil
}

// end records the end event of the op begun with ev; opErr is the op's
// error, returned (a failed op is not counted).
func (p *profiler) end(ev eventPair, op, kind string, opErr error) error {
	if opErr != nil {
		p.free = append(p.free, ev)
		return opErr
	}
	if err := p.t.record(ev.end); err != nil {
		p.free = append(p.free, ev)
		return fmt.Errorf("profile: record an event: %w", err)
	}
	p.pending = append(p.pending, pendingOp{op, kind, ev})
	return nil
}

// resolve waits for the stream and adds the pending ops' times.
func (p *profiler) resolve() error {
	if len(p.pending) == 0 {
		return nil
	}
	if err := p.sync(); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	var errs []error
	for _, o := range p.pending {
		d, err := p.t.elapsed(o.ev.start, o.ev.end)
		if err != nil {
			errs = append(errs, fmt.Errorf("profile: elapsed time of %s: %w", o.op, err))
		} else {
			p.agg.add(o.op, o.kind, d)
		}
		p.free = append(p.free, o.ev)
	}
	p.pending = p.pending[:0]
	return errors.Join(errs...)
}

// release resolves what is pending and destroys every event.
func (p *profiler) release() error {
	errs := []error{p.resolve()}
	for _, ev := range p.all {
		errs = append(errs, p.t.destroyEvent(ev.start), p.t.destroyEvent(ev.end))
	}
	p.all, p.free = nil, nil
	return errors.Join(errs...)
}

// profDriver is a driver whose copies and launches are timed.
type profDriver struct {
	driver
	p *profiler
}

func (w profDriver) htod(dst dptr, src unsafe.Pointer, bytes int64) error {
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, "memcpy HtoD", "copy", w.driver.htod(dst, src, bytes))
}

func (w profDriver) dtoh(dst unsafe.Pointer, src dptr, bytes int64) error {
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, "memcpy DtoH", "copy", w.driver.dtoh(dst, src, bytes))
}

// dtohAsync is timed when the driver queues copies to the host (overlap.go).
func (w profDriver) dtohAsync(dst unsafe.Pointer, src dptr, bytes int64) error {
	ad, ok := w.driver.(asyncDownloader)
	if !ok {
		return fmt.Errorf("the driver cannot queue a copy to the host")
	}
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, "memcpy DtoH", "copy", ad.dtohAsync(dst, src, bytes))
}

func (w profDriver) dtod(dst, src dptr, bytes int64) error {
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, "memcpy DtoD", "copy", w.driver.dtod(dst, src, bytes))
}

func (w profDriver) zero(ptr dptr, bytes int64) error {
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, "memset", "copy", w.driver.zero(ptr, bytes))
}

func (w profDriver) launch(kernel string, grid int, args []uint64) error {
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, kernel, "kernel", w.driver.launch(kernel, grid, args))
}

// enter, leave and close are the wrapped driver's, where it has them
// (guard; Close).
func (w profDriver) enter() {
	if g, ok := w.driver.(guard); ok {
		g.enter()
	}
}

func (w profDriver) leave() {
	if g, ok := w.driver.(guard); ok {
		g.leave()
	}
}

func (w profDriver) close() error {
	err := w.p.release()
	if c, ok := w.driver.(interface{ close() error }); ok {
		err = errors.Join(err, c.close())
	}
	return err
}

// profBlas is cuBLAS whose calls are timed, keyed by routine, operand
// types, transposes and the column-major m x n x k cuBLAS is given.
type profBlas struct {
	colMajorBlas
	p *profiler
}

func transName(transA, transB bool) string {
	t := func(x bool) string {
		if x {
			return "T"
		}
		return "N"
	}
	return t(transA) + t(transB)
}

func typeName(t DataType) string {
	switch t {
	case R32F:
		return "f32"
	case R16F:
		return "f16"
	case R16BF:
		return "bf16"
	}
	return fmt.Sprintf("type%d", int(t))
}

// exTypes names GemmEx's operand types, C's and the compute type, e.g.
// "bf16->f32" or "f32 tf32".
func exTypes(at, bt, ct DataType, compute ComputeType) string {
	s := typeName(at)
	if bt != at {
		s += "," + typeName(bt)
	}
	if ct != at {
		s += "->" + typeName(ct)
	}
	switch compute {
	case Compute32F:
	case Compute32FTF32:
		s += " tf32"
	default:
		s += fmt.Sprintf(" compute%d", int(compute))
	}
	return s
}

// blasOp is what a cuBLAS call's profile key says: the routine ('s'
// cublasSgemm, 'S' cublasSgemmStridedBatched, 'e' cublasGemmEx, 'E'
// cublasGemmStridedBatchedEx), the operand and compute types, the
// transposes, the column-major m x n x k and the batch count.
type blasOp struct {
	routine        byte
	transA, transB bool
	m, n, k, count int
	at, bt, ct     DataType
	compute        ComputeType
}

// String is the op's profile key, e.g. "cublasGemmEx bf16->f32 NT 896x8192x4864".
func (o blasOp) String() string {
	t := transName(o.transA, o.transB)
	switch o.routine {
	case 's':
		return fmt.Sprintf("cublasSgemm f32 %s %dx%dx%d", t, o.m, o.n, o.k)
	case 'S':
		return fmt.Sprintf("cublasSgemmStridedBatched f32 %s %dx%dx%d x%d", t, o.m, o.n, o.k, o.count)
	case 'e':
		return fmt.Sprintf("cublasGemmEx %s %s %dx%dx%d", exTypes(o.at, o.bt, o.ct, o.compute), t, o.m, o.n, o.k)
	}
	return fmt.Sprintf("cublasGemmStridedBatchedEx %s %s %dx%dx%d x%d", exTypes(o.at, o.bt, o.ct, o.compute), t, o.m, o.n, o.k, o.count)
}

// blasName is o's profile key, formatted once per distinct call and kept:
// a step repeats a few dozen shapes thousands of times.
func (p *profiler) blasName(o blasOp) string {
	name, ok := p.blasNames[o]
	if !ok {
		if p.blasNames == nil {
			p.blasNames = map[blasOp]string{}
		}
		name = o.String()
		p.blasNames[o] = name
	}
	return name
}

func (w profBlas) sgemm(transA, transB bool, m, n, k int, alpha float32, A dptr, lda int,
	B dptr, ldb int, beta float32, C dptr, ldc int) error {
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, w.p.blasName(blasOp{routine: 's', transA: transA, transB: transB, m: m, n: n, k: k}), "cublas",
		w.colMajorBlas.sgemm(transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
}

func (w profBlas) sgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
	A dptr, lda, strideA int, B dptr, ldb, strideB int, beta float32,
	C dptr, ldc, strideC, count int) error {
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, w.p.blasName(blasOp{routine: 'S', transA: transA, transB: transB, m: m, n: n, k: k, count: count}), "cublas",
		w.colMajorBlas.sgemmStridedBatched(transA, transB, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta,
			C, ldc, strideC, count))
}

func (w profBlas) gemmEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda int, B dptr, bt DataType, ldb int, beta float32,
	C dptr, ct DataType, ldc int, compute ComputeType) error {
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, w.p.blasName(blasOp{routine: 'e', transA: transA, transB: transB, m: m, n: n, k: k,
		at: at, bt: bt, ct: ct, compute: compute}), "cublas",
		w.colMajorBlas.gemmEx(transA, transB, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute))
}

func (w profBlas) gemmStridedBatchedEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda, strideA int, B dptr, bt DataType, ldb, strideB int, beta float32,
	C dptr, ct DataType, ldc, strideC, count int, compute ComputeType) error {
	ev, err := w.p.begin()
	if err != nil {
		return err
	}
	return w.p.end(ev, w.p.blasName(blasOp{routine: 'E', transA: transA, transB: transB, m: m, n: n, k: k, count: count,
		at: at, bt: bt, ct: ct, compute: compute}), "cublas",
		w.colMajorBlas.gemmStridedBatchedEx(transA, transB, m, n, k, alpha, A, at, lda, strideA, B, bt, ldb, strideB, beta,
			C, ct, ldc, strideC, count, compute))
}

// ErrNoEvents is returned by EnableProfile on a driver that cannot time
// its stream.
var ErrNoEvents = errors.New("cuda: this device's driver has no timing events; it cannot be profiled")

// EnableProfile starts timing every kernel launch, cuBLAS call and copy on
// the device (see Profile). The times add to those kept since the last
// ResetProfile. It adds two event records per op and a stream
// synchronisation every 4096 ops, so a profiled step is not a timed one.
// On the emulator, whose launches and copies are synchronous, an op's
// time is the host's wall time around it.
func (b *Backend) EnableProfile() error {
	d := b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return &Error{"EnableProfile", ErrClosed}
	}
	if d.prof != nil {
		return nil
	}
	t, ok := d.drv.(eventTimer)
	if !ok {
		return ErrNoEvents
	}
	if d.profAgg == nil {
		d.profAgg = profileAgg{}
	}
	drv := d.drv
	d.prof = &profiler{t: t, sync: drv.sync, agg: d.profAgg}
	d.drv = profDriver{drv, d.prof}
	d.blas.api = profBlas{d.blas.api, d.prof}
	return nil
}

// DisableProfile stops the timing (the device's driver and cuBLAS are the
// plain ones again) after resolving what is pending; the times are kept
// for Profile.
func (b *Backend) DisableProfile() error {
	d := b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.prof == nil {
		return nil
	}
	w := d.drv.(profDriver)
	var err error
	if !d.closed {
		unlock, lerr := d.drv.lock()
		if lerr != nil {
			return &Error{"DisableProfile", lerr}
		}
		err = d.prof.release()
		unlock()
	}
	d.drv, d.blas.api, d.prof = w.driver, d.blas.api.(profBlas).colMajorBlas, nil
	if err != nil {
		return &Error{"DisableProfile", err}
	}
	return nil
}

// Profile returns the device time by op since profiling was enabled or
// last reset. While profiling is on it first waits for the stream, to
// resolve the ops still pending.
func (b *Backend) Profile() (Profile, error) {
	d := b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.resolveProfile("Profile")
	return d.profAgg.profile(), err
}

// resolveProfile resolves the pending events while profiling is on and
// the device is open (d.mu held); the error names op.
func (d *device) resolveProfile(op string) error {
	if d.prof == nil || d.closed {
		return nil
	}
	unlock, err := d.drv.lock()
	if err == nil {
		err = d.prof.resolve()
		unlock()
	}
	if err != nil {
		return &Error{op, err}
	}
	return nil
}

// ResetProfile drops the times kept so far (ops still pending included).
func (b *Backend) ResetProfile() error {
	d := b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.resolveProfile("ResetProfile")
	clear(d.profAgg)
	return err
}
