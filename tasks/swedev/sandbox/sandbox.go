package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors of the Manager; the Server maps them to HTTP status codes.
var (
	ErrNotFound = errors.New("sandbox: no such instance")
	ErrBadInput = errors.New("sandbox: bad request")
	ErrFull     = errors.New("sandbox: too many instances")
)

func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// Config configures a Manager.
type Config struct {
	Root          string        // directory of the instances' working trees (default machineTemp()/rlhost-sandbox, shared by Managers)
	MaxInstances  int           // instances alive at once (default 64)
	Slots         int           // commands running at once; the others wait in FIFO order (default 2*NumCPU)
	Lease         time.Duration // an instance not touched for this long is deleted (default 10 min)
	MaxLease      time.Duration // the longest lease a Create may ask for (default 2 h)
	Defaults      Limits        // limits of a command that gives none (default DefaultLimits())
	Max           Limits        // the most a command may ask for (default Defaults)
	Isolation     string        // "bwrap", "ns", "rlimit" or "" for the strongest available
	UIDBase       int           // first uid of the per-instance uids when running as root (default 61000)
	GoCache       string        // the shared Go build cache, read-only to instances (default /var/cache/rlhost/sandbox-gobuild as root, else the user cache dir's); see goCacheLayer
	GoCacheWarm   []string      // packages built into GoCache at New, as the Manager's user (default std; none when GoCache is not root's)
	ReadOnlyBinds []string      // host paths an instance also sees, read-only at the same place (bwrap and ns modes)
	MaxFiles      int           // files in a snapshot (default 10000)
	MaxSnapshot   int64         // bytes of a snapshot (default 64 MiB)
}

// Info describes an instance.
type Info struct {
	ID         string    `json:"id"`
	BaseCommit string    `json:"base_commit"`
	Expires    time.Time `json:"expires"`
	Isolation  string    `json:"isolation"`
}

// CreateRequest makes an instance from a repository snapshot: Files maps slash-separated
// relative paths to their contents; the snapshot is committed as the base state. When
// BaseCommit is set the commit must have that hash (the snapshot is the one the row expects).
type CreateRequest struct {
	Files      map[string]string `json:"files"`
	BaseCommit string            `json:"base_commit,omitempty"`
	Lease      time.Duration     `json:"lease_ns,omitempty"`
}

// ExecRequest runs Command with bash -c in the working tree.
type ExecRequest struct {
	Command string            `json:"command"`
	Stdin   string            `json:"stdin,omitempty"`
	Limits  Limits            `json:"limits,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// ExecResult is what a command did. Killed names the limit that stopped it ("wall",
// "output"), "" when it exited on its own; Error describes a limit the command broke
// (time, output, disk, a signal) in words the model can read.
type ExecResult struct {
	Stdout          string        `json:"stdout"`
	Stderr          string        `json:"stderr"`
	ExitCode        int           `json:"exit_code"`
	Duration        time.Duration `json:"duration_ns"`
	Queued          time.Duration `json:"queued_ns"`
	StdoutTruncated bool          `json:"stdout_truncated,omitempty"`
	StderrTruncated bool          `json:"stderr_truncated,omitempty"`
	Killed          string        `json:"killed,omitempty"`
	Error           string        `json:"error,omitempty"`
}

// Manager owns the instances.
type Manager struct {
	cfg       Config
	isolation string
	slots     chan struct{}
	asRoot    bool
	gid       int // group of the instances' uids when running as root
	toolchain []mountSpec

	mu        sync.Mutex
	instances map[string]*instance
	uidUsed   map[int]*os.File // uid -> its lock file, held while an instance of this Manager has it
	closed    bool
	stop      chan struct{}
	reaped    sync.WaitGroup

	goRunner goRunnerBuild // the Go test runner, built once (tests.go)
}

type instance struct {
	id      string
	dir     string // instance directory (root-owned): work/, tmp/
	work    string
	tmp     string
	uid     int // -1 when not dropping privileges
	base    string
	expires time.Time
	lease   time.Duration
	mu      sync.Mutex // one command at a time per instance
	deleted bool
}

// New starts a Manager and its lease reaper.
func New(cfg Config) (*Manager, error) {
	if cfg.MaxInstances <= 0 {
		cfg.MaxInstances = 64
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 2 * runtime.NumCPU()
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 10 * time.Minute
	}
	if cfg.MaxLease <= 0 {
		cfg.MaxLease = 2 * time.Hour
	}
	if cfg.Defaults == (Limits{}) {
		cfg.Defaults = DefaultLimits()
	}
	if cfg.Max == (Limits{}) {
		cfg.Max = cfg.Defaults
		cfg.Max.Wall, cfg.Max.CPU = max(cfg.Max.Wall, 10*time.Minute), max(cfg.Max.CPU, 10*time.Minute)
		cfg.Max.Output = max(cfg.Max.Output, 1<<20)
	}
	if _, err := cfg.Defaults.within(cfg.Defaults, cfg.Max); err != nil {
		return nil, fmt.Errorf("sandbox: default limits: %v", err)
	}
	if cfg.UIDBase <= 0 {
		cfg.UIDBase = 61000
	}
	if cfg.MaxFiles <= 0 {
		cfg.MaxFiles = 10000
	}
	if cfg.MaxSnapshot <= 0 {
		cfg.MaxSnapshot = 64 << 20
	}
	m := &Manager{cfg: cfg, instances: map[string]*instance{}, uidUsed: map[int]*os.File{}, stop: make(chan struct{}),
		slots: make(chan struct{}, cfg.Slots), asRoot: os.Geteuid() == 0}
	if m.cfg.Root == "" {
		// One directory for every Manager of the machine, so that a Manager removes what a
		// dead one left (its working trees are named after its pid).
		m.cfg.Root = filepath.Join(machineTemp(), "rlhost-sandbox")
	}
	if err := os.MkdirAll(m.cfg.Root, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: root: %v", err)
	}
	if err := os.Chmod(m.cfg.Root, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: root: %v", err)
	}
	tc, err := toolchainView(cfg.ReadOnlyBinds)
	if err != nil {
		return nil, err
	}
	m.toolchain = tc
	if m.asRoot {
		m.gid = cfg.UIDBase - 1
	}
	if err := m.prepareGoCache(); err != nil {
		return nil, err
	}
	m.removeStale()
	iso, err := m.probe(cfg.Isolation)
	if err != nil {
		return nil, err
	}
	m.isolation = iso
	m.reaped.Add(1)
	go m.reaper()
	return m, nil
}

// Isolation is the isolation mode in use: "bwrap", "ns" or "rlimit".
func (m *Manager) Isolation() string { return m.isolation }

// WeakIsolation reports whether the instances see the host's file system (the rlimit mode):
// a command can then read whatever its uid may, such as a dataset's hidden tests and
// reference patches.
func (m *Manager) WeakIsolation() bool { return IsWeak(m.isolation) }

// IsWeak reports whether an isolation mode leaves the host's file system visible.
func IsWeak(isolation string) bool { return isolation != "bwrap" && isolation != "ns" }

// Root is the directory of the working trees.
func (m *Manager) Root() string { return m.cfg.Root }

// removeStale deletes instance directories left by a Manager that died (their owner pid is gone).
func (m *Manager) removeStale() {
	ents, _ := os.ReadDir(m.cfg.Root)
	for _, e := range ents {
		pidStr, _, ok := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || !e.IsDir() {
			continue
		}
		if pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		dir := filepath.Join(m.cfg.Root, e.Name())
		var st syscall.Stat_t
		if m.asRoot && syscall.Stat(dir, &st) == nil && int(st.Uid) >= m.cfg.UIDBase {
			// What the dead owner left running: kill it unless a live Manager has the uid now
			// (which killed it when it took the uid).
			m.mu.Lock()
			if u, err := m.takeUIDExact(int(st.Uid)); err == nil {
				m.releaseUIDLocked(u)
			}
			m.mu.Unlock()
		}
		dropGoCache(dir)
		_ = os.RemoveAll(dir)
	}
}

func (m *Manager) reaper() {
	defer m.reaped.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.mu.Lock()
			var expired []string
			for id, in := range m.instances {
				if now.After(in.expires) {
					expired = append(expired, id)
				}
			}
			m.mu.Unlock()
			for _, id := range expired {
				_ = m.Delete(context.Background(), id)
			}
		}
	}
}

// Close deletes every instance and stops the reaper.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	ids := make([]string, 0, len(m.instances))
	for id := range m.instances {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	close(m.stop)
	m.reaped.Wait()
	for _, id := range ids {
		_ = m.Delete(context.Background(), id)
	}
	return nil
}

// Len is the number of live instances.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.instances)
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cleanPath checks a slash-separated relative path of the working tree.
func cleanPath(p string) (string, error) {
	if p == "" {
		return "", badInput("empty path")
	}
	if strings.ContainsRune(p, 0) {
		return "", badInput("path %q contains a NUL byte", p)
	}
	c := path.Clean(strings.TrimPrefix(p, "./"))
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", badInput("path %q is outside the working tree", p)
	}
	if c == "." {
		return "", badInput("path %q names the working tree itself", p)
	}
	if c == ".git" || strings.HasPrefix(c, ".git/") {
		return "", badInput("path %q is inside .git", p)
	}
	return c, nil
}

// gitEnv runs git with no user or system config and fixed identities and dates, so that the
// same snapshot always gives the same base commit.
var gitEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LANG=C",
	"GIT_AUTHOR_NAME=rlhost", "GIT_AUTHOR_EMAIL=rlhost@localhost", "GIT_AUTHOR_DATE=2000-01-01T00:00:00Z",
	"GIT_COMMITTER_NAME=rlhost", "GIT_COMMITTER_EMAIL=rlhost@localhost", "GIT_COMMITTER_DATE=2000-01-01T00:00:00Z"}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "core.autocrlf=false"}, args...)...)
	cmd.Dir, cmd.Env = dir, gitEnv
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// BaseCommit is the commit a snapshot gets as its base state (the same hash Create gives).
func BaseCommit(files map[string]string) (string, error) {
	dir, err := os.MkdirTemp("", "rlhost-base-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	return commitSnapshot(dir, files, 1<<30, 1<<40)
}

func commitSnapshot(work string, files map[string]string, maxFiles int, maxBytes int64) (string, error) {
	if len(files) == 0 {
		return "", badInput("the snapshot has no files")
	}
	if len(files) > maxFiles {
		return "", badInput("the snapshot has %d files, at most %d", len(files), maxFiles)
	}
	var total int64
	names := make([]string, 0, len(files))
	for p, c := range files {
		total += int64(len(c))
		names = append(names, p)
	}
	if total > maxBytes {
		return "", badInput("the snapshot is %d bytes, at most %d", total, maxBytes)
	}
	sort.Strings(names)
	root, err := os.OpenRoot(work)
	if err != nil {
		return "", err
	}
	defer root.Close()
	for _, p := range names {
		c, err := cleanPath(p)
		if err != nil {
			return "", badInput("snapshot file %q: %v", p, errors.Unwrap(err))
		}
		if d := path.Dir(c); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return "", badInput("snapshot file %q: %v", p, err)
			}
		}
		if err := root.WriteFile(c, []byte(files[p]), 0o644); err != nil {
			return "", badInput("snapshot file %q: %v", p, err)
		}
	}
	if _, err := git(work, "init", "-q"); err != nil {
		return "", err
	}
	if _, err := git(work, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := git(work, "commit", "-q", "--no-verify", "-m", "base"); err != nil {
		return "", err
	}
	return git(work, "rev-parse", "HEAD")
}

// Create makes an instance from a snapshot.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (Info, error) {
	lease := req.Lease
	if lease <= 0 {
		lease = m.cfg.Lease
	}
	if lease > m.cfg.MaxLease {
		return Info{}, badInput("lease %s is over the maximum %s", lease, m.cfg.MaxLease)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Info{}, errors.New("sandbox: the manager is closed")
	}
	if len(m.instances) >= m.cfg.MaxInstances {
		m.mu.Unlock()
		return Info{}, fmt.Errorf("%w: %d alive, the maximum (delete some or raise -max-instances)", ErrFull, len(m.instances))
	}
	in := &instance{id: newID(), uid: -1, lease: lease}
	if m.asRoot {
		u, err := m.takeUID()
		if err != nil {
			m.mu.Unlock()
			return Info{}, err
		}
		in.uid = u
	}
	in.expires = time.Now().Add(lease)
	m.instances[in.id] = in
	m.mu.Unlock()
	info, err := m.create(in, req)
	if err != nil {
		m.forget(in)
		if in.dir != "" {
			dropGoCache(in.dir)
			_ = os.RemoveAll(in.dir)
		}
		return Info{}, err
	}
	return info, nil
}

func (m *Manager) forget(in *instance) {
	m.mu.Lock()
	delete(m.instances, in.id)
	m.releaseUIDLocked(in.uid)
	m.mu.Unlock()
}

// uidLockDir holds one lock file per instance uid, shared by every Manager of the machine
// (whatever their roots): a uid belongs to the Manager holding its flock, and the lock goes
// with the process when it dies.
var uidLockDir = filepath.Join(machineTemp(), "rlhost-sandbox-uids")

// machineTemp is the machine's temporary folder, /tmp where there is one, whatever TMPDIR
// says: the uid locks and the instances' root must be the same for every Manager of the
// machine (rlhost gives each run and its plugins a private TMPDIR, mode 0700, which the
// instances' uids could not enter either).
func machineTemp() string {
	if st, err := os.Stat("/tmp"); err == nil && st.IsDir() {
		return "/tmp"
	}
	return os.TempDir()
}

// takeUID finds a uid no Manager holds, locks it, and kills what a dead owner left running
// under it. m.mu is held.
func (m *Manager) takeUID() (int, error) {
	if err := os.MkdirAll(uidLockDir, 0o700); err != nil {
		return -1, fmt.Errorf("sandbox: %v", err)
	}
	for u := m.cfg.UIDBase; u < m.cfg.UIDBase+100000; u++ {
		if m.uidUsed[u] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(uidLockDir, strconv.Itoa(u)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return -1, fmt.Errorf("sandbox: %v", err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		killUID(u)
		m.uidUsed[u] = f
		return u, nil
	}
	return -1, errors.New("sandbox: no free uid")
}

// takeUIDExact locks uid u if no Manager holds it (and kills what runs under it).
func (m *Manager) takeUIDExact(u int) (int, error) {
	if m.uidUsed[u] != nil {
		return -1, errors.New("in use")
	}
	if err := os.MkdirAll(uidLockDir, 0o700); err != nil {
		return -1, err
	}
	f, err := os.OpenFile(filepath.Join(uidLockDir, strconv.Itoa(u)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return -1, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return -1, err
	}
	killUID(u)
	m.uidUsed[u] = f
	return u, nil
}

func (m *Manager) releaseUIDLocked(u int) {
	if f := m.uidUsed[u]; f != nil {
		f.Close() // releases the flock
		delete(m.uidUsed, u)
	}
}

func (m *Manager) create(in *instance, req CreateRequest) (Info, error) {
	in.dir = filepath.Join(m.cfg.Root, fmt.Sprintf("%d-%s", os.Getpid(), in.id))
	in.work, in.tmp = filepath.Join(in.dir, "work"), filepath.Join(in.dir, "tmp")
	for _, d := range []string{in.dir, in.work, in.tmp, filepath.Join(in.dir, "view")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return Info{}, fmt.Errorf("sandbox: %v", err)
		}
	}
	base, err := commitSnapshot(in.work, req.Files, m.cfg.MaxFiles, m.cfg.MaxSnapshot)
	if err != nil {
		return Info{}, err
	}
	if req.BaseCommit != "" && req.BaseCommit != base {
		return Info{}, badInput("the snapshot commits as %s, not as base_commit %s (the files are not the ones the row was made from)", base, req.BaseCommit)
	}
	in.base = base
	if in.uid >= 0 {
		if err := chownTree(in.dir, in.uid, m.gid); err != nil {
			return Info{}, fmt.Errorf("sandbox: %v", err)
		}
	}
	if err := m.goCacheLayer(in); err != nil {
		return Info{}, err
	}
	if in.uid >= 0 {
		if err := os.Chmod(in.dir, 0o700); err != nil {
			return Info{}, fmt.Errorf("sandbox: %v", err)
		}
	}
	return Info{ID: in.id, BaseCommit: base, Expires: in.expires, Isolation: m.isolation}, nil
}

func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// get returns a live instance and renews its lease.
func (m *Manager) get(id string) (*instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.instances[id]
	if !ok {
		return nil, fmt.Errorf("%w %q (never created, deleted, or its lease ran out)", ErrNotFound, id)
	}
	in.expires = time.Now().Add(in.lease)
	return in, nil
}

// Renew extends an instance's lease and returns its info.
func (m *Manager) Renew(_ context.Context, id string) (Info, error) {
	in, err := m.get(id)
	if err != nil {
		return Info{}, err
	}
	return Info{ID: in.id, BaseCommit: in.base, Expires: in.expires, Isolation: m.isolation}, nil
}

// Delete kills whatever still runs in the instance and removes its files.
func (m *Manager) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	in, ok := m.instances[id]
	if ok {
		delete(m.instances, id)
	}
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w %q", ErrNotFound, id)
	}
	// Kill a command still running first, so that Delete does not wait out its time limit.
	if in.uid >= 0 {
		killUID(in.uid)
	}
	in.mu.Lock()
	in.deleted = true
	if in.uid >= 0 {
		killUID(in.uid)
		removeOwned(in.uid, machineTemp(), "/dev/shm", "/var/tmp")
	}
	dropGoCache(in.dir)
	err := os.RemoveAll(in.dir)
	in.mu.Unlock()
	m.mu.Lock()
	m.releaseUIDLocked(in.uid)
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("sandbox: deleting instance %s: %v", id, err)
	}
	return nil
}

// killUID kills every process of uid (the instance's; nothing else runs under it). Zombies
// are dead already: they wait for their parent (pid 1, for bubblewrap's orphaned children) to
// reap them and are not counted.
func killUID(uid int) {
	for round := 0; round < 500; round++ { // up to 5 s: a dying pid namespace takes a moment
		pids := livePIDs(uid)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// livePIDs lists the processes of uid that are not zombies.
func livePIDs(uid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) != nil || int(st.Uid) != uid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X') {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// removeOwned removes the entries of dirs that uid owns (files an instance left in shared
// temporary directories).
func removeOwned(uid int, dirs ...string) {
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			var st syscall.Stat_t
			p := filepath.Join(d, e.Name())
			if syscall.Lstat(p, &st) == nil && int(st.Uid) == uid {
				_ = os.RemoveAll(p)
			}
		}
	}
}

// ReadFile returns a file of the working tree (at most max bytes; 0 means 1 MiB).
func (m *Manager) ReadFile(_ context.Context, id, p string, max int64) (string, error) {
	in, err := m.get(id)
	if err != nil {
		return "", err
	}
	c, err := cleanPath(p)
	if err != nil {
		return "", err
	}
	if max <= 0 {
		max = 1 << 20
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	root, err := os.OpenRoot(in.work)
	if err != nil {
		return "", fmt.Errorf("sandbox: %v", err)
	}
	defer root.Close()
	f, err := root.Open(c)
	if err != nil {
		return "", badInput("%s", rootErr(p, err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", badInput("%s", rootErr(p, err))
	}
	if st.IsDir() {
		return "", badInput("%q is a directory", p)
	}
	if !st.Mode().IsRegular() {
		return "", badInput("%q is not a regular file", p)
	}
	if st.Size() > max {
		return "", badInput("%q is %d bytes, more than %d", p, st.Size(), max)
	}
	b := make([]byte, st.Size())
	n, _ := f.Read(b)
	return string(b[:n]), nil
}

// rootErr words an os.Root error without the instance's host path.
func rootErr(p string, err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%q does not exist", p)
	case strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes"):
		return fmt.Sprintf("%q leads outside the working tree", p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%q: %v", p, pe.Err)
	}
	return fmt.Sprintf("%q: %v", p, err)
}

// WriteFile writes a file of the working tree, making its directories.
func (m *Manager) WriteFile(_ context.Context, id, p, content string) error {
	in, err := m.get(id)
	if err != nil {
		return err
	}
	c, err := cleanPath(p)
	if err != nil {
		return err
	}
	max := m.cfg.Defaults.FileSize
	if int64(len(content)) > max {
		return badInput("%q would be %d bytes, more than the file size limit %d", p, len(content), max)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	root, err := os.OpenRoot(in.work)
	if err != nil {
		return fmt.Errorf("sandbox: %v", err)
	}
	defer root.Close()
	if d := path.Dir(c); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return badInput("%s", rootErr(p, err))
		}
		if in.uid >= 0 {
			for x := d; x != "."; x = path.Dir(x) {
				_ = root.Lchown(x, in.uid, m.gid)
			}
		}
	}
	if st, err := root.Lstat(c); err == nil && !st.Mode().IsRegular() {
		return badInput("%q exists and is not a regular file", p)
	}
	if err := root.WriteFile(c, []byte(content), 0o644); err != nil {
		return badInput("%s", rootErr(p, err))
	}
	if in.uid >= 0 {
		_ = root.Lchown(c, in.uid, m.gid)
	}
	return nil
}
