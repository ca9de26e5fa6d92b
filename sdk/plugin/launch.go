package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// CheckExecutable reports, before launch, the problems a person can fix: the file is missing,
// is a directory, is not executable, or is a binary for another OS or architecture.
func CheckExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("plugin: %s: %w", path, err)
	}
	if st.IsDir() {
		return fmt.Errorf("plugin: %s is a directory, not a plugin executable", path)
	}
	if st.Mode()&0o111 == 0 {
		return fmt.Errorf("plugin: %s is not executable: run `chmod +x %s`", path, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("plugin: %s: %w", path, err)
	}
	defer f.Close()
	var head [4]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return fmt.Errorf("plugin: %s is empty or unreadable: %v", path, err)
	}
	switch {
	case string(head[:2]) == "#!":
		return nil // a script; its interpreter runs it
	case string(head[:]) == "\x7fELF":
		ef, err := elf.NewFile(f)
		if err != nil {
			return fmt.Errorf("plugin: %s is a damaged ELF file: %v", path, err)
		}
		if want := elfMachine(); want != elf.EM_NONE && ef.Machine != want {
			return fmt.Errorf("plugin: %s is built for %s, but this machine is %s/%s: rebuild it with GOARCH=%s",
				path, machineName(ef.Machine), runtime.GOOS, runtime.GOARCH, runtime.GOARCH)
		}
		return nil
	case runtime.GOOS == "linux":
		return fmt.Errorf("plugin: %s is neither an ELF executable nor a script (#!): is it built for another OS?", path)
	}
	return nil
}

func elfMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	case "386":
		return elf.EM_386
	case "arm":
		return elf.EM_ARM
	case "riscv64":
		return elf.EM_RISCV
	case "ppc64le", "ppc64":
		return elf.EM_PPC64
	case "s390x":
		return elf.EM_S390
	}
	return elf.EM_NONE
}

func machineName(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	case elf.EM_386:
		return "386"
	case elf.EM_ARM:
		return "arm"
	case elf.EM_RISCV:
		return "riscv64"
	}
	return strings.TrimPrefix(m.String(), "EM_")
}

// Binary is a plugin executable of a kind.
type Binary struct {
	Kind string // KindTask or KindTrace
	Name string // the part after rlhost-KIND-
	Path string // absolute path
}

// FileName is the executable's base name, e.g. rlhost-task-gsm8k.
func (b Binary) FileName() string { return BinaryPrefix(b.Kind) + b.Name }

// SupportedMajors are the protocol major versions this host speaks, per kind.
var SupportedMajors = map[string][]int{
	KindTask:  {TaskProtocolMajor},
	KindTrace: {TraceProtocolMajor},
}

// LaunchOptions configure how a plugin is launched.
type LaunchOptions struct {
	// Logger receives the plugin's log lines (under the plugin's name). Default: a null logger.
	Logger hclog.Logger
	// SHA256, when set (hex), pins the binary: a binary with another checksum is refused.
	SHA256 string
	// StartTimeout bounds the handshake. Default 20s.
	StartTimeout time.Duration
	// Env is added to the plugin's environment.
	Env []string
	// Majors overrides SupportedMajors for this launch (tests of version negotiation).
	Majors []int
	// Stderr, when set, also receives the plugin's raw stderr.
	Stderr io.Writer
}

// Process is one running plugin process.
type Process struct {
	Binary Binary
	Major  int // negotiated protocol major version

	client *goplugin.Client
	conn   *grpc.ClientConn
	logs   *logTail
	stray  *strayStdout
	run    *cmdRunner
}

// StrayStdout returns how many lines the plugin wrote to stdout after the handshake, and the
// first of them. Each of the first few was logged as a warning under the plugin's name.
func (p *Process) StrayStdout() (lines int, first string) { return p.stray.count() }

// Conn is the gRPC connection to the plugin.
func (p *Process) Conn() *grpc.ClientConn { return p.conn }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool { return p.client.Exited() }

// Ping checks the plugin's health service, waiting at most DefaultHealthTimeout.
func (p *Process) Ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultHealthTimeout)
	defer cancel()
	return p.PingContext(ctx)
}

// DefaultHealthTimeout bounds Ping.
const DefaultHealthTimeout = 5 * time.Second

// PingContext asks the plugin's health service (service "plugin") whether it is SERVING.
func (p *Process) PingContext(ctx context.Context) error {
	if p.conn == nil {
		return fmt.Errorf("plugin %s: not connected", p.Binary.FileName())
	}
	resp, err := grpc_health_v1.NewHealthClient(p.conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "plugin"})
	if err != nil {
		return err
	}
	if st := resp.GetStatus(); st != grpc_health_v1.HealthCheckResponse_SERVING {
		return fmt.Errorf("plugin %s: health is %s, not SERVING", p.Binary.FileName(), st)
	}
	return nil
}

// Addr is the address the plugin serves on (from its handshake line), or nil.
func (p *Process) Addr() net.Addr {
	if rc := p.client.ReattachConfig(); rc != nil {
		return rc.Addr
	}
	return nil
}

// LastLogs returns the plugin's last stderr lines.
func (p *Process) LastLogs() []string { return p.logs.Lines() }

// Kill stops the process (gracefully first, through go-plugin's controller) and waits for it.
// A process that does not answer (stopped, or stuck so that it never reads the Shutdown
// request) is killed with SIGKILL after KillGrace.
func (p *Process) Kill() {
	done := make(chan struct{})
	go func() {
		p.client.Kill()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(KillGrace):
		if p.run != nil {
			_ = p.run.Kill(context.Background())
		}
		<-done
	}
}

// KillGrace is how long Kill waits for a graceful shutdown (go-plugin's own wait is 2s).
const KillGrace = 4 * time.Second

// ExitStatus says how the process ended ("exit status 3", "signal: killed"); "" while it runs.
func (p *Process) ExitStatus() string { return p.run.exitStatus() }

// Pid returns the process id, or 0.
func (p *Process) Pid() int { return p.run.pid() }

// Launch starts a plugin binary and completes the handshake: the cookie, protocol-version
// negotiation (the highest major both sides speak), mutual TLS (certs.go), optional SHA-256 pinning. The
// plugin's stderr is kept (last lines) and its hclog lines are routed to opts.Logger under the
// plugin's name. The process is killed if the host dies (Linux parent-death signal).
func Launch(ctx context.Context, bin Binary, opts LaunchOptions) (*Process, error) {
	if err := CheckExecutable(bin.Path); err != nil {
		return nil, err
	}
	majors := opts.Majors
	if majors == nil {
		majors = SupportedMajors[bin.Kind]
	}
	if len(majors) == 0 {
		return nil, fmt.Errorf("plugin: unknown plugin kind %q", bin.Kind)
	}
	versioned := map[int]goplugin.PluginSet{}
	for _, m := range majors {
		versioned[m] = goplugin.PluginSet{bin.Kind: &GRPCPlugin{}}
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	// Mutual TLS with a one-time P-256 identity (certs.go) rather than go-plugin's AutoMTLS,
	// whose P-521 client certificate most non-Go TLS stacks refuse. The plugin side is the same:
	// it trusts PLUGIN_CLIENT_CERT and returns its own certificate in the handshake line.
	certs, err := NewHostCerts()
	if err != nil {
		return nil, err
	}
	if opts.SHA256 != "" {
		sum, err := hex.DecodeString(strings.TrimPrefix(opts.SHA256, "sha256:"))
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("plugin: %s: pinned checksum %q is not a hex SHA-256", bin.FileName(), opts.SHA256)
		}
		ok, err := (&goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}).Check(bin.Path)
		if err == nil && !ok {
			err = goplugin.ErrChecksumsDoNotMatch
		}
		if err != nil {
			return nil, launchError(bin, majors, err, nil)
		}
	}
	logs := newLogTail(40)
	named := logger.Named(bin.FileName())
	stray := &strayStdout{log: named, name: bin.FileName()}
	var run *cmdRunner
	cfg := &goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: versioned,
		// The process is started by cmdRunner (runner.go), which reads the plugin's stdout
		// through a filter: padded certificates, stray lines. The plugin dies with the host
		// even when the host is killed with SIGKILL.
		RunnerFunc: newCmdRunner(bin.Path, append(append([]string(nil), opts.Env...), "PLUGIN_CLIENT_CERT="+string(certs.CAPEM)),
			&syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}, stray.line, &run),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		TLSConfig:        certs.TLSConfig(),
		Logger:           named,
		Stderr:           stderrWriter(logs, opts.Stderr),
		SyncStdout:       stray, // a Go plugin's os.Stdout after the handshake, forwarded by go-plugin
		StartTimeout:     timeout,
	}
	client := goplugin.NewClient(cfg)
	p := &Process{Binary: bin, client: client, logs: logs, stray: stray}
	done := make(chan error, 1)
	go func() {
		rpc, err := client.Client()
		if err == nil {
			var raw any
			raw, err = rpc.Dispense(bin.Kind)
			if err == nil {
				conn, ok := raw.(*grpc.ClientConn)
				if !ok {
					err = fmt.Errorf("plugin does not serve gRPC")
				} else {
					p.conn = conn
				}
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			client.Kill()
			return nil, launchError(bin, majors, err, logs.Lines())
		}
	case <-ctx.Done():
		client.Kill()
		return nil, fmt.Errorf("plugin %s: start cancelled: %w", bin.FileName(), ctx.Err())
	}
	p.run = run // set by the RunnerFunc during client.Client
	p.Major = client.NegotiatedVersion()
	return p, nil
}

// launchError turns go-plugin's start errors into what a person can act on.
func launchError(bin Binary, majors []int, err error, logs []string) error {
	msg := strings.ToLower(err.Error())
	name := bin.FileName()
	var hint string
	switch {
	case errors.Is(err, goplugin.ErrChecksumsDoNotMatch):
		hint = "its SHA-256 does not match the pinned checksum: reinstall the plugin or update the pin (rlhost plugins list shows checksums)"
	case strings.Contains(msg, "incompatible api version"):
		hint = fmt.Sprintf("it speaks another protocol version than this rlhost (which speaks %s %v): install a matching version of the plugin", bin.Kind, majors)
	case strings.Contains(msg, "unrecognized remote plugin message"), strings.Contains(msg, "incompatible core api"):
		hint = "it printed something other than the go-plugin handshake line on stdout (see docs/protocol.md for the line a plugin must print; logs go to stderr)"
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		hint = "it did not complete the handshake in time (is it an rlhost plugin? is it stuck before serving?)"
	case strings.Contains(msg, "plugin exited before we could connect"):
		hint = "it exited during start-up"
	case strings.Contains(msg, "unsupported plugin protocol"):
		hint = "it does not speak gRPC"
	case strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"), strings.Contains(msg, "authentication handshake failed"):
		hint = "the mutual TLS handshake failed: a plugin serves TLS with its own certificate (for \"localhost\", returned base64 DER in the handshake line) and requires a client certificate signed by PLUGIN_CLIENT_CERT (see docs/protocol.md)"
	}
	out := fmt.Sprintf("plugin %s (%s) failed to start: %v", name, bin.Path, err)
	if hint != "" {
		out = fmt.Sprintf("plugin %s (%s) failed to start: %s; %v", name, bin.Path, hint, err)
	}
	if len(logs) > 0 {
		out += "; its last log lines:\n  " + strings.Join(logs, "\n  ")
	}
	return &CallError{Plugin: name, Call: "start", Err: errors.New(out), msg: out}
}

// CallError is a failed plugin call. Its message names the plugin and the call and, when the
// plugin died, carries its last log lines.
type CallError struct {
	Plugin string
	Call   string
	Exited bool
	Err    error
	msg    string
}

// NewCallError returns a CallError with the given message.
func NewCallError(plugin, call string, exited bool, err error, msg string) *CallError {
	return &CallError{Plugin: plugin, Call: call, Exited: exited, Err: err, msg: msg}
}

func (e *CallError) Error() string { return e.msg }
func (e *CallError) Unwrap() error { return e.Err }

// logTail is an io.Writer keeping the last n lines written to it.
type logTail struct {
	mu    sync.Mutex
	n     int
	lines []string
	part  []byte
}

func newLogTail(n int) *logTail { return &logTail{n: n} }

func (l *logTail) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, b...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		l.add(string(l.part[:i]))
		l.part = l.part[i+1:]
	}
	if len(l.part) > 4096 { // a very long line without a newline
		l.add(string(l.part))
		l.part = l.part[:0]
	}
	return len(b), nil
}

func (l *logTail) add(line string) {
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return
	}
	if len(line) > 1000 {
		line = line[:1000] + "…"
	}
	l.lines = append(l.lines, line)
	if len(l.lines) > l.n {
		l.lines = l.lines[len(l.lines)-l.n:]
	}
}

// Lines returns a copy of the kept lines (the last 10), including an unfinished last line.
func (l *logTail) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.lines...)
	if len(l.part) > 0 {
		out = append(out, string(l.part))
	}
	if len(out) > 10 {
		out = out[len(out)-10:]
	}
	return out
}

var _ io.Writer = (*logTail)(nil)

func stderrWriter(logs *logTail, extra io.Writer) io.Writer {
	if extra == nil {
		return logs
	}
	return io.MultiWriter(logs, extra)
}
