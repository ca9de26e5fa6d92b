// Command gorunner runs the hidden Go tests of a sandbox instance and reports how each ended
// through descriptor 3, never through its output. The sandbox builds it inside the instance
// from this source (embedded in package sandbox) and runs it in the working tree as
//
//	gorunner DIR TestA TestB/sub ...
//
// where DIR is the runner's own temporary folder (removed at the end). It:
//
//  1. takes descriptor 3 (the Manager's report pipe) for itself, close-on-exec, and makes its
//     process non-dumpable, so that no process it starts inherits the pipe or can open it
//     (or the runner's other descriptors) through /proc/PID/fd; it becomes a child
//     subreaper, so that every process a test binary leaves behind becomes its child;
//  2. lists the packages with test files (go list -e -json ./...) and finds in their test
//     files (go/parser; files the runner reads, not code it runs) which package defines
//     each hidden test: a top-level func TestX(*testing.T); a name with a subtest part
//     (TestX/sub) stands for its top-level test TestX;
//  3. writes into each such package a generated test file holding one test,
//     TestRlhostHiddenTests, that runs the package's hidden tests as subtests and, only after
//     all of them ran, writes {"results": {name: PASSED|FAILED}} to a descriptor of its own
//     (reportFD, a pipe the runner made for that binary, moved off its number and closed
//     there at start) with a nonce of the runner's, which a report must carry; builds every test binary (go test -c) before running any, then removes
//     the generated files; keeps each binary open and removes its file, so that no test can
//     replace another package's binary;
//  4. runs each binary in its package's folder with -test.run for that one test, its stdout
//     and stderr going to the output, and kills whatever it left running before the next;
//     reads its report; a package whose binary did not
//     report (it exited early, crashed, hung until the time limit) or whose exit status does
//     not agree with its report (0 exactly when every test passed) fails all its tests;
//  5. after each package, writes the results so far as one line of JSON, {"results": {test:
//     PASSED|FAILED}, "error": "..."}, to descriptor 3: the last complete line is the report.
//     A test passes when at least one package defines it and every package defining it
//     reported it passed.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// Passed and Failed are the outcomes of a test (sandbox.Passed, sandbox.Failed).
const (
	Passed = "PASSED"
	Failed = "FAILED"
)

// reportFD is the descriptor of a test binary's report pipe (the first of its ExtraFiles).
const reportFD = 3

// GenFile is the name of the generated test file and GenTest the test it holds.
const (
	GenFile = "rlhost_hidden_test.go"
	GenTest = "TestRlhostHiddenTests"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// maxPkgReport is the most read of one binary's report.
const maxPkgReport = 1 << 20

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gorunner DIR TEST...")
		os.Exit(2)
	}
	report := takeReport()
	dir, names := os.Args[1], os.Args[2:]
	defer os.RemoveAll(dir)
	r := &run{dir: dir, names: names, report: report, results: map[string]string{}}
	for _, n := range names {
		r.results[n] = Failed
	}
	r.write()
	if err := r.main(); err != nil {
		r.errs = append(r.errs, err.Error())
		r.write()
	}
	_ = report.Close()
}

// takeReport moves descriptor 3 to a close-on-exec one and keeps processes of the same uid
// (the code under test) from opening it through /proc.
func takeReport() *os.File {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	fd, err := syscall.Dup(3)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gorunner: no report descriptor:", err)
		os.Exit(2)
	}
	syscall.CloseOnExec(fd)
	_ = syscall.Close(3)
	return os.NewFile(uintptr(fd), "report")
}

type run struct {
	dir     string
	names   []string
	report  *os.File
	results map[string]string // hidden test name -> outcome so far
	errs    []string
}

// write sends the results so far to the report pipe, one line of JSON.
func (r *run) write() {
	b, _ := json.Marshal(struct {
		Results map[string]string `json:"results"`
		Error   string            `json:"error,omitempty"`
	}{r.results, strings.Join(r.errs, "; ")})
	_, _ = r.report.Write(append(b, '\n'))
}

// goPackage is what go list says of a package.
type goPackage struct {
	Dir          string
	ImportPath   string
	Name         string
	TestGoFiles  []string
	XTestGoFiles []string
	Error        *struct{ Err string }
}

// A pkgRun is one package to test: its generated file and binary.
type pkgRun struct {
	pkg    goPackage
	plan   Plan
	binary string
	exe    *os.File // the built binary, its file removed
}

func (r *run) main() error {
	tops := map[string][]string{} // top-level test -> hidden names it stands for
	for _, n := range r.names {
		top, _, _ := strings.Cut(n, "/")
		tops[top] = append(tops[top], n)
	}
	pkgs, err := listPackages()
	if err != nil {
		return err
	}
	var runs []*pkgRun
	defined := map[string]int{}  // top-level test -> packages defining it
	passedIn := map[string]int{} // top-level test -> packages that reported it passed
	for _, p := range pkgs {
		plan, err := PlanPackage(p.Dir, p.ImportPath, p.TestGoFiles, p.XTestGoFiles, tops)
		if err != nil {
			r.errs = append(r.errs, fmt.Sprintf("%s: %v", p.ImportPath, err))
			continue
		}
		if len(plan.Tests) == 0 {
			continue
		}
		for _, top := range plan.Tops() {
			defined[top]++
		}
		if plan.Nonce, err = newNonce(); err != nil {
			return err
		}
		runs = append(runs, &pkgRun{pkg: p, plan: plan, binary: filepath.Join(r.dir, fmt.Sprintf("%d.test", len(runs)))})
	}
	var missing []string
	for top := range tops {
		if defined[top] == 0 {
			missing = append(missing, top)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		r.errs = append(r.errs, "not defined in any package's test files: "+strings.Join(missing, ", "))
	}
	// Every binary is built before any runs, so that no test's code can change what another
	// package's build reads; the generated files are removed before the first run.
	for _, pr := range runs {
		gen := filepath.Join(pr.pkg.Dir, GenFile)
		if err := os.WriteFile(gen, []byte(pr.plan.Source()), 0o644); err != nil {
			r.errs = append(r.errs, fmt.Sprintf("%s: %v", pr.pkg.ImportPath, err))
			continue
		}
		cmd := exec.Command("go", "test", "-c", "-vet=off", "-o", pr.binary, pr.pkg.ImportPath)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			r.errs = append(r.errs, fmt.Sprintf("%s: build failed", pr.pkg.ImportPath))
		} else if pr.exe, err = openHigh(pr.binary); err != nil {
			r.errs = append(r.errs, fmt.Sprintf("%s: %v", pr.pkg.ImportPath, err))
		}
		_ = os.Remove(pr.binary)
		_ = os.Remove(gen)
	}
	for _, pr := range runs {
		var got map[string]string
		if pr.exe != nil {
			var err error
			if got, err = runBinary(pr); err != nil {
				r.errs = append(r.errs, fmt.Sprintf("%s: %v", pr.pkg.ImportPath, err))
			}
			killDescendants()
		}
		for _, top := range pr.plan.Tops() {
			if got[top] == Passed {
				passedIn[top]++
			}
		}
		for top, hidden := range tops {
			out := Failed
			if defined[top] > 0 && passedIn[top] == defined[top] {
				out = Passed
			}
			for _, n := range hidden {
				r.results[n] = out
			}
		}
		r.write()
	}
	return nil
}

// listPackages lists the packages of the working tree that have test files.
func listPackages() ([]goPackage, error) {
	cmd := exec.Command("go", "list", "-e", "-json=Dir,ImportPath,Name,TestGoFiles,XTestGoFiles,Error", "./...")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list failed: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list: %v", err)
		}
		if len(p.TestGoFiles)+len(p.XTestGoFiles) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, nil
}

// runBinary runs a package's test binary and returns its report, checked against its exit
// status.
func runBinary(pr *pkgRun) (map[string]string, error) {
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	// The binary runs from the runner's open descriptor (close-on-exec, resolved by execve
	// before it closes), its file gone.
	cmd := exec.Command(fmt.Sprintf("/proc/self/fd/%d", pr.exe.Fd()), "-test.run=^"+GenTest+"$", "-test.v", "-test.count=1", "-test.paniconexit0")
	cmd.Dir = pr.pkg.Dir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = make([]*os.File, reportFD-2)
	cmd.ExtraFiles[reportFD-3] = wr
	if err := cmd.Start(); err != nil {
		wr.Close()
		return nil, err
	}
	wr.Close()
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(rd, maxPkgReport))
		read <- b
	}()
	werr := cmd.Wait()
	var rep []byte
	select {
	case rep = <-read:
	case <-time.After(2 * time.Second): // a process the binary left holds the pipe
		_ = rd.SetReadDeadline(time.Now())
		rep = <-read
	}
	status := 0
	if werr != nil {
		status = -1
		if ee, ok := werr.(*exec.ExitError); ok {
			status = ee.ExitCode()
		}
	}
	return CheckReport(rep, status, pr.plan.Nonce, pr.plan.Tops())
}

// newNonce returns 128 random bits in hex.
func newNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// openHigh opens a file read-only at a descriptor above those a child is given (stdio and
// reportFD), so that /proc/self/fd/N names it in the child too.
func openHigh(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_DUPFD_CLOEXEC, 64)
	if errno != 0 {
		return nil, errno
	}
	return os.NewFile(fd, path), nil
}

// killDescendants kills the processes a test binary left (the runner is their subreaper, so
// they are its children) and reaps them, until none is left or 10 s passed.
func killDescendants() {
	self := os.Getpid()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		kids := childrenOf(self)
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		if len(kids) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childrenOf lists the processes whose parent is pid (from /proc/PID/stat).
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		var state string
		var child, ppid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &child); err != nil {
			continue
		}
		if _, err := fmt.Sscanf(string(b[i+1:]), " %s %d", &state, &ppid); err == nil && ppid == pid && child != pid {
			out = append(out, child)
		}
	}
	return out
}

// CheckReport reads a test binary's report (one JSON object, {"nonce": the plan's nonce,
// "results": {top-level test: outcome}}) and checks it against the binary's exit status: the
// testing package exits 0 when every test passed and 1 when one failed. A report that is
// missing, unreadable, lacks the nonce or a test, or disagrees with the status (an exit
// status other than 0 or 1, a failure with status 0, status 1 with every test passed) is no
// report: every test fails. The status rule makes a pass count only when the binary, having
// run to its end, agrees: what fails after the report (a test's goroutine panicking, a
// TestMain's teardown, a leak check) fails the package, as go test would say FAIL.
func CheckReport(rep []byte, status int, nonce string, tops []string) (map[string]string, error) {
	var got struct {
		Nonce   string
		Results map[string]string
	}
	if len(bytes.TrimSpace(rep)) == 0 {
		return nil, fmt.Errorf("the test binary did not report (exit status %d: it crashed, exited early or was killed)", status)
	}
	if err := json.Unmarshal(rep, &got); err != nil || got.Results == nil || got.Nonce != nonce {
		return nil, fmt.Errorf("the test binary's report is unreadable or not the runner's (exit status %d)", status)
	}
	all := true
	for _, t := range tops {
		switch got.Results[t] {
		case Passed:
		case Failed:
			all = false
		default:
			return nil, fmt.Errorf("the test binary's report lacks %s (exit status %d)", t, status)
		}
	}
	if status == 0 && !all || status == 1 && all || status != 0 && status != 1 {
		return nil, fmt.Errorf("the test binary exited with status %d after reporting %s: its report does not count", status, map[bool]string{true: "every test passed", false: "a failed test"}[all])
	}
	return got.Results, nil
}

// A Plan is the generated test of one package.
type Plan struct {
	Package    string    // the package clause of the generated file
	ImportPath string    // the package under test, imported when the generated file is external
	External   bool      // the generated file is of the _test package
	Nonce      string    // written in the report by the generated test, checked by the runner
	Tests      []planned // the tests it runs, in order
}

type planned struct {
	Name     string // top-level test name
	Internal bool   // defined in the package's own test files (not its _test package)
}

// Tops returns the distinct top-level tests of the plan.
func (p Plan) Tops() []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range p.Tests {
		if !seen[t.Name] {
			seen[t.Name] = true
			out = append(out, t.Name)
		}
	}
	return out
}

// PlanPackage finds which of the wanted top-level tests the package's test files define
// (internal: testFiles, external: xtestFiles, names relative to dir) and where the
// generated test goes: among the internal test files when every test found is internal,
// else in the external package, which imports the package under test for its internal
// tests (the test build of a package includes its internal test files).
func PlanPackage(dir, importPath string, testFiles, xtestFiles []string, wanted map[string][]string) (Plan, error) {
	var plan Plan
	var inPkg, exPkg string
	external := false
	for _, group := range []struct {
		files    []string
		internal bool
	}{{testFiles, true}, {xtestFiles, false}} {
		for _, f := range group.files {
			name, tests, err := TestFuncs(filepath.Join(dir, f))
			if err != nil {
				return Plan{}, err
			}
			if group.internal {
				inPkg = name
			} else {
				exPkg = name
			}
			for _, t := range tests {
				if _, ok := wanted[t]; ok {
					plan.Tests = append(plan.Tests, planned{Name: t, Internal: group.internal})
					external = external || !group.internal
				}
			}
		}
	}
	sort.SliceStable(plan.Tests, func(i, j int) bool { return plan.Tests[i].Name < plan.Tests[j].Name })
	switch {
	case !external:
		plan.Package = inPkg
	case exPkg != "":
		plan.Package = exPkg
	}
	plan.ImportPath, plan.External = importPath, external
	return plan, nil
}

// TestFuncs parses a test file and returns its package clause and its test functions:
// top-level functions named Test or TestX (X not a lower-case letter, as the go command
// reads them) of one parameter *testing.T, TestMain excepted.
func TestFuncs(path string) (string, []string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return "", nil, err
	}
	testing := ""
	for _, im := range f.Imports {
		if im.Path.Value == `"testing"` {
			testing = "testing"
			if im.Name != nil {
				testing = im.Name.Name
			}
		}
	}
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Type.TypeParams != nil || !isTestName(fn.Name.Name) || fn.Name.Name == "TestMain" {
			continue
		}
		if ps := fn.Type.Params.List; len(ps) == 1 && len(ps[0].Names) <= 1 && isTestingT(ps[0].Type, testing) && fn.Type.Results == nil {
			out = append(out, fn.Name.Name)
		}
	}
	return f.Name.Name, out, nil
}

func isTestName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Test")
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return !unicode.IsLower(r)
}

// isTestingT reports whether e is *testing.T (testing being the file's name for the package;
// "." for a dot import).
func isTestingT(e ast.Expr, testing string) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	switch x := star.X.(type) {
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && id.Name == testing && x.Sel.Name == "T"
	case *ast.Ident:
		return testing == "." && x.Name == "T"
	}
	return false
}

// Source returns the generated test file. Its identifiers all start with rlhost (imports
// renamed too) so as not to meet the package's own. The report descriptor is taken while the
// package's variables are initialised: moved to a close-on-exec descriptor and closed at
// reportFD, so that a process the tests start does not inherit it and a write to reportFD
// after that goes nowhere. A panic in a test's own goroutine fails that test (recovered);
// one elsewhere, like os.Exit or a fatal error, ends the binary before it reports.
func (p Plan) Source() string {
	var b strings.Builder
	b.WriteString("// Code generated by the rlhost Go test runner for one run; removed after the build.\n\n")
	fmt.Fprintf(&b, "package %s\n\nimport (\n\trlhostjson \"encoding/json\"\n\trlhostos \"os\"\n\trlhostdebug \"runtime/debug\"\n\trlhostsyscall \"syscall\"\n\trlhosttesting \"testing\"\n", p.Package)
	imported := false
	for _, t := range p.Tests {
		if t.Internal && p.External {
			imported = true
		}
	}
	if imported {
		fmt.Fprintf(&b, "\n\trlhostpkg %q\n", p.ImportPath)
	}
	b.WriteString(")\n\n")
	fmt.Fprintf(&b, `var rlhostReport = rlhostTakeReport()

func rlhostTakeReport() *rlhostos.File {
	fd, err := rlhostsyscall.Dup(%d)
	if err != nil {
		return nil
	}
	rlhostsyscall.CloseOnExec(fd)
	_ = rlhostsyscall.Close(%d)
	return rlhostos.NewFile(uintptr(fd), "rlhost-report")
}

const rlhostNonce = %q

func %s(t *rlhosttesting.T) {
	tests := []struct {
		name string
		f    func(*rlhosttesting.T)
	}{
`, reportFD, reportFD, p.Nonce, GenTest)
	for _, t := range p.Tests {
		ref := t.Name
		if t.Internal && p.External {
			ref = "rlhostpkg." + t.Name
		}
		fmt.Fprintf(&b, "\t\t{%q, %s},\n", t.Name, ref)
	}
	b.WriteString(`	}
	ran := make([]*rlhosttesting.T, len(tests))
	// The group returns when every test in it ended, parallel ones included.
	t.Run("hidden", func(t *rlhosttesting.T) {
		for i, c := range tests {
			i, c := i, c
			t.Run(c.name, func(t *rlhosttesting.T) {
				ran[i] = t
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("panic: %v\n%s", r, rlhostdebug.Stack())
					}
				}()
				c.f(t)
			})
		}
	})
	results := map[string]string{}
	for i, c := range tests {
		if ran[i] == nil || ran[i].Failed() || ran[i].Skipped() {
			results[c.name] = "FAILED"
		} else if results[c.name] == "" {
			results[c.name] = "PASSED"
		}
	}
	b, err := rlhostjson.Marshal(map[string]any{"nonce": rlhostNonce, "results": results})
	if err != nil || rlhostReport == nil {
		t.Fatalf("no report: %v", err)
	}
	if _, err := rlhostReport.Write(b); err != nil {
		t.Fatalf("report: %v", err)
	}
	_ = rlhostReport.Close()
}
`)
	return b.String()
}
