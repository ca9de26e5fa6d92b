package nccl

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A machine without NCCL is told where it was looked for; a library that loads but is not
// NCCL is refused, naming what it lacks.
func TestOpenErrors(t *testing.T) {
	s := Search()
	s.Getenv = func(string) string { return "" }
	s.SystemDirs = []string{t.TempDir()}
	s.Sonames = []string{"libnccl-absent.so.2"}
	if _, err := Open(s); err == nil || !strings.Contains(err.Error(), "libnccl.so.2 not found") || !strings.Contains(err.Error(), "nvidia/nccl/lib") {
		t.Errorf("no NCCL: %v", err)
	}
	s.Sonames = []string{"libm.so.6"} // loads (every glibc system has it), has no NCCL
	if _, err := Open(s); err == nil || !strings.Contains(err.Error(), "libm.so.6 lacks ncclGetVersion") {
		t.Errorf("libm as NCCL: %v", err)
	}
}

// The NCCL of pip's wheel (nvidia/nccl/lib of the Python in RLHOST_TORCH_PYTHON, found through
// PATH as on a user's machine): its version, and unique ids, which need no GPU.
func TestPipNCCL(t *testing.T) {
	py := os.Getenv("RLHOST_TORCH_PYTHON")
	if py == "" {
		t.Skip("set RLHOST_TORCH_PYTHON to a python whose site-packages has nvidia/nccl (torch's wheels bring it)")
	}
	s := Search()
	s.Getenv = func(k string) string {
		if k == "PATH" {
			return filepath.Dir(py)
		}
		return ""
	}
	s.SystemDirs = nil
	l, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(l.Path, filepath.Join("nvidia", "nccl", "lib")) && !strings.Contains(l.Path, filepath.Join("nvidia", "cu13", "lib")) {
		t.Errorf("loaded %s, not the pip layout's", l.Path)
	}
	major, minor, patch, err := l.Version()
	if err != nil || major != 2 || minor < 18 {
		t.Fatalf("version %d.%d.%d, %v: want 2.18 or later", major, minor, patch, err)
	}
	a, err := l.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != UniqueIDBytes || bytes.Equal(a, b) || bytes.Equal(a, make([]byte, UniqueIDBytes)) {
		t.Errorf("unique ids %x and %x: want two different 128-byte ids", a, b)
	}
	t.Logf("%s: NCCL %d.%d.%d", l.Path, major, minor, patch)
}
