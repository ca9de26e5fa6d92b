package tracing

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	sdkplugin "github.com/rlhost/rlhost/sdk/plugin"
	"github.com/rlhost/rlhost/sdk/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Export tuning (variables so that tests can shorten them).
var (
	batchSpans    = 512                    // spans per Export call
	batchWait     = 200 * time.Millisecond // how long a partial batch waits for more spans
	exportTimeout = 30 * time.Second       // one Export call
	minRetry      = 200 * time.Millisecond // first retry of a failing backend
	maxRetry      = 15 * time.Second
)

type counts struct{ exported, spooled, dropped, queued int64 }

// exporter ships one backend's spans: a bounded queue, a worker, a spool directory.
type exporter struct {
	name    string
	b       trace.Backend
	runInfo trace.Run
	spool   string
	limit   int
	log     hclog.Logger

	mu       sync.Mutex
	queue    []trace.Span
	wake     chan struct{} // a span was queued, or close was called
	closing  bool
	done     chan struct{} // the worker returned
	needInit bool

	exported, spooled, dropped atomic.Int64
	spoolSeq                   int
	failures                   int
	retryAt                    time.Time
}

func newExporter(name string, b trace.Backend, run trace.Run, spool string, limit int, log hclog.Logger) *exporter {
	e := &exporter{name: name, b: b, runInfo: run, spool: spool, limit: limit, log: log.Named(name),
		wake: make(chan struct{}, 1), done: make(chan struct{}), needInit: true}
	e.spooled.Store(int64(e.spoolSpans()))
	return e
}

func (e *exporter) counts() counts {
	e.mu.Lock()
	q := int64(len(e.queue))
	e.mu.Unlock()
	return counts{exported: e.exported.Load(), spooled: e.spooled.Load(), dropped: e.dropped.Load(), queued: q}
}

// enqueue never blocks: a full queue drops the span.
func (e *exporter) enqueue(s trace.Span) {
	e.mu.Lock()
	if e.closing || len(e.queue) >= e.limit {
		e.mu.Unlock()
		e.dropped.Add(1)
		return
	}
	e.queue = append(e.queue, s)
	n := len(e.queue)
	e.mu.Unlock()
	if n == 1 || n >= batchSpans {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

func (e *exporter) init(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	if _, err := e.b.Init(ctx, e.runInfo); err != nil {
		return err
	}
	e.needInit = false
	return nil
}

// temporary reports whether err means "try again later": the backend is out of reach,
// overloaded, slow, not initialised (a restarted plugin) or its plugin process died.
func temporary(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, trace.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ce *sdkplugin.CallError
	if errors.As(err, &ce) && ce.Exited {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Aborted, codes.FailedPrecondition, codes.Canceled:
		return true
	}
	return strings.Contains(err.Error(), "exited during") || strings.Contains(err.Error(), "waiting to restart")
}

// send exports one batch, initialising the backend first when needed (after a restart of its
// plugin, which answers FailedPrecondition until Init).
func (e *exporter) send(spans []trace.Span) error {
	if e.needInit {
		if err := e.init(context.Background()); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), exportTimeout)
	err := e.b.Export(ctx, spans)
	cancel()
	if err != nil && (status.Code(err) == codes.FailedPrecondition || isExited(err)) {
		e.needInit = true
	}
	return err
}

func isExited(err error) bool {
	var ce *sdkplugin.CallError
	return errors.As(err, &ce) && ce.Exited
}

func (e *exporter) backoff() {
	e.failures++
	d := minRetry
	for i := 1; i < e.failures && d < maxRetry; i++ {
		d *= 2
	}
	e.retryAt = time.Now().Add(min(d, maxRetry))
}

// run is the worker: it takes batches off the queue and sends them, or spools them while the
// backend is failing, and replays the spool when the backend answers again.
func (e *exporter) run() {
	defer close(e.done)
	timer := time.NewTimer(batchWait)
	defer timer.Stop()
	for {
		e.mu.Lock()
		n, closing := len(e.queue), e.closing
		e.mu.Unlock()
		if n < batchSpans && !closing {
			wait := batchWait
			if n == 0 {
				wait = time.Second
			}
			if e.spooled.Load() > 0 || e.needInit {
				wait = max(min(wait, time.Until(e.retryAt)), time.Millisecond)
			}
			timer.Reset(wait)
			select {
			case <-e.wake:
				if n == 0 { // give a batch a moment to fill
					time.Sleep(min(batchWait, 20*time.Millisecond))
				}
			case <-timer.C:
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		e.step()
		e.mu.Lock()
		done := e.closing && len(e.queue) == 0
		e.mu.Unlock()
		if done {
			return
		}
	}
}

// step does one round of work: replay the spool if it is time, then send or spool a batch.
func (e *exporter) step() {
	if e.spooled.Load() > 0 && !time.Now().Before(e.retryAt) {
		e.replay()
	}
	e.mu.Lock()
	n := min(len(e.queue), batchSpans)
	batch := append([]trace.Span(nil), e.queue[:n]...)
	e.queue = append(e.queue[:0], e.queue[n:]...)
	e.mu.Unlock()
	if n == 0 {
		if e.needInit && !time.Now().Before(e.retryAt) {
			if err := e.init(context.Background()); err != nil {
				e.backoff()
			} else {
				e.failures = 0
			}
		}
		return
	}
	// While the backend is failing (or has a spool to replay first), new batches go to the
	// spool, in order, so memory stays free.
	if e.spooled.Load() > 0 || (e.failures > 0 && time.Now().Before(e.retryAt)) {
		e.toSpool(batch)
		return
	}
	if err := e.send(batch); err != nil {
		e.failed(batch, err)
		return
	}
	e.failures = 0
	e.exported.Add(int64(len(batch)))
}

func (e *exporter) failed(batch []trace.Span, err error) {
	if temporary(err) {
		if e.failures == 0 {
			e.log.Warn("trace backend failing; spooling spans and retrying", "error", err)
		}
		e.backoff()
		e.toSpool(batch)
		return
	}
	e.log.Error("trace backend rejected a batch; dropping it", "spans", len(batch), "error", err)
	e.dropped.Add(int64(len(batch)))
}

// spoolFile is one spooled batch: RUN_DIR/traces/spool/<backend>/<seq>.jsonl, a span a line.
type spoolSpan struct {
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	ParentID   string         `json:"parent_id,omitempty"`
	Name       string         `json:"name"`
	Start      int64          `json:"start_unix_nano"`
	End        int64          `json:"end_unix_nano"`
	Attributes map[string]any `json:"attributes,omitempty"`
	Inputs     string         `json:"inputs,omitempty"`
	Outputs    string         `json:"outputs,omitempty"`
	Error      string         `json:"error,omitempty"`
}

func (e *exporter) spoolFiles() []string {
	files, _ := filepath.Glob(filepath.Join(e.spool, "*.jsonl"))
	sort.Strings(files)
	return files
}

// spoolSpans counts the spans of an existing spool (left by a previous run of the same
// directory) and sets the next sequence number past it.
func (e *exporter) spoolSpans() int {
	n := 0
	for _, f := range e.spoolFiles() {
		var seq int
		fmt.Sscanf(filepath.Base(f), "%d.jsonl", &seq)
		e.spoolSeq = max(e.spoolSeq, seq+1)
		n += lineCount(f)
	}
	return n
}

func (e *exporter) toSpool(batch []trace.Span) {
	if err := os.MkdirAll(e.spool, 0o755); err != nil {
		e.log.Error("cannot create the spool; dropping spans", "dir", e.spool, "error", err)
		e.dropped.Add(int64(len(batch)))
		return
	}
	name := filepath.Join(e.spool, fmt.Sprintf("%012d.jsonl", e.spoolSeq))
	e.spoolSeq++
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err == nil {
		w := bufio.NewWriter(f)
		err = EncodeSpans(w, batch)
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, name)
		}
	}
	if err != nil {
		os.Remove(tmp)
		e.log.Error("cannot write the spool; dropping spans", "file", name, "error", err)
		e.dropped.Add(int64(len(batch)))
		return
	}
	e.spooled.Add(int64(len(batch)))
}

// spoolAttrs keeps attribute types through JSON: integral floats get a ".0" (so that they come
// back as float64, not int64), NaN and infinities become strings.
func spoolAttrs(a map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		if f, ok := v.(float64); ok {
			switch {
			case math.IsNaN(f) || math.IsInf(f, 0):
				v = fmt.Sprint(f)
			case f == math.Trunc(f) && math.Abs(f) < 1e21:
				v = json.Number(strconv.FormatFloat(f, 'f', 1, 64))
			}
		}
		out[k] = v
	}
	return out
}

// EncodeSpans writes spans as JSON lines, a span a line, keeping the attributes' types
// (DecodeSpans reads them back): the spool's format, and how a rank's spans travel to rank 0.
func EncodeSpans(w io.Writer, spans []trace.Span) error {
	enc := json.NewEncoder(w)
	for _, s := range spans {
		if err := enc.Encode(spoolSpan{TraceID: s.TraceID, SpanID: s.SpanID, ParentID: s.ParentID, Name: s.Name,
			Start: s.Start.UnixNano(), End: s.End.UnixNano(), Attributes: spoolAttrs(s.Attributes), Inputs: s.Inputs,
			Outputs: s.Outputs, Error: s.Error}); err != nil {
			return err
		}
	}
	return nil
}

// readSpool reads a spool file back; integers in attributes come back as int64.
func readSpool(path string) ([]trace.Span, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return DecodeSpans(f, "spool "+path)
}

// DecodeSpans reads EncodeSpans' lines back; integers in attributes come back as int64. what
// names the source in errors.
func DecodeSpans(r io.Reader, what string) ([]trace.Span, error) {
	var out []trace.Span
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	line := 0
	for sc.Scan() {
		line++
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		var s spoolSpan
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("tracing: %s line %d: %w", what, line, err)
		}
		if s.Attributes == nil {
			s.Attributes = map[string]any{}
		}
		for k, v := range s.Attributes {
			if n, ok := v.(json.Number); ok {
				if i, err := n.Int64(); err == nil && !strings.ContainsAny(n.String(), ".eE") {
					s.Attributes[k] = i
				} else if f, err := n.Float64(); err == nil {
					s.Attributes[k] = f
				}
			}
		}
		out = append(out, trace.Span{TraceID: s.TraceID, SpanID: s.SpanID, ParentID: s.ParentID, Name: s.Name,
			Start: time.Unix(0, s.Start), End: time.Unix(0, s.End), Attributes: s.Attributes, Inputs: s.Inputs,
			Outputs: s.Outputs, Error: s.Error})
	}
	return out, sc.Err()
}

// replay sends spooled batches, oldest first, until one fails.
func (e *exporter) replay() {
	for _, f := range e.spoolFiles() {
		spans, err := readSpool(f)
		if err != nil {
			e.log.Error("unreadable spool file; set aside as .bad", "file", f, "error", err)
			n := int64(lineCount(f))
			e.dropped.Add(n)
			e.spooled.Add(-n)
			os.Rename(f, f+".bad")
			continue
		}
		if err := e.send(spans); err != nil {
			if temporary(err) {
				e.backoff()
				return
			}
			e.log.Error("trace backend rejected a spooled batch; dropping it", "file", f, "error", err)
			e.dropped.Add(int64(len(spans)))
		} else {
			e.exported.Add(int64(len(spans)))
			e.failures = 0
		}
		os.Remove(f)
		e.spooled.Add(-int64(len(spans)))
	}
}

// close drains the queue through the worker, replays the spool while ctx allows, then flushes
// and shuts the backend down.
func (e *exporter) close(ctx context.Context) error {
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return fmt.Errorf("closing with spans still queued: %w", ctx.Err())
	}
	for e.spooled.Load() > 0 {
		if wait := time.Until(e.retryAt); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				left := e.spooled.Load()
				e.stopBackend(context.Background())
				return fmt.Errorf("%d spans are still spooled in %s (retried on the next run of this directory): %w", left, e.spool, ctx.Err())
			}
		}
		e.replay()
	}
	var errs []error
	fctx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	if !e.needInit {
		if err := e.b.Flush(fctx); err != nil {
			errs = append(errs, fmt.Errorf("Flush: %w", err))
		}
	}
	if err := e.stopBackend(fctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (e *exporter) stopBackend(ctx context.Context) error {
	var err error
	if !e.needInit {
		if err = e.b.Shutdown(ctx); err != nil {
			err = fmt.Errorf("Shutdown: %w", err)
		}
	}
	if c, ok := e.b.(interface{ Close() }); ok {
		c.Close()
	}
	return err
}

func lineCount(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}
