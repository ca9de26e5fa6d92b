package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"
)

// cmdRunner runs a plugin binary for go-plugin (its ClientConfig.RunnerFunc) as go-plugin's own
// command runner does, with the plugin's stdout read through a filter:
//
//   - the handshake line's certificate field is accepted in standard base64 with or without
//     padding (go-plugin decodes it as unpadded only, so a padded field fails whenever the
//     certificate's length is not a multiple of 3: "illegal base64 data at input byte N");
//   - every line after the handshake line is handed to stray: stdout is the protocol's
//     channel, and a plugin that writes there has a bug worth a warning.
type cmdRunner struct {
	cmd    *exec.Cmd
	stdout io.ReadCloser // what go-plugin reads: the handshake line, then EOF when the plugin's stdout ends
	pw     *io.PipeWriter
	real   io.ReadCloser // the plugin's stdout
	stderr io.ReadCloser
	stray  func(line string)
	done   chan struct{} // closed when the filter has read the plugin's stdout to its end

	mu     sync.Mutex
	exited string // how the process ended ("exit status 3", "signal: killed"), once waited for
}

var _ runner.Runner = (*cmdRunner)(nil)

// newCmdRunner returns go-plugin's RunnerFunc for the binary at path: spec is go-plugin's
// command spec (its Env holds the host's environment and the handshake's variables), extraEnv
// is added after it, and sys becomes the process's SysProcAttr. The runner it makes is stored
// in *made.
func newCmdRunner(path string, extraEnv []string, sys *syscall.SysProcAttr, stray func(string), made **cmdRunner) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
		cmd := exec.Command(path)
		cmd.Env = append(append([]string(nil), spec.Env...), extraEnv...)
		cmd.Stdin = spec.Stdin
		cmd.SysProcAttr = sys
		real, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		r := &cmdRunner{cmd: cmd, stdout: pr, pw: pw, real: real, stderr: stderr, stray: stray, done: make(chan struct{})}
		*made = r
		return r, nil
	}
}

func (r *cmdRunner) Start(context.Context) error {
	if err := r.cmd.Start(); err != nil {
		r.pw.Close()
		close(r.done)
		return err
	}
	go r.filter()
	return nil
}

// filter copies the handshake line to go-plugin (its certificate field made unpadded) and
// hands the lines after it to stray.
func (r *cmdRunner) filter() {
	defer close(r.done)
	br := bufio.NewReaderSize(r.real, 64<<10)
	first := true
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if first {
				first = false
				_, _ = io.WriteString(r.pw, NormalizeHandshake(line)) // fails only when go-plugin gave up on the start
			} else if r.stray != nil {
				if s := strings.TrimRight(line, "\r\n"); strings.TrimSpace(s) != "" {
					r.stray(s)
				}
			}
		}
		if err != nil {
			r.pw.Close()
			return
		}
	}
}

// NormalizeHandshake returns a go-plugin handshake line with its certificate field (the sixth)
// in unpadded standard base64, the form go-plugin decodes; any other line is returned as is.
func NormalizeHandshake(line string) string {
	body := strings.TrimRight(line, "\r\n")
	parts := strings.Split(body, "|")
	if len(parts) < 6 || !strings.HasSuffix(parts[5], "=") {
		return line
	}
	parts[5] = strings.TrimRight(parts[5], "=")
	return strings.Join(parts, "|") + line[len(body):]
}

// Wait waits for the process; go-plugin calls it after reading stdout to its end.
func (r *cmdRunner) Wait(context.Context) error {
	<-r.done
	err := r.cmd.Wait()
	if st := r.cmd.ProcessState; st != nil {
		r.mu.Lock()
		r.exited = st.String()
		r.mu.Unlock()
	}
	return err
}

// exitStatus says how the process ended, "" while it runs (or before go-plugin reaped it).
func (r *cmdRunner) exitStatus() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exited
}

func (r *cmdRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

func (r *cmdRunner) Stdout() io.ReadCloser { return r.stdout }
func (r *cmdRunner) Stderr() io.ReadCloser { return r.stderr }
func (r *cmdRunner) Name() string          { return r.cmd.Path }

func (r *cmdRunner) ID() string {
	if r.pid() == 0 {
		return ""
	}
	return fmt.Sprint(r.pid())
}

func (r *cmdRunner) pid() int {
	if r == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

func (r *cmdRunner) Diagnose(context.Context) string {
	return "the plugin printed something other than the handshake line first on stdout (or nothing)"
}

func (r *cmdRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (r *cmdRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// strayStdout counts the lines a plugin wrote to stdout after the handshake (on the process's
// stdout, or, for a Go plugin, on os.Stdout, which go-plugin forwards over its stdio stream) and
// warns about the first few under the plugin's name.
type strayStdout struct {
	mu    sync.Mutex
	log   hclog.Logger
	name  string
	n     int
	first string
	part  []byte // an unfinished line from the stdio stream
}

// maxStrayWarnings is how many stray lines are logged; the rest are counted.
const maxStrayWarnings = 3

func (s *strayStdout) line(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.n == 1 {
		s.first = l
	}
	if s.n <= maxStrayWarnings {
		msg := "the plugin wrote to stdout after the handshake: stdout carries only the handshake line; log to stderr (hclog JSON)"
		if s.n == maxStrayWarnings {
			msg += "; further lines are counted, not logged"
		}
		s.log.Warn(msg, "plugin", s.name, "line", clip(l, 300))
	}
}

// Write takes the bytes of go-plugin's stdio stream.
func (s *strayStdout) Write(b []byte) (int, error) {
	s.mu.Lock()
	s.part = append(s.part, b...)
	var lines []string
	for {
		i := strings.IndexByte(string(s.part), '\n')
		if i < 0 {
			break
		}
		lines = append(lines, strings.TrimRight(string(s.part[:i]), "\r"))
		s.part = s.part[i+1:]
	}
	if len(s.part) > 4096 {
		lines = append(lines, string(s.part))
		s.part = s.part[:0]
	}
	s.mu.Unlock()
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			s.line(l)
		}
	}
	return len(b), nil
}

func (s *strayStdout) count() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.first
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
