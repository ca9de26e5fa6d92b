// Package libfind finds the shared libraries of the CUDA stack that the
// backend loads at run time (cuBLAS, NCCL): LD_LIBRARY_PATH, the system
// directories, the pip layouts of every Python on PATH, then the bare sonames
// for the dynamic loader's own search.
package libfind

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SystemDirs are searched after LD_LIBRARY_PATH (besides what the
// dynamic loader finds by itself in ld.so.cache), for cuBLAS and NCCL.
var SystemDirs = []string{
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib64",
	"/usr/lib",
}

// Search is where a library of the CUDA stack (cuBLAS, NCCL) is looked for:
// the environment (for LD_LIBRARY_PATH, PATH and HOME), the system
// directories, and the directories pip's NVIDIA wheels install it in. A test
// points them at a fake directory tree.
type Search struct {
	Getenv     func(string) string
	SystemDirs []string
	// PipDirs are the directories under site-packages/nvidia that hold the
	// library (e.g. "cu13/lib", "cublas/lib").
	PipDirs []string
	// Sonames are the library's file names, newest version first.
	Sonames []string
}

// Dirs lists the directories searched, in order, without duplicates:
// LD_LIBRARY_PATH, the system directories, then the pip layouts of every
// Python on PATH and of the user's site-packages:
// <prefix>/lib/python3.*/{site,dist}-packages/nvidia/<PipDirs>.
// A Python's prefix is the parent of the directory that holds it, both as
// found on PATH (a virtual environment's bin/python is a symbolic link) and
// with links resolved.
func (s Search) Dirs() []string {
	var out []string
	add := func(d string) {
		if d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, d := range filepath.SplitList(s.Getenv("LD_LIBRARY_PATH")) {
		add(d)
	}
	for _, d := range s.SystemDirs {
		add(d)
	}
	var prefixes []string
	for _, bin := range filepath.SplitList(s.Getenv("PATH")) {
		if bin == "" {
			continue
		}
		pys, _ := filepath.Glob(filepath.Join(bin, "python*"))
		for _, py := range pys {
			base := filepath.Base(py)
			if strings.HasSuffix(base, "-config") {
				continue
			}
			prefixes = append(prefixes, filepath.Dir(bin))
			if real, err := filepath.EvalSymlinks(py); err == nil {
				prefixes = append(prefixes, filepath.Dir(filepath.Dir(real)))
			}
		}
	}
	if home := s.Getenv("HOME"); home != "" {
		prefixes = append(prefixes, filepath.Join(home, ".local"))
	}
	for _, p := range prefixes {
		for _, pkgs := range []string{"site-packages", "dist-packages"} {
			sites, _ := filepath.Glob(filepath.Join(p, "lib", "python3*", pkgs))
			slices.Sort(sites)
			for _, site := range sites {
				for _, d := range s.PipDirs {
					add(filepath.Join(site, "nvidia", filepath.FromSlash(d)))
				}
			}
		}
	}
	return out
}

// Candidates lists the library's files that exist, newest version first and,
// within a version, in the order of dirs. The bare sonames follow each
// version's files, so that the dynamic loader's own search (ld.so.cache)
// is tried too.
func (s Search) Candidates() []string {
	dirs := s.Dirs()
	var out []string
	for _, v := range s.Sonames {
		for _, d := range dirs {
			p := filepath.Join(d, v)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				out = append(out, p)
			}
		}
		out = append(out, v)
	}
	return out
}
