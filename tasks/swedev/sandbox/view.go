package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// What an instance's commands see of the file system in the bwrap and ns modes (the view):
// its working tree at WorkDir, its own temporary directory at TmpDir, /proc of its own pid
// namespace, a minimal /dev, and read-only the toolchain (ToolchainPaths, the Go
// installation, the Config's ReadOnlyBinds); nothing else of the host exists there. The
// rlimit mode has no view: its commands see the host's file system with the rights of their
// uid, which is why the Manager reports it as weak (WeakIsolation).
const (
	WorkDir = "/testbed" // the working tree inside an instance (bwrap, ns)
	TmpDir  = "/tmp"     // the instance's temporary directory and HOME inside an instance (bwrap, ns)
)

// ToolchainPaths are the host paths an instance sees read-only (those that exist): the system
// folders and the few files of /etc a toolchain reads (users and groups, hosts, the dynamic
// linker's cache, alternatives, TLS certificates, the Python installation's configuration).
var ToolchainPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ld.so.cache", "/etc/ld.so.conf",
	"/etc/ld.so.conf.d", "/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/python3*"}

type mountKind int

const (
	mountRO      mountKind = iota // bind src read-only at dst
	mountRW                       // bind src writable at dst
	mountSymlink                  // a symbolic link at dst pointing to src
	mountProc                     // /proc of the pid namespace
	mountDev                      // a minimal /dev
	mountTmpfs                    // an empty tmpfs
)

type mountSpec struct {
	kind     mountKind
	src, dst string
}

// goRoot is the Go installation of the host's go command ("" when there is none).
func goRoot() string {
	g, err := exec.LookPath("go")
	if err != nil {
		return ""
	}
	r, err := filepath.EvalSymlinks(g)
	if err != nil {
		return ""
	}
	return filepath.Dir(filepath.Dir(r))
}

// toolchainView lists the read-only part of the view: ToolchainPaths, the Go installation
// and extra (absolute host paths, bound at the same place). A symbolic link among them (/bin
// -> usr/bin on merged-/usr systems) is made again as a link. Shorter paths come first, so
// that a bind of a folder never hides one inside it.
func toolchainView(extra []string) ([]mountSpec, error) {
	var paths []string
	for _, p := range ToolchainPaths {
		if strings.ContainsAny(p, "*?[") {
			m, _ := filepath.Glob(p)
			paths = append(paths, m...)
		} else {
			paths = append(paths, p)
		}
	}
	if r := goRoot(); r != "" {
		paths = append(paths, r)
	}
	for _, p := range extra {
		if !filepath.IsAbs(p) || strings.ContainsAny(p, "\x00\n") {
			return nil, fmt.Errorf("sandbox: read-only bind %q: want an absolute path", p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("sandbox: read-only bind %q: %v", p, err)
		}
		paths = append(paths, filepath.Clean(p))
	}
	seen := map[string]bool{}
	var out []mountSpec
	for _, p := range paths {
		if seen[p] || covered(p, paths) {
			continue
		}
		seen[p] = true
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			t, err := os.Readlink(p)
			if err != nil {
				continue
			}
			out = append(out, mountSpec{kind: mountSymlink, src: t, dst: p})
			continue
		}
		out = append(out, mountSpec{kind: mountRO, src: p, dst: p})
	}
	sort.SliceStable(out, func(i, j int) bool { return depth(out[i].dst) < depth(out[j].dst) })
	return out, nil
}

// covered reports whether a folder in paths other than p holds p (p is bound with it).
func covered(p string, paths []string) bool {
	for _, q := range paths {
		if q != p && (q == "/" || strings.HasPrefix(p, q+"/")) {
			if st, err := os.Lstat(q); err == nil && st.IsDir() {
				return true
			}
		}
	}
	return false
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// view is the whole view of an instance in the bwrap and ns modes.
func (m *Manager) view(in *instance) []mountSpec {
	v := append([]mountSpec(nil), m.toolchain...)
	v = append(v,
		mountSpec{kind: mountProc, dst: "/proc"},
		mountSpec{kind: mountDev, dst: "/dev"},
		mountSpec{kind: mountTmpfs, dst: "/dev/shm"},
		mountSpec{kind: mountRW, src: in.work, dst: WorkDir},
		mountSpec{kind: mountRW, src: in.tmp, dst: TmpDir})
	if m.asRoot {
		v = append(v, mountSpec{kind: mountRW, src: m.goCache(in), dst: path.Join(TmpDir, goCacheDir)})
	}
	return v
}

// bwrapArgs turns a view into bubblewrap's arguments.
func bwrapArgs(v []mountSpec) []string {
	var a []string
	for _, s := range v {
		switch s.kind {
		case mountRO:
			a = append(a, "--ro-bind", s.src, s.dst)
		case mountRW:
			a = append(a, "--bind", s.src, s.dst)
		case mountSymlink:
			a = append(a, "--symlink", s.src, s.dst)
		case mountProc:
			a = append(a, "--proc", s.dst)
		case mountDev:
			a = append(a, "--dev", s.dst)
		case mountTmpfs:
			a = append(a, "--tmpfs", s.dst)
		}
	}
	return append(a, "--remount-ro", "/")
}

// devNodes are the device files of the ns mode's /dev (bubblewrap's --dev makes the same).
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// nsScript is the shell script that builds a view in the ns mode. It runs as root, as pid 1
// of new mount, pid, network, ipc and uts namespaces: it mounts a tmpfs on newRoot, binds
// the view into it, makes it the root (pivot_root; the host's root is detached), and runs
// the command as uid:gid with no capabilities (setpriv). "$@" is the command line to run.
func nsScript(v []mountSpec, newRoot string, uid, gid int) string {
	q := shellQuote
	var b strings.Builder
	b.WriteString("set -e\nmount --make-rprivate /\n")
	fmt.Fprintf(&b, "R=%s\nmount -t tmpfs -o mode=0755,nosuid,nodev,size=1m rlhost-view \"$R\"\n", q(newRoot))
	for _, s := range v {
		d := `"$R"` + q(s.dst)
		switch s.kind {
		case mountRO, mountRW:
			if st, err := os.Stat(s.src); err == nil && !st.IsDir() {
				fmt.Fprintf(&b, "mkdir -p \"$R\"%s && touch %s\n", q(path.Dir(s.dst)), d)
			} else {
				fmt.Fprintf(&b, "mkdir -p %s\n", d)
			}
			fmt.Fprintf(&b, "mount --bind %s %s\n", q(s.src), d)
			if s.kind == mountRO {
				fmt.Fprintf(&b, "mount -o remount,bind,ro,nosuid,nodev %s\n", d)
			} else {
				fmt.Fprintf(&b, "mount -o remount,bind,nosuid,nodev %s\n", d)
			}
		case mountSymlink:
			fmt.Fprintf(&b, "mkdir -p \"$R\"%s && ln -s %s %s\n", q(path.Dir(s.dst)), q(s.src), d)
		case mountProc:
			fmt.Fprintf(&b, "mkdir -p %s && mount -t proc -o nosuid,nodev,noexec proc %s\n", d, d)
		case mountDev:
			fmt.Fprintf(&b, "mkdir -p %s && mount -t tmpfs -o mode=0755,nosuid,size=64k rlhost-dev %s\n", d, d)
			for _, n := range devNodes {
				fmt.Fprintf(&b, "touch %s/%s && mount --bind /dev/%s %s/%s\n", d, n, n, d, n)
			}
			for n, t := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
				fmt.Fprintf(&b, "ln -s %s %s/%s\n", t, d, n)
			}
		case mountTmpfs:
			fmt.Fprintf(&b, "mkdir -p %s && mount -t tmpfs -o mode=1777,nosuid,nodev,size=64m rlhost-tmp %s\n", d, d)
		}
	}
	fmt.Fprintf(&b, "cd \"$R\"\npivot_root . .\numount -l .\nmount -o remount,bind,ro /\ncd %s\n", q(WorkDir))
	fmt.Fprintf(&b, "exec setpriv --reuid=%d --regid=%d --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- \"$@\"\n", uid, gid)
	return b.String()
}
