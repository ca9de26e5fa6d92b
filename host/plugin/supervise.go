package plugin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	sdkplugin "github.com/rlhost/rlhost/sdk/plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Supervisor keeps one plugin process running: it starts it on first use, restarts it with
// exponential backoff after a crash, a failed health check or a call that ran out of time
// while the plugin stopped answering, and turns call failures into errors that name the
// plugin, the call, what it was for (a trajectory) and the plugin's last log lines.
type Supervisor struct {
	bin  Binary
	opts Options

	// OnStart runs after every (re)start, before the process is used, e.g. to configure it.
	OnStart func(ctx context.Context, p *Process) error
	// MinBackoff and MaxBackoff bound the wait between restarts (default 100ms .. 10s).
	MinBackoff, MaxBackoff time.Duration
	// HealthInterval is how often a running plugin is pinged (default 5s; <0 disables).
	HealthInterval time.Duration
	// HealthTimeout bounds each health check (default 5s).
	HealthTimeout time.Duration

	mu        sync.Mutex
	proc      *Process
	starts    int
	failures  int // consecutive crashes, for the backoff
	notBefore time.Time
	closed    bool
	stopPing  chan struct{}
	stopping  sync.WaitGroup // processes being stopped in the background (retire)

	pending map[uint64]Pending // calls in flight
	nextID  uint64
}

// NewSupervisor returns a supervisor for bin; nothing starts until the first call.
func NewSupervisor(bin Binary, opts Options) *Supervisor {
	return &Supervisor{bin: bin, opts: opts, MinBackoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second,
		HealthInterval: 5 * time.Second, HealthTimeout: sdkplugin.DefaultHealthTimeout, pending: map[uint64]Pending{}}
}

// Binary returns the supervised binary.
func (s *Supervisor) Binary() Binary { return s.bin }

// Starts returns how many times the process was started (1 + restarts).
func (s *Supervisor) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// ErrClosed is returned by calls after Close.
var ErrClosed = errors.New("plugin: closed")

// ErrTimeout marks a call that got no answer within its deadline (errors.Is).
var ErrTimeout = errors.New("timed out")

// Process returns the running process, starting or restarting it as needed.
func (s *Supervisor) Process(ctx context.Context) (*Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: %s", ErrClosed, s.bin.FileName())
	}
	if s.proc != nil && !s.proc.Exited() {
		return s.proc, nil
	}
	if s.proc != nil { // it died since the last call
		s.proc.Kill()
		s.proc = nil
		s.failures++
		s.notBefore = time.Now().Add(s.backoff())
	}
	if wait := time.Until(s.notBefore); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("plugin %s: waiting to restart: %w", s.bin.FileName(), ctx.Err())
		}
	}
	p, err := Launch(ctx, s.bin, s.opts)
	s.starts++
	if err == nil && s.OnStart != nil {
		if err = s.OnStart(ctx, p); err != nil {
			err = s.wrap(p, "start", "start", err)
			p.Kill()
		}
	}
	if err != nil {
		s.failures++
		s.notBefore = time.Now().Add(s.backoff())
		return nil, err
	}
	s.proc = p
	s.startPingLocked(p)
	return p, nil
}

func (s *Supervisor) backoff() time.Duration {
	d := s.MinBackoff
	for i := 1; i < s.failures && d < s.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.MaxBackoff)
}

// startPingLocked pings p's health service periodically; two failures in a row retire it, so
// the next call restarts it.
func (s *Supervisor) startPingLocked(p *Process) {
	if s.HealthInterval < 0 {
		return
	}
	if s.stopPing != nil {
		close(s.stopPing)
	}
	stop := make(chan struct{})
	s.stopPing = stop
	go func() {
		t := time.NewTicker(s.HealthInterval)
		defer t.Stop()
		misses := 0
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if p.Exited() {
				return
			}
			if err := s.ping(p); err != nil {
				misses++
				if misses >= 2 {
					warnf(s.opts, "plugin failed its health check twice; stopping it (the next call restarts it)", "plugin", s.bin.FileName(), "error", err)
					s.retire(p)
					return
				}
			} else {
				misses = 0
			}
		}
	}()
}

func (s *Supervisor) ping(p *Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.HealthTimeout)
	defer cancel()
	return p.PingContext(ctx)
}

// retire takes p out of service: the next call starts a new process (after the backoff) while
// p is stopped in the background (Close waits for it).
func (s *Supervisor) retire(p *Process) {
	s.mu.Lock()
	if s.closed { // Close stops the current process itself
		s.mu.Unlock()
		return
	}
	if s.proc == p {
		s.proc = nil
		s.failures++
		s.notBefore = time.Now().Add(s.backoff())
	}
	s.stopping.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.stopping.Done()
		p.Kill()
	}()
}

func warnf(o Options, msg string, args ...interface{}) {
	if o.Logger != nil {
		o.Logger.Warn(msg, args...)
	}
}

// Call runs f against the process and wraps its error.
func (s *Supervisor) Call(ctx context.Context, call string, f func(p *Process) error) error {
	p, err := s.Process(ctx)
	if err != nil {
		return err
	}
	err = f(p)
	if err == nil {
		s.succeeded()
		return nil
	}
	return s.wrap(p, call, call, err)
}

func (s *Supervisor) succeeded() {
	s.mu.Lock()
	s.failures = 0
	s.mu.Unlock()
}

// errDeadline is the cause of a call's own deadline (CallWithin).
var errDeadline = errors.New("the call's deadline")

// CallWithin runs f against the process with a deadline of limit, counted from when the
// process is ready (a restart has its own bounds). what says what the call is for
// ("trajectory s1-0-1": errors then speak of "Obs of trajectory s1-0-1"; "" for nothing) and
// key which setting sets limit ("task.timeouts.obs"). When the deadline passes, f's context is
// cancelled (gRPC cancels the call in the plugin) and the error, one line, names the plugin,
// the call, what it was for, the limit and the time taken; the plugin is then asked for its
// health, and one that does not answer is stopped and restarted on the next call. The call is
// listed by Pending while it runs. limit <= 0 means no deadline.
func (s *Supervisor) CallWithin(ctx context.Context, call, what string, limit time.Duration, key string, f func(ctx context.Context, p *Process) error) error {
	p, err := s.Process(ctx)
	if err != nil {
		return err
	}
	label := call
	if what != "" {
		label = call + " of " + what
	}
	start := time.Now()
	id := s.track(Pending{Plugin: s.bin.FileName(), Call: call, What: what, Since: start})
	defer s.untrack(id)
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if limit > 0 {
		cctx, cancel = context.WithTimeoutCause(ctx, limit, errDeadline)
	}
	defer cancel()
	err = f(cctx, p)
	if err == nil {
		s.succeeded()
		return nil
	}
	// The plugin's gRPC server ends the call at the deadline it was sent, which can come a
	// moment before this side's timer, and a caller may have set the same deadline (the reward
	// manager does): a DeadlineExceeded at the deadline is this call's timeout too.
	took := time.Since(start)
	atLimit := took >= limit-limit/10
	callerLate := ctx.Err() != nil && !(errors.Is(ctx.Err(), context.DeadlineExceeded) && atLimit)
	if limit > 0 && !callerLate && !p.Exited() && (errors.Is(context.Cause(cctx), errDeadline) ||
		status.Code(err) == codes.DeadlineExceeded && atLimit) {
		return s.timedOut(p, call, label, limit, key, took, err)
	}
	return s.wrap(p, call, label, err)
}

// timedOut is the error of a call that got no answer within limit; it retires p when p does
// not answer a health check either.
func (s *Supervisor) timedOut(p *Process, call, label string, limit time.Duration, key string, took time.Duration, err error) error {
	name := s.bin.FileName()
	setting := ""
	if key != "" {
		setting = " (" + key + ")"
	}
	msg := fmt.Sprintf("plugin %s: %s got no answer within %s%s and was cancelled after %s", name, label, limit, setting,
		took.Round(time.Millisecond))
	if perr := s.ping(p); perr != nil {
		if p.Exited() {
			return s.wrap(p, call, label, err)
		}
		msg += fmt.Sprintf("; the plugin does not answer health checks either (%v): it is stopped and restarts on the next call", oneLine(perr.Error()))
		warnf(s.opts, "a plugin call ran out of time and the plugin does not answer health checks: stopping it", "plugin", name, "call", label)
		s.retire(p)
	} else {
		msg += "; the plugin still answers health checks"
	}
	return sdkplugin.NewCallError(name, call, false, fmt.Errorf("%w: %w", ErrTimeout, err), msg)
}

// wrap names the plugin and the call (label: the call and what it was for); if the process
// died (now or within a moment, as it does when it crashes mid-call), it says so and adds the
// plugin's last log lines.
func (s *Supervisor) wrap(p *Process, call, label string, err error) error {
	name := s.bin.FileName()
	code := status.Code(err)
	exited := p.Exited()
	if !exited && (code == codes.Unavailable || code == codes.Canceled || code == codes.Internal && strings.Contains(err.Error(), "transport")) {
		// The connection broke: give the process a moment to be reaped.
		for i := 0; i < 20 && !p.Exited(); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		exited = p.Exited()
	}
	var msg string
	if exited {
		msg = fmt.Sprintf("plugin %s exited during %s", name, label)
		if st := p.ExitStatus(); st != "" {
			msg += " (" + st + ")"
		}
		if logs := p.LastLogs(); len(logs) > 0 {
			msg += "; its last log lines:\n  " + strings.Join(logs, "\n  ")
		} else {
			msg += " (it wrote no log lines)"
		}
	} else {
		desc := err.Error()
		if st, ok := status.FromError(err); ok {
			desc = fmt.Sprintf("%s (%s)", st.Message(), st.Code())
		}
		msg = fmt.Sprintf("plugin %s: %s: %s", name, label, desc)
	}
	return sdkplugin.NewCallError(name, call, exited, err, msg)
}

// oneLine joins the lines of s with " | ".
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " | ")
}

// Pending is a call in flight.
type Pending struct {
	Plugin string    // the plugin's file name, rlhost-task-NAME
	Call   string    // the RPC
	What   string    // what it is for ("trajectory s1-0-1", "4 items"), or ""
	Since  time.Time // when it was sent
}

func (s *Supervisor) track(p Pending) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.pending[s.nextID] = p
	return s.nextID
}

func (s *Supervisor) untrack(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// Pending lists the calls in flight, oldest first.
func (s *Supervisor) Pending() []Pending {
	s.mu.Lock()
	out := make([]Pending, 0, len(s.pending))
	for _, p := range s.pending {
		out = append(out, p)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// Close stops the process and waits for it to exit (and for any being stopped in the background).
func (s *Supervisor) Close() {
	s.mu.Lock()
	s.closed = true
	if s.stopPing != nil {
		close(s.stopPing)
		s.stopPing = nil
	}
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
	s.stopping.Wait()
}
