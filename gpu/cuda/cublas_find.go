package cuda

import (
	"os"

	"github.com/rlhost/rlhost/gpu/cuda/internal/libfind"
)

// cublasVersions are the cuBLAS sonames tried, newest first: CUDA 13 (driver
// R580, often only in pip's nvidia/cu13/lib), 12, then 11 (Debian bookworm's
// toolkit). The v2 entry points the backend uses are the same in all three.
var cublasVersions = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}

// defaultCublasSearch searches with this process's environment: LD_LIBRARY_PATH,
// libfind.SystemDirs, then pip's nvidia/cu13/lib and nvidia/cublas/lib of every
// Python on PATH (libfind.Search).
func defaultCublasSearch() libfind.Search {
	return libfind.Search{Getenv: os.Getenv, SystemDirs: libfind.SystemDirs, PipDirs: []string{"cu13/lib", "cublas/lib"},
		Sonames: cublasVersions}
}
