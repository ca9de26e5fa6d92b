// Package sandbox runs the instances of the swedev task: each instance is a working tree made
// from a repository snapshot (committed as its base state), in which commands run isolated
// from the host and from the other instances, with wall-clock, CPU, memory, process,
// file-size, disk and output limits and no network. Manager is the library; Server serves it
// over HTTP (command rlhost-sandbox) and Client talks to a Server with the same methods.
//
// Isolation, strongest available first (Manager.Isolation says which is active):
//
//   - "bwrap": Debian's bubblewrap with user, pid, net, ipc, uts and mount namespaces and an
//     allowlist view (view.go): the working tree at /testbed, the instance's own /tmp, the
//     toolchain folders read-only, nothing else of the host;
//   - "ns": (root without bubblewrap) the same view and new pid, net, ipc and uts namespaces,
//     built by a root shell script (mount, pivot_root) that then drops to the instance's uid;
//   - "rlimit": a separate working tree and rlimits only (not root, no namespaces); the host's
//     files are visible, so the mode is weak (Manager.WeakIsolation).
//
// The hidden tests report through descriptor 3, a pipe apart from the output (RunTests); the
// Go build cache is shared read-only, with an overlay of its own per instance (gocache.go).
//
// In every mode each command runs under rlimits (CPU seconds, address space, processes,
// file size), is killed with all its descendants at the wall-clock limit, and its output is
// capped. See docs/swedev.md for what each mode does not protect against.
package sandbox
