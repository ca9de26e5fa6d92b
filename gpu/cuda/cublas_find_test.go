package cuda

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCublasSearch builds a fake machine: cuBLAS 12 on LD_LIBRARY_PATH,
// cuBLAS 11 in a system directory, cuBLAS 13 only in the pip layout
// (nvidia/cu13/lib) of a virtual environment whose bin/python is a link to a
// Python elsewhere, and a second cuBLAS 12 in the nvidia/cublas/lib layout of
// that other Python. The search must find every one of them, newest version
// first, and nothing that is not there.
func TestCublasSearch(t *testing.T) {
	root := t.TempDir()
	mk := func(parts ...string) string {
		p := filepath.Join(append([]string{root}, parts...)...)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ldLib := mk("opt", "cuda", "lib", "libcublas.so.12")
	sysLib := mk("usr", "lib", "libcublas.so.11")
	pyReal := mk("pyhome", "bin", "python3.12")
	mk("pyhome", "bin", "python3.12-config") // not a Python
	pipCublas := mk("pyhome", "lib", "python3.12", "site-packages", "nvidia", "cublas", "lib", "libcublas.so.12")
	venvBin := filepath.Join(root, "venv", "bin")
	if err := os.MkdirAll(venvBin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(pyReal, filepath.Join(venvBin, "python")); err != nil {
		t.Fatal(err)
	}
	pipCu13 := mk("venv", "lib", "python3.12", "site-packages", "nvidia", "cu13", "lib", "libcublas.so.13")
	mk("venv", "lib", "python3.12", "site-packages", "nvidia", "cu13", "lib", "libcublasLt.so.13")
	mk("home", ".local", "lib", "python3.11", "site-packages", "nvidia", "cublas", "lib", "libcublas.so.10") // too old: never listed

	env := map[string]string{
		"LD_LIBRARY_PATH": filepath.Join(root, "opt", "cuda", "lib") + ":" + filepath.Join(root, "missing"),
		"PATH":            filepath.Join(root, "nobin") + ":" + venvBin,
		"HOME":            filepath.Join(root, "home"),
	}
	s := defaultCublasSearch()
	s.Getenv, s.SystemDirs = func(k string) string { return env[k] }, []string{filepath.Join(root, "usr", "lib")}
	got := s.Candidates()
	want := []string{
		pipCu13, "libcublas.so.13",
		ldLib, pipCublas, "libcublas.so.12",
		sysLib, "libcublas.so.11",
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates:\n got  %q\n want %q", got, want)
	}

	// Without the venv on PATH, cuBLAS 13 is not found: only the bare
	// soname is left for the dynamic loader.
	env["PATH"] = filepath.Join(root, "nobin")
	got = s.Candidates()
	if slices.Contains(got, pipCu13) || got[0] != "libcublas.so.13" {
		t.Errorf("with no Python on PATH: candidates %q", got)
	}
}

// TestCublasSearchDefault: the real search lists the bare sonames at least,
// newest first, so that the loader's own search always runs.
func TestCublasSearchDefault(t *testing.T) {
	got := defaultCublasSearch().Candidates()
	var bare []string
	for _, c := range got {
		if filepath.Base(c) == c {
			bare = append(bare, c)
		}
	}
	if !slices.Equal(bare, cublasVersions) {
		t.Errorf("bare sonames %q, want %q", bare, cublasVersions)
	}
}
