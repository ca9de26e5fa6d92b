package cuda

// Decode graphs (gpu.DecodeGraph): the generator marks the ops of a decode
// step (from the embedding to the logits) as a region with a key (its
// batch of N sequences). The device records the driver calls the ops
// queue in the region: kernel launches, cuBLAS products, device copies and
// clears. The second time a key comes in a row, the region is captured
// (cuStreamBeginCapture ... cuStreamEndCapture, cuGraphInstantiate) and
// the graph launched; from then on the ops of the region run their Go code
// as before, but their calls are compared, one by one, with the graph's
// instead of being sent to the driver, and when the region ends with every
// call equal, one cuGraphLaunch runs them all. A replay therefore runs the
// very calls, with the very arguments (addresses, sizes, scalars), that
// the ops would have queued: nothing about what may change between steps
// (shapes, the batch, the precision, the variants, the fused ops, the
// LoRA adapters, the weights' bfloat16 copies, the arena) needs a key of
// its own. At the first call that differs, the calls matched so far and
// the rest of the region go to the driver as they are (eager), and the
// graph is dropped (captured again the next time the key comes twice in
// a row; a key whose graph fails to match graphMaxFails times in a row is
// left eager). A region that copies between host and device or waits for
// the device (a planted host round trip, an op that downloads) cannot be
// captured: its recorded calls run eager at that point, and its key stays
// eager.
//
// Inputs that change every step (tokens, positions, cache rows, selected
// rows) are uploaded by the generator into its tensors before the region,
// outside the graph; the graph reads them where they are, at the addresses
// every replay shares. The sampled ids come down after the region
// (SampleTokens).

import (
	"fmt"
	"os"
	"slices"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
)

// GraphsEnv switches decode graphs off when set to 0 (for A/B timings).
const GraphsEnv = "RLHOST_CUDA_GRAPHS"

// graphsOffFromEnv reports whether decode graphs start switched off.
func graphsOffFromEnv() (bool, error) { return offFromEnv(GraphsEnv) }

// offFromEnv reads a switch of the backend from the environment variable
// name: 0 is off, unset or 1 on, anything else an error naming it.
func offFromEnv(name string) (bool, error) {
	switch v := os.Getenv(name); v {
	case "", "1":
		return false, nil
	case "0":
		return true, nil
	default:
		return false, fmt.Errorf("cuda: %s=%q: want 0 (off) or 1 (on)", name, v)
	}
}

// graphExec is an instantiated graph of a driver.
type graphExec any

// grapher is implemented by a driver that can capture the calls queued on
// its stream into a graph and launch it (the CUDA driver, the emulator).
type grapher interface {
	// beginCapture starts capturing: the calls queued from now on are
	// recorded, not run, until endCapture.
	beginCapture() error
	// endCapture stops capturing and returns the instantiated graph of
	// the calls recorded; on an error there is none (and the calls did
	// not run).
	endCapture() (graphExec, error)
	launchGraph(g graphExec) error
	destroyGraph(g graphExec) error
}

var _ gpu.DecodeGraph = (*Backend)(nil)

// graphMaxEntries is the graphs kept (one per key, the oldest dropped):
// more than the decode batch sizes a generator pads to (1, 2, 4 and the
// multiples of 8: 35 for 256 slots, gpu/model's decodeBucket), so that a
// GRPO step's shrinking batch replays its buckets' graphs from the second
// step on instead of capturing them again. graphMaxFails is the
// mismatches in a row after which a key stays eager.
const graphMaxEntries, graphMaxFails = 64, 3

type graphMode uint8

const (
	graphIdle    graphMode = iota // no region
	graphCapture                  // recording and capturing the region's calls
	graphVerify                   // comparing the region's calls with a graph's
	graphEager                    // in a region, every call goes to the driver
)

// callKind is what a recorded call does.
type callKind uint8

const (
	callLaunch callKind = iota
	callDtoD
	callZero
	callSgemm
	callSgemmSB
	callGemmEx
	callGemmSBEx
)

// gcall is one recorded driver or cuBLAS call with its arguments: a
// launch (name, grid, args), a device copy (dst A, src B, bytes m), a
// clear (A, bytes m), or a product (the cuBLAS arguments).
type gcall struct {
	kind              callKind
	name              string
	grid              int
	args              []uint64
	ta, tb            bool
	m, n, k           int
	alpha, beta       float32
	A, B, C           dptr
	at, bt, ct        DataType
	lda, ldb, ldc     int
	sa, sb, sc, count int
	compute           ComputeType
}

// same reports whether c and o are the same call with the same arguments.
func (c *gcall) same(o *gcall) bool {
	return c.kind == o.kind && c.name == o.name && c.grid == o.grid && c.ta == o.ta && c.tb == o.tb &&
		c.m == o.m && c.n == o.n && c.k == o.k && c.alpha == o.alpha && c.beta == o.beta &&
		c.A == o.A && c.B == o.B && c.C == o.C && c.at == o.at && c.bt == o.bt && c.ct == o.ct &&
		c.lda == o.lda && c.ldb == o.ldb && c.ldc == o.ldc && c.sa == o.sa && c.sb == o.sb && c.sc == o.sc &&
		c.count == o.count && c.compute == o.compute && slices.Equal(c.args, o.args)
}

// exec sends the call to drv or api.
func (c *gcall) exec(drv driver, api colMajorBlas) error {
	switch c.kind {
	case callLaunch:
		return drv.launch(c.name, c.grid, c.args)
	case callDtoD:
		return drv.dtod(c.A, c.B, int64(c.m))
	case callZero:
		return drv.zero(c.A, int64(c.m))
	case callSgemm:
		return api.sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, c.A, c.lda, c.B, c.ldb, c.beta, c.C, c.ldc)
	case callSgemmSB:
		return api.sgemmStridedBatched(c.ta, c.tb, c.m, c.n, c.k, c.alpha, c.A, c.lda, c.sa, c.B, c.ldb, c.sb,
			c.beta, c.C, c.ldc, c.sc, c.count)
	case callGemmEx:
		return api.gemmEx(c.ta, c.tb, c.m, c.n, c.k, c.alpha, c.A, c.at, c.lda, c.B, c.bt, c.ldb, c.beta,
			c.C, c.ct, c.ldc, c.compute)
	case callGemmSBEx:
		return api.gemmStridedBatchedEx(c.ta, c.tb, c.m, c.n, c.k, c.alpha, c.A, c.at, c.lda, c.sa, c.B, c.bt,
			c.ldb, c.sb, c.beta, c.C, c.ct, c.ldc, c.sc, c.count, c.compute)
	}
	return fmt.Errorf("recorded call of kind %d", c.kind)
}

// graphEntry is the graph of a key: its calls, the kernel launches among
// them, and the driver's instantiated graph (nil: none yet, or dropped
// after a mismatch; eager: the key is not captured again).
type graphEntry struct {
	key      uint64
	calls    []gcall
	launches int64
	exec     graphExec
	fails    int // mismatches in a row
	eager    bool
}

// graphs is a device's decode graphs and the state of the region.
type graphs struct {
	off   bool // switched off (SetDecodeGraphs(false), RLHOST_CUDA_GRAPHS=0)
	mode  graphMode
	last  uint64 // the key of the last region
	seen  bool   // last is set
	cur   *graphEntry
	pos   int // graphVerify: the calls matched
	drv   driver
	api   colMajorBlas
	list  []*graphEntry
	Stats GraphStats
	// plant names a defect planted in the replay (a planted bug for the
	// tests; never set otherwise): "noverify" replays a key's graph
	// whatever the region's calls were; "dropprefix" leaves out the calls
	// matched before a mismatch.
	plant string
}

// GraphStats count the decode graphs since the backend opened.
type GraphStats struct {
	Captures   int64 // graphs captured and instantiated
	Replays    int64 // regions run by one graph launch after their calls matched (captures not included)
	Mismatches int64 // regions whose calls differed from their key's graph (run eager)
	Aborts     int64 // regions that could not be captured (a copy or a wait inside)
	Eager      int64 // regions run eager (first sight of a key, a key left eager, graphs off)
}

func (g *graphs) find(key uint64) *graphEntry {
	for _, e := range g.list {
		if e.key == key {
			return e
		}
	}
	return nil
}

// dropGraph removes e from the graphs kept, destroying its graph.
func (d *device) dropGraph(e *graphEntry) {
	g := &d.graphs
	if i := slices.Index(g.list, e); i >= 0 {
		g.list = slices.Delete(g.list, i, i+1)
	}
	d.destroyGraph(e)
}

// destroyGraph destroys e's graph, if it has one.
func (d *device) destroyGraph(e *graphEntry) {
	if e.exec != nil {
		if gr, ok := d.baseDriver().(grapher); ok {
			gr.destroyGraph(e.exec)
		}
		e.exec = nil
	}
}

// baseDriver is the device's own driver (the recorder's while in a region).
func (d *device) baseDriver() driver {
	if d.graphs.mode != graphIdle {
		return d.graphs.drv
	}
	return d.drv
}

// keep adds e to the graphs kept, dropping the oldest beyond graphMaxEntries.
func (d *device) keepGraph(e *graphEntry) {
	g := &d.graphs
	g.list = append(g.list, e)
	for len(g.list) > graphMaxEntries {
		d.dropGraph(g.list[0])
	}
}

// beginGraph starts a region of key (inside run).
func (d *device) beginGraph(key uint64) {
	g := &d.graphs
	if g.mode != graphIdle {
		return
	}
	gr, ok := d.drv.(grapher)
	again := g.seen && g.last == key
	g.last, g.seen = key, true
	if g.off || d.prof != nil || !ok {
		g.Stats.Eager++
		return
	}
	g.drv, g.api = d.drv, d.blas.api
	e := g.find(key)
	switch {
	case e != nil && e.eager:
		g.Stats.Eager++
		return
	case e != nil && e.exec != nil:
		g.mode, g.cur, g.pos = graphVerify, e, 0
	case !again:
		g.Stats.Eager++
		return
	default:
		if e == nil {
			e = &graphEntry{key: key}
			d.keepGraph(e)
		}
		if err := gr.beginCapture(); err != nil {
			e.eager = true
			g.Stats.Aborts++
			return
		}
		e.calls, e.launches = e.calls[:0], 0
		g.mode, g.cur = graphCapture, e
	}
	rec := &graphRec{d: d}
	d.drv, d.blas.api = rec, rec
}

// endGraph ends the region (inside run): a captured graph is instantiated
// and launched, a verified one launched, an eager one has run.
func (d *device) endGraph() error {
	g := &d.graphs
	mode, e := g.mode, g.cur
	if mode == graphIdle {
		return nil
	}
	d.drv, d.blas.api = g.drv, g.api
	g.mode, g.cur = graphIdle, nil
	gr := g.drv.(grapher)
	switch mode {
	case graphCapture:
		exec, err := gr.endCapture()
		if err != nil { // nothing ran: run the calls eager, and keep the key eager
			e.eager = true
			g.Stats.Aborts++
			err = g.run(e.calls)
			e.calls = nil
			return err
		}
		e.exec = exec
		for i := range e.calls {
			if e.calls[i].kind == callLaunch {
				e.launches++
			}
		}
		g.Stats.Captures++
		return d.launchGraph(e, false)
	case graphVerify:
		if g.pos == len(e.calls) || g.plant == "noverify" {
			e.fails = 0
			g.Stats.Replays++
			return d.launchGraph(e, true)
		}
		return d.graphMismatch(e)
	}
	return nil
}

// launchGraph runs e's graph, counted: its kernels count as launched by
// the graph when it replays calls the ops did not queue (not when it runs
// what was just captured: the ops queued those, into the capture).
func (d *device) launchGraph(e *graphEntry, replay bool) error {
	d.count.GraphLaunches++
	if replay {
		d.count.GraphKernels += e.launches
	}
	t := d.enqStart() // endGraph: the region is closed
	err := d.graphs.drv.(grapher).launchGraph(e.exec)
	d.enqEnd(t)
	return err
}

// run sends calls to the device's own driver and cuBLAS.
func (g *graphs) run(calls []gcall) error {
	for i := range calls {
		if err := calls[i].exec(g.drv, g.api); err != nil {
			return err
		}
	}
	return nil
}

// graphMismatch turns a verified region eager: the calls matched so far
// run now, and e's graph is destroyed (captured again when its key comes
// twice in a row; the key stays eager after graphMaxFails mismatches in a
// row). The caller restored the driver or goes on in graphEager.
func (d *device) graphMismatch(e *graphEntry) error {
	g := &d.graphs
	g.Stats.Mismatches++
	matched := e.calls[:g.pos]
	if g.plant == "dropprefix" {
		matched = nil
	}
	err := g.run(matched)
	d.destroyGraph(e)
	e.calls = nil
	if e.fails++; e.fails >= graphMaxFails {
		e.eager = true
	}
	return err
}

// goEager is called at a call that cannot be in the graph (a copy between
// host and device, a wait) or does not match it: what the region queued
// so far goes to the driver and the rest of the region runs eager.
func (d *device) goEager() error {
	g := &d.graphs
	e := g.cur
	mode := g.mode
	g.mode, g.cur = graphEager, nil
	switch mode {
	case graphCapture:
		g.Stats.Aborts++
		if exec, err := g.drv.(grapher).endCapture(); err == nil {
			g.drv.(grapher).destroyGraph(exec)
		}
		e.eager = true
		err := g.run(e.calls)
		e.calls = nil
		return err
	case graphVerify:
		return d.graphMismatch(e)
	}
	return nil
}

// graphRec is the driver and cuBLAS of a device in a region: the calls
// that can be in a graph are recorded (graphCapture, and sent on to the
// capturing stream), compared (graphVerify) or sent on (graphEager); a
// copy between host and device or a wait ends the capture or the
// verification first.
type graphRec struct{ d *device }

func (r *graphRec) g() *graphs { return &r.d.graphs }

// call handles one call that a graph may hold.
func (r *graphRec) call(c gcall) error {
	g := r.g()
	switch g.mode {
	case graphCapture:
		c.args = slices.Clone(c.args)
		g.cur.calls = append(g.cur.calls, c)
		if err := c.exec(g.drv, g.api); err != nil {
			// the capture refused the call: the region's calls so far, this
			// one included, run eager instead
			return r.d.goEager()
		}
		return nil
	case graphVerify:
		if g.pos < len(g.cur.calls) && (g.plant == "noverify" || g.cur.calls[g.pos].same(&c)) {
			g.pos++
			return nil
		}
		if err := r.d.goEager(); err != nil {
			return err
		}
	}
	return c.exec(g.drv, g.api)
}

// out ends a capture or a verification before a call that no graph holds.
func (r *graphRec) out() error {
	if m := r.g().mode; m == graphCapture || m == graphVerify {
		return r.d.goEager()
	}
	return nil
}

func (r *graphRec) lock() (func(), error)                   { return r.g().drv.lock() }
func (r *graphRec) malloc(bytes int64) (dptr, error)        { return r.g().drv.malloc(bytes) }
func (r *graphRec) free(p dptr) error                       { return r.g().drv.free(p) }
func (r *graphRec) memInfo() (free, total int64, err error) { return r.g().drv.memInfo() }

func (r *graphRec) htod(dst dptr, src unsafe.Pointer, bytes int64) error {
	if err := r.out(); err != nil {
		return err
	}
	return r.g().drv.htod(dst, src, bytes)
}

func (r *graphRec) dtoh(dst unsafe.Pointer, src dptr, bytes int64) error {
	if err := r.out(); err != nil {
		return err
	}
	return r.g().drv.dtoh(dst, src, bytes)
}

func (r *graphRec) sync() error {
	if err := r.out(); err != nil {
		return err
	}
	return r.g().drv.sync()
}

func (r *graphRec) dtod(dst, src dptr, bytes int64) error {
	return r.call(gcall{kind: callDtoD, A: dst, B: src, m: int(bytes)})
}

func (r *graphRec) zero(p dptr, bytes int64) error {
	return r.call(gcall{kind: callZero, A: p, m: int(bytes)})
}

func (r *graphRec) launch(kernel string, grid int, args []uint64) error {
	return r.call(gcall{kind: callLaunch, name: kernel, grid: grid, args: args})
}

// enter and leave the emulator's memory guard (guard), as the driver does.
func (r *graphRec) enter() {
	if gd, ok := r.g().drv.(guard); ok {
		gd.enter()
	}
}

func (r *graphRec) leave() {
	if gd, ok := r.g().drv.(guard); ok {
		gd.leave()
	}
}

func (r *graphRec) sgemm(transA, transB bool, m, n, k int, alpha float32, A dptr, lda int,
	B dptr, ldb int, beta float32, C dptr, ldc int) error {
	return r.call(gcall{kind: callSgemm, ta: transA, tb: transB, m: m, n: n, k: k, alpha: alpha, A: A, lda: lda,
		B: B, ldb: ldb, beta: beta, C: C, ldc: ldc})
}

func (r *graphRec) sgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
	A dptr, lda, strideA int, B dptr, ldb, strideB int, beta float32,
	C dptr, ldc, strideC, count int) error {
	return r.call(gcall{kind: callSgemmSB, ta: transA, tb: transB, m: m, n: n, k: k, alpha: alpha, A: A, lda: lda,
		sa: strideA, B: B, ldb: ldb, sb: strideB, beta: beta, C: C, ldc: ldc, sc: strideC, count: count})
}

func (r *graphRec) gemmEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda int, B dptr, bt DataType, ldb int, beta float32,
	C dptr, ct DataType, ldc int, compute ComputeType) error {
	return r.call(gcall{kind: callGemmEx, ta: transA, tb: transB, m: m, n: n, k: k, alpha: alpha, A: A, at: at,
		lda: lda, B: B, bt: bt, ldb: ldb, beta: beta, C: C, ct: ct, ldc: ldc, compute: compute})
}

func (r *graphRec) gemmStridedBatchedEx(transA, transB bool, m, n, k int, alpha float32,
	A dptr, at DataType, lda, strideA int, B dptr, bt DataType, ldb, strideB int, beta float32,
	C dptr, ct DataType, ldc, strideC, count int, compute ComputeType) error {
	return r.call(gcall{kind: callGemmSBEx, ta: transA, tb: transB, m: m, n: n, k: k, alpha: alpha, A: A, at: at,
		lda: lda, sa: strideA, B: B, bt: bt, ldb: ldb, sb: strideB, beta: beta, C: C, ct: ct, ldc: ldc,
		sc: strideC, count: count, compute: compute})
}

func (r *graphRec) library() string { return r.g().api.library() }

// DecodeGraphs reports whether decode steps run as graphs where the
// driver can capture them: on unless SetDecodeGraphs(false) or
// RLHOST_CUDA_GRAPHS=0 when the device opened.
func (b *Backend) DecodeGraphs() bool {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	_, ok := b.d.drv.(grapher)
	if b.d.graphs.mode != graphIdle {
		ok = true
	}
	return ok && !b.d.graphs.off
}

// SetDecodeGraphs switches decode graphs on or off for the regions from
// now on; off drops the graphs kept.
func (b *Backend) SetDecodeGraphs(on bool) {
	b.d.run("SetDecodeGraphs", func(*arena) {
		b.d.graphs.off = !on
		if !on {
			b.d.dropGraphs()
		}
	})
}

// dropGraphs destroys every graph kept.
func (d *device) dropGraphs() {
	g := &d.graphs
	for len(g.list) > 0 {
		d.dropGraph(g.list[0])
	}
}

// GraphStats returns the decode graphs' counts so far.
func (b *Backend) GraphStats() GraphStats {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	return b.d.graphs.Stats
}

// BeginDecodeGraph starts the region of a decode step of key (see
// gpu.DecodeGraph): its ops' calls are recorded, captured or compared
// with the key's graph until EndDecodeGraph.
func (b *Backend) BeginDecodeGraph(key uint64) {
	b.d.run("BeginDecodeGraph", func(*arena) { b.d.beginGraph(key) })
}

// EndDecodeGraph ends the region: its graph runs (one launch), or its
// calls have run eager.
func (b *Backend) EndDecodeGraph() {
	b.d.run("EndDecodeGraph", func(*arena) { must(b.d.endGraph()) })
}
