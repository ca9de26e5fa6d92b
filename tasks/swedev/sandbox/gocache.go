package sandbox

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// The Go build cache. One shared cache (Config.GoCache) is written only by the Manager (from
// New, in the background, building Config.GoCacheWarm, the standard library by default) and
// never by an instance. As root, each instance gets the shared cache as the lower layer of an
// overlay mount of its own (goCacheLayer; the upper layer on a tmpfs of its own): it reads
// the shared entries, and what its go commands add or change lands in its upper layer, gone
// with the instance, so no instance can change what another one builds with. Not as root (no
// overlay, no uid of their own) the instances start from an empty cache of their own.

// goCacheDir is the instance's Go build cache, relative to its temporary directory.
const goCacheDir = ".cache/go-build"

var goVersionRe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// prepareGoCache makes the shared cache: it discards one that is not the Manager's alone
// (written by instances before this design, so possibly poisoned), then warms it.
func (m *Manager) prepareGoCache() error {
	if m.cfg.GoCache == "" {
		dir, err := os.UserCacheDir()
		if err != nil || m.asRoot {
			dir = "/var/cache" // root's home is closed to the instances' uids
		}
		m.cfg.GoCache = filepath.Join(dir, "rlhost", "sandbox-gobuild")
	}
	if !m.asRoot {
		return nil
	}
	if err := os.MkdirAll(m.cfg.GoCache, 0o755); err != nil {
		return fmt.Errorf("sandbox: go cache: %v", err)
	}
	if !ownedOnly(m.cfg.GoCache, os.Geteuid()) {
		if err := os.RemoveAll(m.cfg.GoCache); err != nil {
			return fmt.Errorf("sandbox: go cache %s is writable by others and cannot be removed: %v", m.cfg.GoCache, err)
		}
		if err := os.MkdirAll(m.cfg.GoCache, 0o755); err != nil {
			return fmt.Errorf("sandbox: go cache: %v", err)
		}
	}
	if err := os.Chmod(m.cfg.GoCache, 0o755); err != nil {
		return fmt.Errorf("sandbox: go cache: %v", err)
	}
	pkgs := m.cfg.GoCacheWarm
	if pkgs == nil {
		pkgs = []string{"std"}
	}
	if len(pkgs) == 0 || goRoot() == "" {
		return nil
	}
	ver, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return nil // no go command: nothing to warm
	}
	marker := filepath.Join(m.cfg.GoCache, "rlhost-warm-"+goVersionRe.ReplaceAllString(strings.TrimSpace(string(ver))+"-"+strings.Join(pkgs, "+"), "_"))
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	// In the background: the first build takes minutes, and nothing should wait for it (a
	// plugin's Info starts the sandbox). Instances made meanwhile find fewer entries and build
	// the rest in their own layer.
	go warmGoCache(m.cfg.GoCache, pkgs, marker)
	return nil
}

// warmGoCache builds pkgs into the shared cache and writes marker when done.
func warmGoCache(cache string, pkgs []string, marker string) {
	tmp, err := os.MkdirTemp("", "rlhost-gocache-warm-")
	if err != nil {
		return
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", append([]string{"build"}, pkgs...)...)
	// The environment of an instance's go command (see Manager.command), so that the cache
	// keys are the ones the instances look up.
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=" + sandboxPath, "HOME=" + tmp, "GOCACHE=" + cache, "GOPATH=" + filepath.Join(tmp, "gopath"),
		"GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOTELEMETRY=off", "CGO_ENABLED=0", "LANG=C.UTF-8"}
	if err := cmd.Run(); err != nil {
		return // no marker: the next Manager tries again
	}
	// Whatever the Manager's umask: the files are read-only to everyone but root.
	_ = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			if info, err := d.Info(); err == nil && info.Mode().Perm()&0o022 != 0 {
				_ = os.Chmod(p, info.Mode().Perm()&^0o022)
			}
		}
		return nil
	})
	_ = os.WriteFile(marker, nil, 0o644)
}

// ownedOnly reports whether every entry under dir belongs to uid and is writable by it alone.
func ownedOnly(dir string, uid int) bool {
	ok := true
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			ok = false
			return filepath.SkipAll
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil || int(st.Uid) != uid || st.Mode&0o022 != 0 {
			ok = false
			return filepath.SkipAll
		}
		return nil
	})
	return ok
}

// goCache is where an instance's Go build cache is on the host: the overlay's mount point
// (root), or a folder of the instance's temporary directory.
func (m *Manager) goCache(in *instance) string {
	if m.asRoot {
		return filepath.Join(in.dir, "gocache")
	}
	return filepath.Join(in.tmp, goCacheDir)
}

// goCacheLayer makes an instance's cache. As root: an overlay mount at goCache(in) whose lower
// layer is the shared cache and whose upper layer (on a tmpfs at in.dir/gocache-rw) holds a folder owned
// by the instance for each of the shared cache's folders (so that it may add entries) and its
// own copy of the files the go command rewrites (trim.txt). The mount point inside the
// temporary directory is made too (bwrap and ns bind the cache there).
func (m *Manager) goCacheLayer(in *instance) error {
	inner := filepath.Join(in.tmp, goCacheDir)
	if err := os.MkdirAll(inner, 0o755); err != nil {
		return fmt.Errorf("sandbox: go cache: %v", err)
	}
	for d := inner; in.uid >= 0 && d != in.tmp; d = filepath.Dir(d) {
		_ = os.Lchown(d, in.uid, m.gid)
	}
	if !m.asRoot {
		return nil
	}
	// The upper layer lives on a tmpfs of its own (at most goCacheUpperSize of memory): making
	// its folders and dropping it cost no disk work (on ext4 under load, 256 folders took
	// 40-120 ms to make and 300-500 ms to remove).
	dst, rw := m.goCache(in), filepath.Join(in.dir, "gocache-rw")
	for _, d := range []string{dst, rw} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("sandbox: go cache: %v", err)
		}
	}
	if err := syscall.Mount("rlhost-gocache", rw, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", goCacheUpperSize)); err != nil {
		return fmt.Errorf("sandbox: go cache: mounting a tmpfs at %s: %v", rw, err)
	}
	up, wk := filepath.Join(rw, "upper"), filepath.Join(rw, "work")
	for _, d := range []string{up, wk} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("sandbox: go cache: %v", err)
		}
	}
	ents, err := os.ReadDir(m.cfg.GoCache)
	if err != nil {
		return fmt.Errorf("sandbox: go cache: %v", err)
	}
	for _, e := range ents {
		p, q := filepath.Join(m.cfg.GoCache, e.Name()), filepath.Join(up, e.Name())
		switch {
		case e.IsDir():
			if err := os.Mkdir(q, 0o755); err != nil {
				return fmt.Errorf("sandbox: go cache: %v", err)
			}
		case e.Type().IsRegular() && !strings.HasPrefix(e.Name(), "rlhost-warm-"):
			if err := copyFile(p, q); err != nil {
				return err
			}
		}
	}
	if in.uid >= 0 {
		if err := chownTree(up, in.uid, m.gid); err != nil {
			return fmt.Errorf("sandbox: go cache: %v", err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", m.cfg.GoCache, up, wk)
	if err := syscall.Mount("overlay", dst, "overlay", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return fmt.Errorf("sandbox: go cache: mounting the overlay at %s: %v", dst, err)
	}
	return nil
}

// goCacheUpperSize bounds the memory of an instance's Go cache layer.
const goCacheUpperSize = 256 << 20

// dropGoCache unmounts an instance's cache overlay and the tmpfs of its upper layer (as root;
// nothing otherwise).
func dropGoCache(dir string) {
	_ = syscall.Unmount(filepath.Join(dir, "gocache"), syscall.MNT_DETACH)
	_ = syscall.Unmount(filepath.Join(dir, "gocache-rw"), syscall.MNT_DETACH)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return nil // removed meanwhile
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("sandbox: go cache: %v", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("sandbox: go cache: %v", err)
	}
	return out.Close()
}
