package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rlhost/rlhost/sdk/task"
)

var (
	buildMu  sync.Mutex
	built    = map[string]string{}
	buildDir string
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "rlhost-host-plugin-")
	if err != nil {
		panic(err)
	}
	buildDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// build compiles a plugin from dir (relative to the repo root, in the module rooted at
// modDir) as rlhost-task-NAME and returns its path.
func build(t *testing.T, modDir, pkg, name string, ldflags string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	key := pkg + ldflags
	if p, ok := built[key]; ok {
		return p
	}
	dir := filepath.Join(buildDir, strings.NewReplacer("/", "_", " ", "_", "=", "_").Replace(key))
	os.MkdirAll(dir, 0o755)
	out := filepath.Join(dir, "rlhost-task-"+name)
	args := []string{"build", "-o", out}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = filepath.Join("..", "..", modDir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	built[key] = out
	return out
}

func fixture(t *testing.T, mode string) Binary {
	p := build(t, "sdk", "./conformance/testdata/fixture", "fixture", "-X main.mode="+mode)
	return Binary{Kind: "task", Name: "fixture", Path: p}
}

func arith(t *testing.T) Binary {
	return Binary{Kind: "task", Name: "arith", Path: build(t, "examples/arith", ".", "arith", "")}
}

func TestDiscoverAndFind(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(a, "rlhost-task-gsm8k"), filepath.Join(b, "rlhost-task-gsm8k"),
		filepath.Join(b, "rlhost-task-swedev"), filepath.Join(b, "rlhost-trace-local"), filepath.Join(b, "not-a-plugin")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("RLHOST_PLUGIN_PATH", a+string(os.PathListSeparator)+b)
	t.Setenv("HOME", t.TempDir())
	got := Discover("")
	var names []string
	for _, x := range got {
		names = append(names, x.Kind+"/"+x.Name+"@"+filepath.Base(filepath.Dir(x.Path)))
	}
	want := []string{"task/gsm8k@" + filepath.Base(a), "task/swedev@" + filepath.Base(b), "trace/local@" + filepath.Base(b)}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("Discover: %v, want %v", names, want)
	}
	if bin, err := Find("task", "gsm8k"); err != nil || filepath.Dir(bin.Path) != a {
		t.Fatalf("Find gsm8k: %+v %v; want the one in %s (first on the path)", bin, err, a)
	}
	_, err := Find("task", "gsm8l")
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), `did you mean "gsm8k"?`) {
		t.Fatalf("Find gsm8l: %v; want a did-you-mean", err)
	}
	_, err = Find("task", "completely-different")
	if err == nil || !strings.Contains(err.Error(), "installed: gsm8k, swedev") {
		t.Fatalf("Find unknown: %v; want the installed list", err)
	}
}

// Plugins in the folder beside the running program (bin/plugins beside bin/rlhost) are found
// from any working directory, after ./bin/plugins and before ~/.rlhost/plugins.
func TestFindBesideExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ = filepath.EvalSymlinks(exe)
	dir := filepath.Join(filepath.Dir(exe), "plugins")
	if _, err := os.Stat(dir); err == nil {
		t.Skipf("%s exists already", dir)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "rlhost-task-beside"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RLHOST_PLUGIN_PATH", "")
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	bin, err := Find("task", "beside")
	if err != nil || bin.Path != filepath.Join(dir, "rlhost-task-beside") {
		t.Fatalf("Find from another directory: %+v, %v", bin, err)
	}
	sp := SearchPath()
	if len(sp) != 3 || !strings.HasSuffix(sp[0], filepath.Join("bin", "plugins")) || sp[1] != dir || !strings.HasSuffix(sp[2], filepath.Join(".rlhost", "plugins")) {
		t.Errorf("search path %q; want ./bin/plugins, %s, ~/.rlhost/plugins", sp, dir)
	}
}

func TestOpenTaskAndCall(t *testing.T) {
	ctx := context.Background()
	tk, err := OpenTaskBinary(ctx, arith(t), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	info, err := tk.Info(ctx)
	if err != nil || info.Name != "arith" {
		t.Fatalf("Info: %+v %v", info, err)
	}
	res, err := tk.Score(ctx, []task.ScoreItem{{Solution: "it is 7", GroundTruth: "7"}, {Solution: "8", GroundTruth: "7"}})
	if err != nil || res[0].Score != 1 || res[1].Score != 0 {
		t.Fatalf("Score: %+v %v", res, err)
	}
	// A task that takes no config rejects config keys, naming them.
	if err := tk.Configure(ctx, map[string]any{"x": 1}); err == nil || !strings.Contains(err.Error(), "[x]") {
		t.Fatalf("Configure of a task without config: %v", err)
	}
}

func TestCrashIsReportedAndRestarted(t *testing.T) {
	ctx := context.Background()
	var logBuf syncBuf
	logger := hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Debug})
	tk, err := OpenTaskBinary(ctx, fixture(t, "crash"), nil, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	pid := tk.sup.proc.Pid()
	st, err := tk.Start(ctx, task.StartRequest{TrajectoryID: "x", Row: task.Row{DataSource: "fixture"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tk.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools})
	var perr *Error
	if !errors.As(err, &perr) || !perr.Exited || perr.Call != "Obs" {
		t.Fatalf("Obs on a crashing plugin: %v; want an *Error with Exited and Call Obs", err)
	}
	for _, want := range []string{"plugin rlhost-task-fixture exited during Obs of trajectory x (exit status 3)", "about to crash on purpose"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// The plugin's log line reached the host log under its name (its stderr is read by its own
	// goroutine: wait for the line, bounded).
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logBuf.String(), "about to crash on purpose") &&
		time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logBuf.String(), "rlhost-task-fixture") || !strings.Contains(logBuf.String(), "about to crash on purpose") {
		t.Errorf("host log lacks the plugin's line under its name:\n%s", logBuf.String())
	}
	// The next call restarts it.
	info, err := tk.Info(ctx)
	if err != nil || info.Name != "fixture" {
		t.Fatalf("Info after the crash: %+v %v", info, err)
	}
	if n := tk.Supervisor().Starts(); n != 2 {
		t.Errorf("starts = %d, want 2", n)
	}
	if pid == tk.sup.proc.Pid() {
		t.Errorf("same pid after restart")
	}
	// The instance died with the process: NotFound, not a hang.
	_, err = tk.End(ctx, task.EndRequest{InstanceID: st.InstanceID})
	if err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("End of an instance of the crashed process: %v; want NotFound", err)
	}
}

func TestRestartBackoff(t *testing.T) {
	s := NewSupervisor(Binary{}, Options{})
	s.MinBackoff, s.MaxBackoff = 100*time.Millisecond, time.Second
	var got []time.Duration
	for s.failures = 1; s.failures <= 6; s.failures++ {
		got = append(got, s.backoff())
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("backoff after %d failures = %v; want %v", i+1, got[i], want[i]*time.Millisecond)
		}
	}
}

func TestChecksumPinning(t *testing.T) {
	ctx := context.Background()
	bin := arith(t)
	b, err := os.ReadFile(bin.Path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	tk, err := OpenTaskBinary(ctx, bin, nil, Options{SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatalf("right checksum: %v", err)
	}
	tk.Close()
	sum[0] ^= 1
	_, err = OpenTaskBinary(ctx, bin, nil, Options{SHA256: hex.EncodeToString(sum[:])})
	if err == nil || !strings.Contains(err.Error(), "does not match the pinned checksum") {
		t.Fatalf("wrong checksum: %v", err)
	}
	_, err = OpenTaskBinary(ctx, bin, nil, Options{SHA256: "xyz"})
	if err == nil || !strings.Contains(err.Error(), "not a hex SHA-256") {
		t.Fatalf("malformed checksum: %v", err)
	}
}

func TestStartFailures(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		mode string
		want string
	}{
		{"wrongversion", "speaks another protocol version"},
		{"badhandshake", "printed something other than the go-plugin handshake line"},
	}
	for _, c := range cases {
		_, err := OpenTaskBinary(ctx, fixture(t, c.mode), nil, Options{StartTimeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "rlhost-task-fixture") {
			t.Errorf("%s: %v; want an error naming the plugin and %q", c.mode, err, c.want)
		}
	}
	// A plugin that never answers Info: the caller's deadline ends the wait with a named error.
	hang := fixture(t, "hang")
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := OpenTaskBinary(cctx, hang, nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "rlhost-task-fixture") || !strings.Contains(err.Error(), "Info") {
		t.Errorf("hang: %v", err)
	}
	// Not executable, and a directory.
	dir := t.TempDir()
	f := filepath.Join(dir, "rlhost-task-x")
	os.WriteFile(f, []byte("#!/bin/sh\n"), 0o644)
	if _, err := OpenTaskBinary(ctx, Binary{Kind: "task", Name: "x", Path: f}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "chmod +x") {
		t.Errorf("not executable: %v", err)
	}
	if _, err := OpenTaskBinary(ctx, Binary{Kind: "task", Name: "x", Path: dir}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	ctx := context.Background()
	tk, err := OpenTaskBinary(ctx, arith(t), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid := tk.sup.proc.Pid()
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("plugin pid %d is not running", pid)
	}
	tk.Close()
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("plugin pid %d still running after Close", pid)
	}
	if _, err := tk.Info(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v; want ErrClosed", err)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gone reports whether no process has pid (after waiting up to 5s for it to be reaped).
func gone(pid int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return true
		}
	}
	return false
}

// An Obs that never answers is cancelled at task.timeouts.obs with an error naming the
// plugin, the call, the trajectory and the time taken; it is listed as pending while it
// runs; a plugin that still answers health checks keeps running.
func TestCallTimeout(t *testing.T) {
	ctx := context.Background()
	tk, err := OpenTaskBinaryWith(ctx, fixture(t, "hangobs"), nil, Options{}, TaskOptions{Timeouts: Timeouts{Obs: 600 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	st, err := tk.Start(ctx, task.StartRequest{TrajectoryID: "s1-0-1", Row: task.Row{DataSource: "fixture"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan []Pending, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		seen <- tk.Pending()
	}()
	start := time.Now()
	_, err = tk.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools})
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) || took < 600*time.Millisecond || took > 5*time.Second {
		t.Fatalf("Obs of a hanging plugin: %v after %v; want ErrTimeout after about 600ms", err, took)
	}
	for _, want := range []string{"plugin rlhost-task-fixture: Obs of trajectory s1-0-1 got no answer within 600ms (task.timeouts.obs) and was cancelled after 6",
		"the plugin still answers health checks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is not one line", err)
	}
	if p := <-seen; len(p) != 1 || p[0].Call != "Obs" || p[0].What != "trajectory s1-0-1" || p[0].Plugin != "rlhost-task-fixture" {
		t.Errorf("pending during the Obs: %+v", p)
	}
	if p := tk.Pending(); len(p) != 0 {
		t.Errorf("pending after the Obs: %+v", p)
	}
	if _, err := tk.Info(ctx); err != nil || tk.Supervisor().Starts() != 1 {
		t.Errorf("after the timeout: Info %v, starts %d; want the same process, working", err, tk.Supervisor().Starts())
	}
}

// A plugin that stops answering altogether (SIGSTOP in Obs): the call is cancelled at its
// deadline, the health check that follows fails, the process is stopped (SIGKILL when it does
// not shut down) and the next call runs on a new one.
func TestFrozenPluginRestarted(t *testing.T) {
	ctx := context.Background()
	tk, err := OpenTaskBinaryWith(ctx, fixture(t, "freeze"), nil, Options{}, TaskOptions{Timeouts: Timeouts{Obs: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	tk.Supervisor().HealthTimeout = 500 * time.Millisecond
	pid := tk.sup.proc.Pid()
	st, err := tk.Start(ctx, task.StartRequest{TrajectoryID: "s2-1-0", Row: task.Row{DataSource: "fixture"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tk.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "Obs of trajectory s2-1-0 got no answer within 500ms") ||
		!strings.Contains(err.Error(), "does not answer health checks either") || !strings.Contains(err.Error(), "restarts on the next call") {
		t.Fatalf("Obs of a frozen plugin: %v", err)
	}
	if info, err := tk.Info(ctx); err != nil || info.Name != "fixture" || tk.Supervisor().Starts() != 2 {
		t.Fatalf("the call after: %+v %v, starts %d; want a new process", info, err, tk.Supervisor().Starts())
	}
	tk.Close()
	if !gone(pid) {
		t.Fatalf("the frozen plugin (pid %d) is still there after Close", pid)
	}
}

// The handshake line's certificate is accepted in standard base64 with and without padding
// (go-plugin alone takes only the unpadded form), from a plugin process that prints the line
// itself with a certificate whose base64 is padded.
func TestHandshakeCertificatePadding(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"padcert", "rawcert"} {
		tk, err := OpenTaskBinary(ctx, fixture(t, mode), nil, Options{})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		res, err := tk.Score(ctx, []task.ScoreItem{{Solution: "1", GroundTruth: "1"}})
		if err != nil || len(res) != 1 || res[0].Score != 1 {
			t.Errorf("%s: Score %+v %v", mode, res, err)
		}
		pid := tk.sup.proc.Pid()
		tk.Close()
		if !gone(pid) {
			t.Errorf("%s: pid %d still there after Close", mode, pid)
		}
	}
}

// A panic in a Go plugin's handler reaches the host as the call's error, one line with the
// panic and the plugin's frames, and the plugin keeps serving.
func TestPanicReachesHost(t *testing.T) {
	ctx := context.Background()
	tk, err := OpenTaskBinary(ctx, fixture(t, "panic"), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	_, err = tk.Score(ctx, []task.ScoreItem{{Solution: "1", GroundTruth: "1"}})
	want := "plugin rlhost-task-fixture: Score of 1 item: Score: panic: runtime error: index out of range [1] with length 1 (at main.grade main.go:"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "<- main.fixture.Score main.go:") ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("Score of a panicking plugin: %v; want one line with %q and the plugin's frames", err, want)
	}
	if _, err := tk.Info(ctx); err != nil || tk.Supervisor().Starts() != 1 {
		t.Errorf("after the panic: %v, starts %d; want the same process serving", err, tk.Supervisor().Starts())
	}
}

// What a plugin writes to stdout after its handshake line is logged as a warning under the
// plugin's name and counted (a Go plugin's os.Stdout reaches the host through go-plugin's
// stdio stream).
func TestStdoutAfterHandshakeWarns(t *testing.T) {
	ctx := context.Background()
	var logBuf syncBuf
	logger := hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Warn})
	tk, err := OpenTaskBinary(ctx, fixture(t, "stdout"), nil, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	if _, err := tk.Score(ctx, []task.ScoreItem{{Solution: "1", GroundTruth: "1"}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logBuf.String(), "scoring 1 items") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{"wrote to stdout after the handshake", "plugin=rlhost-task-fixture", `line="scoring 1 items"`} {
		if !strings.Contains(logBuf.String(), want) {
			t.Errorf("host log lacks %q:\n%s", want, logBuf.String())
		}
	}
	if n, first := tk.sup.proc.StrayStdout(); n != 1 || first != "scoring 1 items" {
		t.Errorf("StrayStdout: %d %q", n, first)
	}
}

// A stream's watch times out the oldest unanswered record, counting from its sending or from
// the last answer, whichever is later.
func TestStreamWatch(t *testing.T) {
	w := newStreamWatch(time.Second)
	t0 := time.Now()
	if w.check(t0.Add(time.Hour)) {
		t.Fatal("nothing sent, yet late")
	}
	w.sent(7)
	w.sent(8)
	if w.check(time.Now().Add(900 * time.Millisecond)) {
		t.Fatal("late before its limit")
	}
	w.answered()
	w.mu.Lock()
	w.queue[0].at = t0.Add(-time.Hour) // record 8 was sent long ago, but an answer just came
	w.mu.Unlock()
	if w.check(time.Now().Add(500 * time.Millisecond)) {
		t.Fatal("late while the plugin works through its backlog")
	}
	if !w.check(time.Now().Add(1500*time.Millisecond)) || w.lateRecord() == nil || *w.lateRecord() != 8 {
		t.Fatalf("record 8 unanswered 1.5s after the last answer: late %v", w.lateRecord())
	}
}
