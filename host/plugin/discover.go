package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	sdkplugin "github.com/rlhost/rlhost/sdk/plugin"
	"github.com/rlhost/rlhost/sdk/suggest"
)

// Binary is an installed plugin executable.
type Binary = sdkplugin.Binary

// SearchPath returns the directories plugins are looked up in, in order: RLHOST_PLUGIN_PATH,
// ./bin/plugins, the plugins folder beside the running program (bin/plugins for bin/rlhost,
// so that rlhost finds the plugins `make build` put there from any directory), then
// ~/.rlhost/plugins. A directory is listed once.
func SearchPath() []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("RLHOST_PLUGIN_PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, filepath.Join("bin", "plugins"))
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			dirs = append(dirs, filepath.Join(filepath.Dir(exe), "plugins"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".rlhost", "plugins"))
	}
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// Discover lists the installed plugins of a kind ("" for all kinds), sorted by kind and name.
// A name found in several directories is listed once, from the first.
func Discover(kind string) []Binary {
	seen := map[string]bool{}
	var out []Binary
	for _, dir := range SearchPath() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			for _, k := range []string{sdkplugin.KindTask, sdkplugin.KindTrace} {
				if kind != "" && k != kind {
					continue
				}
				prefix := sdkplugin.BinaryPrefix(k)
				if !strings.HasPrefix(e.Name(), prefix) || e.IsDir() || len(e.Name()) == len(prefix) {
					continue
				}
				if seen[e.Name()] {
					continue
				}
				seen[e.Name()] = true
				out = append(out, Binary{Kind: k, Name: strings.TrimPrefix(e.Name(), prefix), Path: filepath.Join(dir, e.Name())})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// ErrNotInstalled is returned (wrapped) by Find when no plugin has the name.
var ErrNotInstalled = errors.New("plugin not installed")

// Find returns the installed plugin of a kind and name. A name containing a path separator is
// taken as a path to the binary itself. An unknown name gets an error that suggests the closest
// installed name and lists where it looked.
func Find(kind, name string) (Binary, error) {
	if strings.ContainsRune(name, os.PathSeparator) {
		abs, err := filepath.Abs(name)
		if err != nil {
			return Binary{}, err
		}
		base := filepath.Base(abs)
		return Binary{Kind: kind, Name: strings.TrimPrefix(base, sdkplugin.BinaryPrefix(kind)), Path: abs}, nil
	}
	installed := Discover(kind)
	var names []string
	for _, b := range installed {
		if b.Name == name {
			return b, nil
		}
		names = append(names, b.Name)
	}
	msg := fmt.Sprintf("no %s plugin named %q (looked for %s%s in %s)", kind, name,
		sdkplugin.BinaryPrefix(kind), name, strings.Join(SearchPath(), ", "))
	if s := suggest.Closest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else if len(names) > 0 {
		msg += fmt.Sprintf("; installed: %s", strings.Join(names, ", "))
	} else {
		msg += "; none are installed: run `make build` or put plugin binaries on RLHOST_PLUGIN_PATH"
	}
	return Binary{}, &notInstalledError{msg}
}

type notInstalledError struct{ msg string }

func (e *notInstalledError) Error() string        { return e.msg }
func (e *notInstalledError) Is(target error) bool { return target == ErrNotInstalled }

// CheckExecutable reports problems a person can fix before launch (see sdk/plugin).
func CheckExecutable(path string) error { return sdkplugin.CheckExecutable(path) }
