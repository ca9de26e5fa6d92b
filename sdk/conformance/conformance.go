// Package conformance checks that a plugin keeps the rlhost protocol: the same checks run from
// `go test` (RunTask in-process, RunBinary against a built binary) and from
// `rlhost conformance BINARY` (CheckBinary, a report for people, exit 1 on any failure).
//
// A task plugin is checked for: refusing to run without the cookie; a well-formed handshake
// line; protocol-version negotiation; health SERVING; a consistent Info whose tool schemas are
// valid JSON Schema; Preprocess / Prompt / Start / Obs / End / Score round trips on the
// plugin's own samples; InvalidArgument / NotFound (not a crash) for unknown instance ids and
// malformed arguments; 64 concurrent trajectories; staying up and answering health checks for
// the whole run (at least MinLife); Shutdown within 2 s; nothing on stdout after the handshake
// line; hclog JSON on stderr. A handler's panic fails its check with the panic's one-line
// message (the Go SDK recovers it, naming the plugin's frames).
package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rlhost/rlhost/sdk/plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Result is the outcome of one check.
type Result struct {
	Name     string
	Err      error  // nil: passed
	Skipped  string // non-empty: not applicable, with the reason
	Duration time.Duration
}

// Passed reports whether the check passed or was skipped.
func (r Result) Passed() bool { return r.Err == nil }

// Report is the outcome of all checks on one plugin.
type Report struct {
	Plugin  string
	Kind    string
	Results []Result
}

// Failed reports whether any check failed.
func (r Report) Failed() bool {
	for _, x := range r.Results {
		if x.Err != nil {
			return true
		}
	}
	return false
}

// Counts returns the numbers of passed, failed and skipped checks.
func (r Report) Counts() (passed, failed, skipped int) {
	for _, x := range r.Results {
		switch {
		case x.Err != nil:
			failed++
		case x.Skipped != "":
			skipped++
		default:
			passed++
		}
	}
	return
}

// Write prints the report for people.
func (r Report) Write(w io.Writer) {
	fmt.Fprintf(w, "conformance of %s (%s plugin)\n", r.Plugin, r.Kind)
	for _, x := range r.Results {
		switch {
		case x.Err != nil:
			fmt.Fprintf(w, "  FAIL  %-28s %s\n", x.Name, indent(x.Err.Error()))
		case x.Skipped != "":
			fmt.Fprintf(w, "  skip  %-28s %s\n", x.Name, x.Skipped)
		default:
			fmt.Fprintf(w, "  ok    %-28s %s\n", x.Name, x.Duration.Round(time.Millisecond))
		}
	}
	p, f, s := r.Counts()
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", p, f, s)
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat(" ", 36)) }

// errSkip marks a check as not applicable.
type errSkip struct{ reason string }

func (e errSkip) Error() string { return "skipped: " + e.reason }

func skip(format string, args ...any) error { return errSkip{fmt.Sprintf(format, args...)} }

// check is one named check against a connected plugin.
type check struct {
	name string
	run  func(ctx context.Context, c *session) error
}

// session is what checks see: the connection and, for a real binary, the process.
type session struct {
	conn   grpc.ClientConnInterface
	binary string // "" in-process
	name   string // expected plugin name (from the binary), "" if unknown
	proc   *plugin.Process
	health *healthWatch // nil in-process
	state  map[string]any
}

// exited reports whether the plugin process has exited, giving it a moment to be reaped after
// a broken connection.
func (s *session) exited(err error) bool {
	if s.proc == nil {
		return false
	}
	if err != nil && status.Code(err) == codes.Unavailable || strings.Contains(fmt.Sprint(err), "Unavailable") {
		for i := 0; i < 50 && !s.proc.Exited(); i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return s.proc.Exited()
}

// timedOut reports whether err is the check's own deadline passing. gRPC can report it before
// the context's timer fires: the server cancels the stream at the deadline it was sent
// (DeadlineExceeded, "stream terminated by RST_STREAM"), so a DeadlineExceeded status within the
// last tenth of the time budget counts too; one returned early is the plugin's own error.
func timedOut(ctx context.Context, err error, timeout time.Duration) bool {
	if err == nil {
		return false
	}
	if ctx.Err() == context.DeadlineExceeded {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && status.Code(err) == codes.DeadlineExceeded && time.Until(deadline) <= timeout/10
}

func runChecks(ctx context.Context, s *session, checks []check, results *[]Result, timeout time.Duration) {
	for i, c := range checks {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := safeRun(cctx, c, s)
		if timedOut(cctx, err, timeout) {
			err = fmt.Errorf("no answer within %s (does the plugin hang?): %w", timeout, err)
		}
		cancel()
		if s.exited(err) {
			how := ""
			if st := s.proc.ExitStatus(); st != "" {
				how = ", " + st
			}
			msg := fmt.Sprintf("the plugin exited during this check (%v%s); its last log lines:\n  %s", err, how,
				strings.Join(s.proc.LastLogs(), "\n  "))
			*results = append(*results, Result{Name: c.name, Duration: time.Since(start), Err: errors.New(msg)})
			for _, rest := range checks[i+1:] {
				*results = append(*results, Result{Name: rest.name, Err: fmt.Errorf("not run: the plugin exited during %q", c.name)})
			}
			return
		}
		if s.health != nil {
			if herr := s.health.failed(); herr != nil {
				*results = append(*results, Result{Name: c.name, Duration: time.Since(start), Err: fmt.Errorf("%v (%w)", err, herr)})
				for _, rest := range checks[i+1:] {
					*results = append(*results, Result{Name: rest.name, Err: fmt.Errorf("not run: the plugin stopped answering during %q", c.name)})
				}
				return
			}
		}
		r := Result{Name: c.name, Duration: time.Since(start)}
		if sk, ok := err.(errSkip); ok {
			r.Skipped = sk.reason
		} else {
			r.Err = err
		}
		*results = append(*results, r)
	}
}

func safeRun(ctx context.Context, c check, s *session) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("check panicked: %v", p)
		}
	}()
	return c.run(ctx, s)
}
