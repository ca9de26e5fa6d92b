package conformance

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rlhost/rlhost/sdk/plugin"
)

// MinLife is how long after its start a plugin must still be running and SERVING when the
// checks are done: the checks of a quick plugin take less than a second, and a plugin that
// exits (or stops answering) soon after its start would otherwise pass them.
const MinLife = 2 * time.Second

// healthEvery is how often the plugin's health is asked while the checks run.
const healthEvery = 250 * time.Millisecond

// healthWatch asks a plugin's health service periodically while the checks run, and records
// the first time it has exited or failed two health checks in a row.
type healthWatch struct {
	p       *plugin.Process
	started time.Time
	quit    chan struct{}
	done    chan struct{}

	mu   sync.Mutex
	fail error
}

func watchHealth(p *plugin.Process, every time.Duration) *healthWatch {
	w := &healthWatch{p: p, started: time.Now(), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		misses := 0
		for {
			select {
			case <-w.quit:
				return
			case <-t.C:
			}
			if w.probe(&misses, every*4) {
				return
			}
		}
	}()
	return w
}

// probe asks once; it reports true when the plugin has failed for good.
func (w *healthWatch) probe(misses *int, timeout time.Duration) bool {
	if w.p.Exited() {
		w.record(w.exitedError())
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Second))
	err := w.p.PingContext(ctx)
	cancel()
	if err == nil {
		*misses = 0
		return false
	}
	if w.p.Exited() {
		w.record(w.exitedError())
		return true
	}
	if *misses++; *misses >= 2 {
		w.record(fmt.Errorf("the plugin stopped answering health checks %s after its start (service \"plugin\": %v); the host restarts such a plugin",
			time.Since(w.started).Round(10*time.Millisecond), err))
		return true
	}
	return false
}

func (w *healthWatch) exitedError() error {
	msg := fmt.Sprintf("the plugin exited %s after its start, while it was being checked", time.Since(w.started).Round(10*time.Millisecond))
	if st := w.p.ExitStatus(); st != "" {
		msg += " (" + st + ")"
	}
	if logs := w.p.LastLogs(); len(logs) > 0 {
		msg += "; its last log lines:\n  " + strings.Join(logs, "\n  ")
	}
	return fmt.Errorf("%s", msg)
}

// failed returns the failure recorded so far, nil while the plugin is well.
func (w *healthWatch) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fail
}

func (w *healthWatch) record(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail == nil {
		w.fail = err
	}
}

// stop keeps watching until the time until, asks once more and stops; it returns the first
// failure seen.
func (w *healthWatch) stop(until time.Time) error {
	if d := time.Until(until); d > 0 {
		select {
		case <-w.done:
		case <-time.After(d):
		}
	}
	close(w.quit)
	<-w.done
	w.mu.Lock()
	failed := w.fail != nil
	w.mu.Unlock()
	if !failed {
		misses := 1 // one failed answer now is enough
		w.probe(&misses, time.Second)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fail
}

// checkStrayStdout fails a plugin that wrote to stdout after its handshake line.
func checkStrayStdout(p *plugin.Process) error {
	n, first := p.StrayStdout()
	if n == 0 {
		return nil
	}
	return fmt.Errorf("it wrote %d line(s) to stdout after the handshake line (the first: %q): stdout carries only the handshake; "+
		"write logs to stderr (hclog JSON), which the host shows under the plugin's name", n, trunc(first))
}
