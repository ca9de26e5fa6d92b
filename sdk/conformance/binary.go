package conformance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"github.com/rlhost/rlhost/sdk/plugin"
	"github.com/rlhost/rlhost/sdk/task"
	"google.golang.org/grpc"
)

// Options tune a conformance run.
type Options struct {
	// Kind is plugin.KindTask or plugin.KindTrace; "" guesses from the binary's name.
	Kind string
	// CallTimeout bounds each check (default 30s).
	CallTimeout time.Duration
	// StartTimeout bounds the handshake (default 10s).
	StartTimeout time.Duration
}

// KindOf guesses a binary's kind from its name: rlhost-trace-* is a trace backend, anything
// else is checked as a task.
func KindOf(path string) string {
	if strings.HasPrefix(filepath.Base(path), plugin.BinaryPrefix(plugin.KindTrace)) {
		return plugin.KindTrace
	}
	return plugin.KindTask
}

// CheckBinary runs every check against the plugin binary at path.
func CheckBinary(ctx context.Context, path string, opts Options) Report {
	if opts.Kind == "" {
		opts.Kind = KindOf(path)
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 30 * time.Second
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 10 * time.Second
	}
	abs, _ := filepath.Abs(path)
	bin := plugin.Binary{Kind: opts.Kind, Path: abs,
		Name: strings.TrimPrefix(filepath.Base(abs), plugin.BinaryPrefix(opts.Kind))}
	rep := Report{Plugin: abs, Kind: opts.Kind}
	add := func(name string, start time.Time, err error) {
		r := Result{Name: name, Duration: time.Since(start)}
		if sk, ok := err.(errSkip); ok {
			r.Skipped = sk.reason
		} else {
			r.Err = err
		}
		rep.Results = append(rep.Results, r)
	}

	start := time.Now()
	if err := plugin.CheckExecutable(abs); err != nil {
		add("executable", start, err)
		return rep
	}
	add("executable", start, nil)

	start = time.Now()
	add("refuses without cookie", start, checkNoCookie(ctx, abs))
	start = time.Now()
	add("handshake line", start, checkHandshakeLine(ctx, abs, plugin.SupportedMajors[opts.Kind], opts.StartTimeout))
	start = time.Now()
	add("version negotiation", start, checkNegotiation(ctx, bin, opts.StartTimeout))

	var stderr syncBuffer
	start = time.Now()
	launched := start
	p, err := plugin.Launch(ctx, bin, plugin.LaunchOptions{StartTimeout: opts.StartTimeout,
		Env: []string{"RLHOST_LOG_LEVEL=debug"}, Stderr: &stderr})
	if err != nil {
		add("launch", start, err)
		return rep
	}
	add("launch", start, nil)
	defer p.Kill()

	name := bin.Name
	if !strings.HasPrefix(filepath.Base(abs), plugin.BinaryPrefix(opts.Kind)) {
		name = ""
	}
	s := &session{conn: p.Conn(), binary: abs, name: name, proc: p, state: map[string]any{}}
	checks := taskChecks()
	if opts.Kind == plugin.KindTrace {
		checks = traceChecks()
	}
	watch := watchHealth(p, healthEvery)
	s.health = watch
	runChecks(ctx, s, checks, &rep.Results, opts.CallTimeout)
	start = time.Now()
	err = watch.stop(launched.Add(MinLife))
	add("alive and healthy throughout", start, err)
	if p.Exited() {
		return rep
	}

	start = time.Now()
	p.Kill()
	took := time.Since(start)
	if took > 2*time.Second || !p.Exited() {
		add("Shutdown within 2s", start, fmt.Errorf("the plugin took %s to shut down (exited: %v); want under 2s", took.Round(time.Millisecond), p.Exited()))
	} else {
		add("Shutdown within 2s", start, nil)
	}
	start = time.Now()
	add("nothing on stdout after handshake", start, checkStrayStdout(p))
	start = time.Now()
	add("stderr is hclog JSON", start, checkHclog(stderr.Bytes()))
	return rep
}

// RunBinary runs CheckBinary as subtests of t.
func RunBinary(t *testing.T, path string, opts Options) {
	t.Helper()
	rep := CheckBinary(context.Background(), path, opts)
	for _, r := range rep.Results {
		r := r
		t.Run(r.Name, func(t *testing.T) {
			if r.Skipped != "" {
				t.Skip(r.Skipped)
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		})
	}
}

// RunTask runs the connection-level checks against an in-process implementation, over an
// in-memory gRPC connection (go-plugin's test harness): fast, and usable before the plugin
// has a main.
func RunTask(t *testing.T, impl task.Task) {
	t.Helper()
	for _, r := range CheckTask(t, impl).Results {
		r := r
		t.Run(r.Name, func(t *testing.T) {
			if r.Skipped != "" {
				t.Skip(r.Skipped)
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		})
	}
}

// CheckTask is RunTask's report without failing t: for tests of the checks themselves.
func CheckTask(t *testing.T, impl task.Task) Report {
	t.Helper()
	client, server := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		plugin.KindTask: &plugin.GRPCPlugin{Register: func(s *grpc.Server) { task.Register(s, impl) }},
	})
	defer server.Stop()
	defer client.Close()
	raw, err := client.Dispense(plugin.KindTask)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{conn: raw.(*grpc.ClientConn), state: map[string]any{}}
	var results []Result
	runChecks(context.Background(), s, taskChecks(), &results, 30*time.Second)
	return Report{Results: results}
}

func envWithout(key string) []string {
	var out []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return out
}

func checkNoCookie(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = envWithout(plugin.MagicCookieKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("run without the cookie, it did not exit within 5s; a plugin must refuse and exit")
	}
	if err == nil {
		return fmt.Errorf("run without the cookie, it exited with status 0; it must refuse with a non-zero status")
	}
	if strings.Count(stdout.String(), "|") >= 4 {
		return fmt.Errorf("run without the cookie, it printed a handshake line anyway: %q", firstLine(stdout.String()))
	}
	if strings.TrimSpace(stderr.String()) == "" {
		return fmt.Errorf("run without the cookie, it exited but said nothing on stderr; tell the person how to use it")
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Handshake is a parsed go-plugin handshake line.
type Handshake struct {
	CoreVersion, AppVersion int
	Network, Address        string
	Protocol                string
	ServerCert              string
}

// ParseHandshake parses the line a plugin prints on stdout:
// CORE-VERSION|APP-VERSION|NETWORK|ADDRESS|PROTOCOL[|SERVER-CERT].
func ParseHandshake(line string) (Handshake, error) {
	line = strings.TrimSpace(line)
	parts := strings.Split(line, "|")
	if len(parts) < 5 || len(parts) > 6 {
		return Handshake{}, fmt.Errorf("handshake line %q: want CORE|APP|NETWORK|ADDRESS|grpc[|CERT], 5 or 6 fields, got %d", line, len(parts))
	}
	var h Handshake
	var err error
	if h.CoreVersion, err = strconv.Atoi(parts[0]); err != nil || h.CoreVersion != 1 {
		return h, fmt.Errorf("handshake line %q: core protocol version %q, want 1", line, parts[0])
	}
	if h.AppVersion, err = strconv.Atoi(parts[1]); err != nil {
		return h, fmt.Errorf("handshake line %q: app protocol version %q is not a number", line, parts[1])
	}
	h.Network, h.Address, h.Protocol = parts[2], parts[3], parts[4]
	if h.Network != "unix" && h.Network != "tcp" {
		return h, fmt.Errorf("handshake line %q: network %q, want unix or tcp", line, h.Network)
	}
	if h.Address == "" {
		return h, fmt.Errorf("handshake line %q: empty address", line)
	}
	if h.Network == "tcp" && !strings.HasPrefix(h.Address, "127.0.0.1:") && !strings.HasPrefix(h.Address, "[::1]:") && !strings.HasPrefix(h.Address, "localhost:") {
		return h, fmt.Errorf("handshake line %q: tcp address %q is not on loopback", line, h.Address)
	}
	if h.Protocol != "grpc" {
		return h, fmt.Errorf("handshake line %q: protocol %q, want grpc", line, h.Protocol)
	}
	if len(parts) == 6 {
		h.ServerCert = parts[5]
	}
	return h, nil
}

func checkHandshakeLine(ctx context.Context, path string, majors []int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "rlhost-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var vs []string
	for _, m := range majors {
		vs = append(vs, strconv.Itoa(m))
	}
	certs, err := plugin.NewHostCerts()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = append(os.Environ(), plugin.MagicCookieKey+"="+plugin.MagicCookieValue,
		"PLUGIN_PROTOCOL_VERSIONS="+strings.Join(vs, ","), "PLUGIN_MIN_PORT=10000", "PLUGIN_MAX_PORT=25000",
		goplugin.EnvUnixSocketDir+"="+dir, "PLUGIN_CLIENT_CERT="+string(certs.CAPEM))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			return fmt.Errorf("it closed stdout without printing a handshake line")
		}
		h, err := ParseHandshake(line)
		if err != nil {
			return err
		}
		if err := checkServerCert(h.ServerCert); err != nil {
			return fmt.Errorf("handshake line %q: %v", trunc(line), err)
		}
		for _, m := range majors {
			if m == h.AppVersion {
				return nil
			}
		}
		return fmt.Errorf("handshake line %q: it chose protocol version %d, not one of those offered %v", line, h.AppVersion, majors)
	case <-ctx.Done():
		return fmt.Errorf("no handshake line on stdout within %s", timeout)
	}
}

// checkServerCert checks the handshake line's certificate field: the host always sends
// PLUGIN_CLIENT_CERT and dials with TLS, verifying the plugin as "localhost" against exactly
// this certificate.
func checkServerCert(field string) error {
	if field == "" {
		return fmt.Errorf("no server certificate: given PLUGIN_CLIENT_CERT, a plugin serves TLS and prints its certificate as the sixth field (base64 DER, padding optional; docs/protocol.md)")
	}
	der, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(field, "="))
	if err != nil {
		return fmt.Errorf("the server certificate is not standard base64 (padding optional): %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("the server certificate is not a DER X.509 certificate: %v", err)
	}
	if err := cert.VerifyHostname("localhost"); err != nil {
		return fmt.Errorf("the server certificate is not valid for \"localhost\" (add it as a DNS name): %v", err)
	}
	if time.Now().After(cert.NotAfter) || time.Now().Before(cert.NotBefore) {
		return fmt.Errorf("the server certificate is not valid now (valid %s to %s)", cert.NotBefore, cert.NotAfter)
	}
	return nil
}

func checkNegotiation(ctx context.Context, bin plugin.Binary, timeout time.Duration) error {
	// Offered only a major version from the future, the plugin must not claim to speak it.
	p, err := plugin.Launch(ctx, bin, plugin.LaunchOptions{StartTimeout: timeout, Majors: []int{99}})
	if err == nil {
		p.Kill()
		return fmt.Errorf("offered only protocol version 99, the plugin accepted it")
	}
	if !strings.Contains(err.Error(), "protocol version") {
		return fmt.Errorf("offered only protocol version 99: want a version mismatch, got: %w", err)
	}
	// Offered the host's versions and a future one, it picks one it speaks.
	majors := append([]int{}, plugin.SupportedMajors[bin.Kind]...)
	p, err = plugin.Launch(ctx, bin, plugin.LaunchOptions{StartTimeout: timeout, Majors: append(majors, 99)})
	if err != nil {
		return fmt.Errorf("offered %v: %v", append(majors, 99), err)
	}
	defer p.Kill()
	for _, m := range majors {
		if p.Major == m {
			return nil
		}
	}
	return fmt.Errorf("offered %v, it negotiated %d", append(majors, 99), p.Major)
}

func checkHclog(stderr []byte) error {
	lines := 0
	for _, line := range bytes.Split(stderr, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		lines++
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("stderr line is not JSON (plugins log hclog JSON: use plugin.NewLogger): %q", trunc(string(line)))
		}
		for _, k := range []string{"@level", "@message", "@timestamp"} {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("stderr line lacks %q (not hclog JSON): %q", k, trunc(string(line)))
			}
		}
	}
	if lines == 0 {
		return fmt.Errorf("the plugin wrote nothing on stderr at log level debug; it should log with hclog JSON")
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}
