// Package nccl loads NVIDIA's collective communication library, libnccl.so.2, at run time, as
// gpu/cuda loads cuBLAS: LD_LIBRARY_PATH, the system directories, the pip layouts
// (nvidia/nccl/lib, nvidia/cu13/lib) of every Python on PATH, then the dynamic loader's own
// search. Nothing links against it, so a build without NCCL runs everywhere and a machine
// without it is told where it was looked for. Open checks that the library has every entry
// point data-parallel training needs (docs/distributed.md); the version and the unique id
// work without a GPU, the communicators and collectives need one per rank.
package nccl

// #cgo LDFLAGS: -ldl
// #include <dlfcn.h>
// #include <stdlib.h>
// typedef int (*rl_nccl_version_fn)(int *);
// typedef int (*rl_nccl_uid_fn)(void *);
// typedef const char *(*rl_nccl_str_fn)(int);
// static int rl_nccl_version(void *f, int *v) { return ((rl_nccl_version_fn)f)(v); }
// static int rl_nccl_uid(void *f, void *id) { return ((rl_nccl_uid_fn)f)(id); }
// static const char *rl_nccl_str(void *f, int r) { return ((rl_nccl_str_fn)f)(r); }
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/internal/libfind"
)

// UniqueIDBytes is the size of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES).
const UniqueIDBytes = 128

// Symbols are the entry points Open requires: the version and id, the communicator's life
// (init, init with a config, abort, asynchronous errors, destroy), the collectives and their
// grouping.
var Symbols = []string{
	"ncclGetVersion", "ncclGetUniqueId", "ncclGetErrorString",
	"ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommAbort", "ncclCommGetAsyncError", "ncclCommDestroy",
	"ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast", "ncclGroupStart", "ncclGroupEnd",
}

// Lib is a loaded libnccl.
type Lib struct {
	Path string // the file (or soname) that loaded
	h    unsafe.Pointer
	sym  map[string]unsafe.Pointer
}

// Search is where Open looks: this process's environment.
func Search() libfind.Search {
	return libfind.Search{Getenv: os.Getenv, SystemDirs: libfind.SystemDirs, PipDirs: []string{"nccl/lib", "cu13/lib"},
		Sonames: []string{"libnccl.so.2"}}
}

// Open loads the first libnccl of s that loads and has every entry point of Symbols.
func Open(s libfind.Search) (*Lib, error) {
	var why []string
	for _, name := range s.Candidates() {
		cs := C.CString(name)
		h := C.dlopen(cs, C.RTLD_NOW|C.RTLD_LOCAL)
		C.free(unsafe.Pointer(cs))
		if h == nil {
			if strings.ContainsRune(name, '/') { // a file that exists but does not load: say why
				why = append(why, fmt.Sprintf("%s: %s", name, C.GoString(C.dlerror())))
			}
			continue
		}
		l := &Lib{Path: name, h: h, sym: map[string]unsafe.Pointer{}}
		var missing []string
		for _, sym := range Symbols {
			cs := C.CString(sym)
			f := C.dlsym(h, cs)
			C.free(unsafe.Pointer(cs))
			if f == nil {
				missing = append(missing, sym)
			}
			l.sym[sym] = f
		}
		if len(missing) > 0 {
			why = append(why, fmt.Sprintf("%s lacks %s", name, strings.Join(missing, ", ")))
			C.dlclose(h)
			continue
		}
		return l, nil
	}
	msg := "nccl: libnccl.so.2 not found (looked in LD_LIBRARY_PATH, " + strings.Join(libfind.SystemDirs, ", ") +
		", the nvidia/nccl/lib and nvidia/cu13/lib of every Python on PATH, and the loader's cache; `pip install nvidia-nccl-cu13` provides it)"
	if len(why) > 0 {
		msg += ": " + strings.Join(why, "; ")
	}
	return nil, fmt.Errorf("%s", msg)
}

// err turns an ncclResult_t into an error with NCCL's own words.
func (l *Lib) err(what string, r C.int) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("nccl: %s: %s (ncclResult %d)", what, C.GoString(C.rl_nccl_str(l.sym["ncclGetErrorString"], r)), int(r))
}

// Version is the library's version: major, minor, patch (ncclGetVersion's code, e.g. 23007 =
// 2.30.7).
func (l *Lib) Version() (major, minor, patch int, err error) {
	var v C.int
	if err := l.err("ncclGetVersion", C.rl_nccl_version(l.sym["ncclGetVersion"], &v)); err != nil {
		return 0, 0, 0, err
	}
	code := int(v)
	if code < 10000 { // before 2.9: major*1000 + minor*100 + patch
		return code / 1000, code % 1000 / 100, code % 100, nil
	}
	return code / 10000, code % 10000 / 100, code % 100, nil
}

// UniqueID makes a communicator's unique id (rank 0 makes it, every rank passes it to
// ncclCommInitRank; dist.Share hands it out). With NCCL_COMM_ID set NCCL derives it from
// that address on every rank.
func (l *Lib) UniqueID() ([]byte, error) {
	id := make([]byte, UniqueIDBytes)
	if err := l.err("ncclGetUniqueId", C.rl_nccl_uid(l.sym["ncclGetUniqueId"], unsafe.Pointer(&id[0]))); err != nil {
		return nil, err
	}
	return id, nil
}
