package cuda

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// cublasVersions are the cuBLAS sonames tried, newest first: CUDA 13 (driver
// R580, often only in pip's nvidia/cu13/lib), 12, then 11 (Debian bookworm's
// toolkit). The v2 entry points the backend uses are the same in all three.
var cublasVersions = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}

// cublasSystemDirs are searched after LD_LIBRARY_PATH (besides what the
// dynamic loader finds by itself in ld.so.cache).
var cublasSystemDirs = []string{
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib64",
	"/usr/lib",
}

// cublasSearch is where cuBLAS is looked for: the environment (for
// LD_LIBRARY_PATH, PATH and HOME) and the system directories. A test points
// both at a fake directory tree.
type cublasSearch struct {
	getenv     func(string) string
	systemDirs []string
}

// dirs lists the directories searched, in order, without duplicates:
// LD_LIBRARY_PATH, the system directories, then the pip layouts of every
// Python on PATH and of the user's site-packages:
// <prefix>/lib/python3.*/{site,dist}-packages/nvidia/{cu13/lib,cublas/lib}.
// A Python's prefix is the parent of the directory that holds it, both as
// found on PATH (a virtual environment's bin/python is a symbolic link) and
// with links resolved.
func (s cublasSearch) dirs() []string {
	var out []string
	add := func(d string) {
		if d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, d := range filepath.SplitList(s.getenv("LD_LIBRARY_PATH")) {
		add(d)
	}
	for _, d := range s.systemDirs {
		add(d)
	}
	var prefixes []string
	for _, bin := range filepath.SplitList(s.getenv("PATH")) {
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
	if home := s.getenv("HOME"); home != "" {
		prefixes = append(prefixes, filepath.Join(home, ".local"))
	}
	for _, p := range prefixes {
		for _, pkgs := range []string{"site-packages", "dist-packages"} {
			sites, _ := filepath.Glob(filepath.Join(p, "lib", "python3*", pkgs))
			slices.Sort(sites)
			for _, site := range sites {
				add(filepath.Join(site, "nvidia", "cu13", "lib"))
				add(filepath.Join(site, "nvidia", "cublas", "lib"))
			}
		}
	}
	return out
}

// candidates lists the cuBLAS files that exist, newest version first and,
// within a version, in the order of dirs. The bare sonames follow each
// version's files, so that the dynamic loader's own search (ld.so.cache)
// is tried too.
func (s cublasSearch) candidates() []string {
	dirs := s.dirs()
	var out []string
	for _, v := range cublasVersions {
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

// defaultCublasSearch searches with this process's environment.
func defaultCublasSearch() cublasSearch {
	return cublasSearch{getenv: os.Getenv, systemDirs: cublasSystemDirs}
}
