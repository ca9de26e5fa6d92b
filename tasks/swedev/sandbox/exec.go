package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// sandboxPath is PATH inside an instance: system directories only (never /root), and the
// directory of the host's go command when it is elsewhere and not under /root.
var sandboxPath = func() string {
	p := "/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if g, err := exec.LookPath("go"); err == nil {
		if r, err := filepath.EvalSymlinks(g); err == nil {
			if d := filepath.Dir(r); !strings.HasPrefix(d, "/root") && !strings.Contains(":"+p+":", ":"+d+":") {
				p = d + ":" + p
			}
		}
	}
	return p
}()

// probe picks the isolation mode: the one asked for, or the strongest that runs `true`.
func (m *Manager) probe(want string) (string, error) {
	modes := []string{"bwrap", "ns", "rlimit"}
	if want != "" {
		switch want {
		case "bwrap", "ns", "rlimit":
			modes = []string{want}
		default:
			return "", fmt.Errorf("sandbox: unknown isolation %q (want bwrap, ns or rlimit)", want)
		}
	}
	dir, err := os.MkdirTemp(m.cfg.Root, "probe-")
	if err != nil {
		return "", fmt.Errorf("sandbox: %v", err)
	}
	defer os.RemoveAll(dir)
	uid := -1
	work, tmp := filepath.Join(dir, "work"), filepath.Join(dir, "tmp")
	for _, d := range []string{work, tmp, filepath.Join(dir, "view"), filepath.Join(dir, "gocache"), filepath.Join(tmp, goCacheDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("sandbox: %v", err)
		}
	}
	if m.asRoot {
		uid = m.cfg.UIDBase - 2
		_ = chownTree(dir, uid, m.gid)
	}
	var errs []string
	for _, mode := range modes {
		in := &instance{dir: dir, work: work, tmp: tmp, uid: uid}
		cmd := m.command(mode, in, "true", Limits{Memory: 1 << 30, Procs: 64, FileSize: 1 << 20, CPU: 5 * time.Second}, nil)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v %s", mode, err, strings.TrimSpace(stderr.String())))
			continue
		}
		return mode, nil
	}
	return "", fmt.Errorf("sandbox: no isolation mode works here (when running as root, can uid %d reach %s?): %s", uid, m.cfg.Root, strings.Join(errs, "; "))
}

// command builds the process of one command: bash under rlimits, in the isolation mode.
func (m *Manager) command(mode string, in *instance, command string, l Limits, env map[string]string) *exec.Cmd {
	cpu := int64(l.CPU / time.Second)
	if cpu < 1 {
		cpu = 1
	}
	// ulimit -v and -f count KiB and 1024-byte blocks. Soft and hard limits are both set so
	// that the command cannot raise them.
	wrapper := fmt.Sprintf("umask 002 && ulimit -c 0 && ulimit -t %d && ulimit -v %d && ulimit -f %d && ulimit -u %d && exec /bin/bash -c \"$1\"",
		cpu, max(l.Memory>>10, 1), max(l.FileSize>>10, 1), l.Procs)
	work, home := in.work, in.tmp
	goCache := m.goCache(in)
	if mode != "rlimit" {
		work, home, goCache = WorkDir, TmpDir, filepath.Join(TmpDir, goCacheDir)
	}
	vars := map[string]string{"PATH": sandboxPath, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
		"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "GOCACHE": goCache, "GOPATH": filepath.Join(home, "gopath"),
		"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local", "GOTELEMETRY": "off", "CGO_ENABLED": "0",
		"GIT_CONFIG_NOSYSTEM": "1", "TERM": "dumb", "PWD": work}
	for k, v := range env {
		vars[k] = v
	}
	var envList []string
	for k, v := range vars {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)
	args := []string{"/bin/bash", "-c", wrapper, "bash", command}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	switch mode {
	case "bwrap":
		b := append([]string{"bwrap", "--unshare-all", "--die-with-parent", "--new-session"}, bwrapArgs(m.view(in))...)
		args = append(append(b, "--chdir", WorkDir, "--"), args...)
		attr.Setpgid = true
	case "ns":
		// Root builds the view in new namespaces, then drops to the instance's uid (nsScript).
		attr.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		args = append([]string{"/bin/sh", "-c", nsScript(m.view(in), filepath.Join(in.dir, "view"), in.uid, m.gid), "rlhost-view"}, args...)
	default:
		attr.Setpgid = true
	}
	if in.uid >= 0 && mode != "ns" {
		attr.Credential = &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(m.gid), Groups: []uint32{}}
	}
	cmd := exec.Command(args[0], args[1:]...)
	if mode == "bwrap" {
		cmd.Path, _ = exec.LookPath("bwrap")
	}
	cmd.Dir, cmd.Env, cmd.SysProcAttr = in.work, envList, attr
	return cmd
}

// capWriter keeps the first max bytes and counts the rest; past abort it calls kill once.
type capWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	total   *int64
	totalMu *sync.Mutex // the two streams share total
	abort   int64
	kill    func()
	trunc   bool
	aborted bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.max - w.buf.Len()
	if len(p) > room {
		w.trunc = true
	}
	if room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	w.totalMu.Lock()
	n := *w.total + int64(len(p))
	*w.total = n
	w.totalMu.Unlock()
	if n > w.abort && !w.aborted {
		w.aborted = true
		w.kill()
	}
	return len(p), nil
}

// Exec runs a command in an instance. Limit breaches are results (Killed, Error), not errors;
// errors are for a missing instance or a bad request.
func (m *Manager) Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	res, _, err := m.exec(ctx, id, req, false)
	return res, err
}

// maxReport is the most a command may write to its report descriptor.
const maxReport = 16 << 20

// exec runs a command; with report, the command also gets the write end of a pipe as
// descriptor 3 and what it writes there (at most maxReport bytes) is returned: a channel
// apart from the output, which no file of the instance can stand in for.
func (m *Manager) exec(ctx context.Context, id string, req ExecRequest, report bool) (ExecResult, []byte, error) {
	in, err := m.get(id)
	if err != nil {
		return ExecResult{}, nil, err
	}
	if strings.ContainsRune(req.Command, 0) {
		return ExecResult{}, nil, badInput("the command contains a NUL byte")
	}
	if strings.TrimSpace(req.Command) == "" {
		return ExecResult{}, nil, badInput("the command is empty")
	}
	l, err := req.Limits.within(m.cfg.Defaults, m.cfg.Max)
	if err != nil {
		return ExecResult{}, nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return ExecResult{}, nil, badInput("bad environment variable name %q", k)
		}
	}
	queued := time.Now()
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return ExecResult{}, nil, fmt.Errorf("sandbox: waiting for a free slot: %w", ctx.Err())
	}
	defer func() { <-m.slots }()
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.deleted {
		return ExecResult{}, nil, fmt.Errorf("%w %q (deleted)", ErrNotFound, id)
	}
	res, rep := m.run(ctx, in, req, l, report)
	res.Queued = time.Since(queued) - res.Duration
	return res, rep, nil
}

func (m *Manager) run(ctx context.Context, in *instance, req ExecRequest, l Limits, report bool) (ExecResult, []byte) {
	cmd := m.command(m.isolation, in, req.Command, l, req.Env)
	var total int64
	var once sync.Once
	killed := ""
	kill := func(why string) {
		once.Do(func() {
			killed = why
			if cmd.Process != nil {
				if m.isolation == "ns" {
					_ = cmd.Process.Kill() // pid 1 of its namespace: the kernel kills the rest
				} else {
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
			}
			if in.uid >= 0 {
				killUID(in.uid)
			}
		})
	}
	flood := make(chan struct{})
	var floodOnce sync.Once
	onFlood := func() { floodOnce.Do(func() { close(flood) }) }
	var totalMu sync.Mutex
	stdout := &capWriter{max: l.Output, total: &total, totalMu: &totalMu, abort: l.OutputAbort, kill: onFlood}
	stderr := &capWriter{max: l.Output, total: &total, totalMu: &totalMu, abort: l.OutputAbort, kill: onFlood}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if req.Stdin != "" {
		cmd.Stdin = strings.NewReader(req.Stdin)
	}
	// Output pipes are closed when the command exits even if a descendant holds them.
	cmd.WaitDelay = 2 * time.Second
	var repDone chan []byte
	if report {
		r, w, err := os.Pipe()
		if err != nil {
			return ExecResult{ExitCode: -1, Error: fmt.Sprintf("the command could not start: %v", err)}, nil
		}
		defer r.Close()
		cmd.ExtraFiles = []*os.File{w}
		defer w.Close()
		repDone = make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(r, maxReport))
			_, _ = io.Copy(io.Discard, r)
			repDone <- b
		}()
	}
	start := time.Now()
	res := ExecResult{ExitCode: -1}
	if err := cmd.Start(); err != nil {
		res.Error = fmt.Sprintf("the command could not start: %v", err)
		return res, nil
	}
	if report {
		cmd.ExtraFiles[0].Close() // the command holds the write end now
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(l.Wall)
	var werr error
	select {
	case werr = <-done:
	case <-timer.C:
		kill("wall")
		werr = <-done
	case <-flood:
		kill("output")
		werr = <-done
	case <-ctx.Done():
		kill("canceled")
		werr = <-done
	}
	timer.Stop()
	res.Duration = time.Since(start)
	// Nothing of a command outlives it: background processes are killed too.
	if in.uid >= 0 {
		killUID(in.uid)
	} else if m.isolation != "ns" {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	res.Stdout, res.StdoutTruncated = stdout.buf.String(), stdout.trunc
	res.Stderr, res.StderrTruncated = stderr.buf.String(), stderr.trunc
	res.Killed = killed
	var ee *exec.ExitError
	switch {
	case werr == nil:
		res.ExitCode = 0
	case errors.As(werr, &ee):
		res.ExitCode = ee.ExitCode()
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			res.ExitCode = 128 + int(st.Signal())
			if killed == "" {
				switch st.Signal() {
				case syscall.SIGXCPU:
					killed, res.Killed = "cpu", "cpu"
				case syscall.SIGXFSZ:
					res.Error = fmt.Sprintf("a file reached the size limit of %d bytes", l.FileSize)
				}
			}
		}
	case errors.Is(werr, exec.ErrWaitDelay):
		res.ExitCode = 0
	default:
		res.Error = werr.Error()
	}
	// Under bubblewrap the signal arrives as bwrap's exit status.
	if killed == "" && (res.ExitCode == 128+int(syscall.SIGXCPU) || res.ExitCode == 128+int(syscall.SIGKILL) && res.Duration >= l.CPU) {
		killed, res.Killed = "cpu", "cpu"
	}
	if killed == "" && res.ExitCode == 128+int(syscall.SIGXFSZ) && res.Error == "" {
		res.Error = fmt.Sprintf("a file reached the size limit of %d bytes", l.FileSize)
	}
	switch killed {
	case "wall":
		res.Error = fmt.Sprintf("the command did not finish within %s and was killed", l.Wall)
	case "cpu":
		res.Error = fmt.Sprintf("the command used more than %s of CPU time and was killed", l.CPU)
	case "output":
		res.Error = fmt.Sprintf("the command printed more than %d bytes and was killed", l.OutputAbort)
	case "canceled":
		res.Error = "the command was canceled"
	}
	if res.StdoutTruncated || res.StderrTruncated {
		note := fmt.Sprintf("[output cut to %d bytes per stream; %d bytes in all]", l.Output, total)
		if res.Error == "" {
			res.Error = note
		} else {
			res.Error += " " + note
		}
	}
	if size, removed := enforceDisk(in.work, l.Disk, start); size > l.Disk {
		msg := fmt.Sprintf("the working tree grew to %d bytes, over the limit of %d; the %d files this command wrote were removed", size, l.Disk, removed)
		if res.Error == "" {
			res.Error = msg
		} else {
			res.Error += "; " + msg
		}
	}
	var rep []byte
	if report {
		select {
		case rep = <-repDone:
		case <-time.After(2 * time.Second): // a descendant still holds the pipe: it was killed above
		}
	}
	return res, rep
}

// enforceDisk measures the working tree; over limit it removes the files modified since
// start (what the command wrote) and returns the size before that and their number.
func enforceDisk(work string, limit int64, start time.Time) (int64, int) {
	var size int64
	var recent []string
	_ = filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		size += info.Size()
		if !info.ModTime().Before(start.Add(-time.Second)) {
			recent = append(recent, p)
		}
		return nil
	})
	if size <= limit {
		return size, 0
	}
	for _, p := range recent {
		_ = os.Remove(p)
	}
	return size, len(recent)
}
