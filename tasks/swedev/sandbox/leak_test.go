package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// What an instance may see, written down here apart from the Manager's own list
// (ToolchainPaths), so that a view grown by mistake fails the test: a path reached from
// inside an instance must be one of these, under one, or a folder above one.
var leakAllowlist = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ld.so.cache", "/etc/ld.so.conf",
	"/etc/ld.so.conf.d", "/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/localtime",
	"/etc/python3", "/etc/python3.11", "/etc/python3.12", "/etc/python3.13",
	WorkDir, TmpDir, "/proc", "/dev"}

// leakWalker runs inside an instance. It reads the needles (one a line) from stdin, walks every
// path from / without following links (/proc: the links of each process and the mount
// points), reports each path outside the allowlist (OUTSIDE), each link whose target exists
// outside it (LINK), and, with grep over every readable file, each file holding a needle
// (NEEDLE). With "first" it stops at the first report. The needles never reach a file of the
// instance: grep reads them from a pipe.
const leakWalker = `
import json, os, re, stat, subprocess, sys
allow, first = json.loads(sys.argv[1]), sys.argv[2] == "first"
needles = sys.stdin.buffer.read()
def report(kind, p, extra=""):
    print(kind, p, extra, flush=True)
    if first:
        sys.exit(0)
def allowed(p):
    return any(p == a or p.startswith(a.rstrip("/") + "/") for a in allow)
def above(p):
    return p == "/" or any(a.startswith(p + "/") for a in allow)
def check_link(p):
    try:
        t = os.path.realpath(p)
    except OSError:
        return
    if os.path.lexists(t) and not allowed(t) and not above(t):
        report("LINK", p, t)
n = 0
for pid in [d for d in os.listdir("/proc") if d.isdigit()] + ["self", "thread-self"]:
    for name in ("root", "cwd", "exe"):
        check_link("/proc/%s/%s" % (pid, name))
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        fds = []
    for fd in fds:
        try:
            t = os.readlink("/proc/%s/fd/%s" % (pid, fd))
        except OSError:
            continue
        if t.startswith("/") and not allowed(t) and not above(t):
            report("LINK", "/proc/%s/fd/%s" % (pid, fd), t)
for line in open("/proc/self/mountinfo"):
    mp = line.split()[4]
    if not allowed(mp) and not above(mp):
        report("OUTSIDE", mp, "(mount point)")
roots = json.loads(sys.argv[3]) if len(sys.argv) > 3 else ["/" + d for d in sorted(os.listdir("/")) if d != "proc"]
# Folders outside the allowlist first, so that "first" finds a leak quickly; a link at the
# top (/bin -> usr/bin) is checked as a link and not walked twice.
roots.sort(key=lambda p: allowed(p))
for top in [r for r in roots if os.path.islink(r)]:
    check_link(top)
roots = [r for r in roots if not os.path.islink(r)]
for root in roots:
    for dirpath, dirs, files in os.walk(root, onerror=lambda e: None):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            n += 1
            if not allowed(p) and not above(p):
                report("OUTSIDE", p)
            if os.path.islink(p):
                check_link(p)
    if not allowed(root) and not above(root):
        report("OUTSIDE", root)
g = subprocess.Popen(["grep", "-rlaFs", "-D", "skip", "-f", "-", "--"] + roots, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
g.stdin.write(needles)
g.stdin.close()
for line in g.stdout:
    report("NEEDLE", line.decode(errors="replace").rstrip("\n"))
g.wait()
print("WALKED", n, "paths", flush=True)
`

// publicLines are lines of the starter dataset's patches that public code holds too (found
// by this test in the toolchain): they are no secret of the dataset.
var publicLines = map[string]bool{
	"return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)": true, // Python's calendar.isleap, datetime
	"if isinstance(x, (list, tuple)):":                              true, // lib2to3, cffi
	"func TestEncode(t *testing.T) {":                               true, // Go's encoding/* tests
}

// leakNeedles are strings no instance may read: every hidden test name, every line a
// test_patch or a reference patch adds or removes that is not in the visible snapshot (24
// characters or longer), every instance id of the starter dataset, and the canaries the
// test plants.
func leakNeedles(t *testing.T, canaries ...string) []string {
	t.Helper()
	set := map[string]bool{}
	for _, split := range []string{"train", "test"} {
		f, err := os.Open(filepath.Join("..", "dataset", split+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var rec struct {
				InstanceID string            `json:"instance_id"`
				F2P        []string          `json:"FAIL_TO_PASS"`
				Patch      string            `json:"patch"`
				TestPatch  string            `json:"test_patch"`
				Snapshot   map[string]string `json:"snapshot"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s.jsonl: %v", split, err)
			}
			set[rec.InstanceID] = true
			for _, n := range rec.F2P {
				if strings.Contains(n, ".") || len(n) >= 12 { // dotted Python ids; Go names long enough to be specific
					set[n] = true
				}
			}
			visible := strings.Join(mapValues(rec.Snapshot), "\n")
			for _, p := range []string{rec.Patch, rec.TestPatch} {
				for _, l := range strings.Split(p, "\n") {
					if !strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "---") {
						continue
					}
					l = strings.TrimSpace(l[1:])
					if len(l) >= 24 && !strings.Contains(visible, l) && !publicLines[l] {
						set[l] = true
					}
				}
			}
		}
		f.Close()
	}
	for _, c := range canaries {
		set[c] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// walkInstance runs leakWalker in a new instance of m and returns its reports.
func walkInstance(t *testing.T, m *Manager, needles []string, first bool, roots ...string) []string {
	t.Helper()
	allow := append([]string(nil), leakAllowlist...)
	if r := goRoot(); r != "" {
		allow = append(allow, r)
	}
	aj, _ := json.Marshal(allow)
	mode := "all"
	if first {
		mode = "first"
	}
	id := create(t, m, pyRepo)
	defer m.Delete(context.Background(), id)
	cmd := "python3 -I -c " + shellQuote(leakWalker) + " " + shellQuote(string(aj)) + " " + mode
	if len(roots) > 0 {
		rj, _ := json.Marshal(roots)
		cmd += " " + shellQuote(string(rj))
	}
	res, err := m.Exec(context.Background(), id, ExecRequest{
		Command: cmd,
		Stdin:   strings.Join(needles, "\n") + "\n",
		Limits:  Limits{Wall: 10 * time.Minute, CPU: 10 * time.Minute, Output: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	walked := false
	for _, l := range strings.Split(res.Stdout, "\n") {
		switch {
		case strings.HasPrefix(l, "WALKED "):
			walked = true
			t.Log(l)
		case l != "":
			reports = append(reports, l)
		}
	}
	if !walked && (!first || len(reports) == 0) {
		t.Fatalf("the walker did not finish: %+v", short(res))
	}
	return reports
}

var canaryFile string // the last canary file planted in the checkout

// plantCanaries writes a file of the checkout and a file of another instance, each holding
// a token of its own, and returns the tokens.
func plantCanaries(t *testing.T, m *Manager) []string {
	t.Helper()
	checkout := fmt.Sprintf("rlhost-leak-canary-checkout-%s", newID())
	p, err := filepath.Abs(fmt.Sprintf(".leak-canary-%s", newID()))
	canaryFile = p
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(checkout+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
	other := fmt.Sprintf("rlhost-leak-canary-instance-%s", newID())
	id := create(t, m, map[string]string{"secret.txt": other + "\n"})
	t.Cleanup(func() { m.Delete(context.Background(), id) })
	return []string{checkout, other}
}

// TestNoLeak walks, from inside an instance, every path and every readable file, in every
// isolation mode that runs here: nothing outside the allowlist, no hidden test, test patch
// or reference patch of the starter dataset, no file of the checkout and no file of another
// instance. The rlimit mode has no view: there the walk must find the leak and the Manager
// must call the mode weak. The old view (the host's file system bound read-only) is
// reproduced with ReadOnlyBinds and must be caught, so the test is known to fail when it
// should.
func TestNoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("reads every file an instance can see")
	}
	for _, mode := range []string{"bwrap", "ns", "rlimit"} {
		t.Run(mode, func(t *testing.T) {
			m, err := New(Config{Isolation: mode})
			if err != nil {
				t.Skipf("isolation %s does not work here: %v", mode, err)
			}
			defer m.Close()
			needles := leakNeedles(t, plantCanaries(t, m)...)
			if len(needles) < 100 {
				t.Fatalf("only %d needles: the dataset was not read", len(needles))
			}
			reports := walkInstance(t, m, needles, IsWeak(mode))
			if IsWeak(mode) {
				if len(reports) == 0 || !m.WeakIsolation() {
					t.Fatalf("rlimit mode: reports %q, WeakIsolation %v; want a leak found and the mode called weak", reports, m.WeakIsolation())
				}
				t.Logf("weak mode, as documented: %s", reports[0])
				return
			}
			for _, r := range reports {
				t.Errorf("leak: %s", r)
			}
		})
		if IsWeak(mode) {
			continue
		}
		t.Run(mode+"/old-view", func(t *testing.T) {
			var all []string
			ents, err := os.ReadDir("/")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if n := e.Name(); n != "proc" && n != "dev" && n != "tmp" && (e.IsDir() || e.Type()&os.ModeSymlink != 0) {
					all = append(all, "/"+n)
				}
			}
			m, err := New(Config{Isolation: mode, ReadOnlyBinds: all})
			if err != nil {
				t.Skipf("isolation %s does not work here: %v", mode, err)
			}
			defer m.Close()
			canaries := plantCanaries(t, m)
			needles := leakNeedles(t, canaries...)
			reports := walkInstance(t, m, needles, true)
			if len(reports) == 0 {
				t.Fatal("the host's file system was visible and the walk found nothing")
			}
			t.Logf("found, as it must: %s", reports[0])
			// The content check on its own: the checkout's dataset and the canary planted in
			// it are found when the checkout is readable.
			checkout, _ := filepath.Abs(filepath.Join("..", "..", ".."))
			found := map[string]bool{}
			for _, r := range walkInstance(t, m, needles, false, filepath.Join(checkout, "tasks", "swedev")) {
				if strings.HasPrefix(r, "NEEDLE ") {
					found[filepath.Base(strings.Fields(r)[1])] = true
				}
			}
			if !found["train.jsonl"] || !found["test.jsonl"] || !found[filepath.Base(canaryFile)] {
				t.Fatalf("readable files holding needles were not found: %v", found)
			}
		})
	}
}
