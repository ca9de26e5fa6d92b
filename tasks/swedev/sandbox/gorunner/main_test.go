package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCheckReport(t *testing.T) {
	tops := []string{"TestA", "TestB"}
	const nonce = "n1"
	pass := `{"nonce":"n1","results":{"TestA":"PASSED","TestB":"PASSED"}}`
	mixed := `{"nonce":"n1","results":{"TestA":"PASSED","TestB":"FAILED"}}`
	for _, c := range []struct {
		name   string
		rep    string
		status int
		want   map[string]string
		err    string
	}{
		{"all passed, status 0", pass, 0, map[string]string{"TestA": Passed, "TestB": Passed}, ""},
		{"one failed, status 1", mixed, 1, map[string]string{"TestA": Passed, "TestB": Failed}, ""},
		{"no report", "", 0, nil, "did not report (exit status 0"},
		{"no report, killed", "", -1, nil, "did not report (exit status -1"},
		{"all passed, status 1", pass, 1, nil, "status 1 after reporting every test passed"},
		{"one failed, status 0", mixed, 0, nil, "status 0 after reporting a failed test"},
		{"all passed, status 2", pass, 2, nil, "status 2 after reporting every test passed"},
		{"no nonce", `{"results":{"TestA":"PASSED","TestB":"PASSED"}}`, 0, nil, "not the runner's"},
		{"another nonce", `{"nonce":"n2","results":{"TestA":"PASSED","TestB":"PASSED"}}`, 0, nil, "not the runner's"},
		{"a test missing", `{"nonce":"n1","results":{"TestA":"PASSED"}}`, 0, nil, "lacks TestB"},
		{"an odd outcome", `{"nonce":"n1","results":{"TestA":"PASSED","TestB":"SKIPPED"}}`, 0, nil, "lacks TestB"},
		{"two reports", pass + pass, 0, nil, "unreadable"},
		{"cut short", pass[:20], 0, nil, "unreadable"},
	} {
		got, err := CheckReport([]byte(c.rep), c.status, nonce, tops)
		if c.err == "" && (err != nil || !reflect.DeepEqual(got, c.want)) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || got != nil) {
			t.Errorf("%s: %v, %v; want %v, error with %q", c.name, got, err, c.want, c.err)
		}
	}
}

func TestTestFuncs(t *testing.T) {
	src := "package p\n\nimport (\n\ttt \"testing\"\n)\n\n" +
		"func TestA(t *tt.T)            {}\n" +
		"func Test(t *tt.T)             {}\n" +
		"func Test_x(t *tt.T)           {}\n" +
		"func Testlower(t *tt.T)        {}\n" + // not a test: lower case after Test
		"func TestMain(m *tt.M)         {}\n" +
		"func TestB(b *tt.B)            {}\n" + // a benchmark's signature
		"func TestC(t *tt.T) error      { return nil }\n" +
		"func TestD(t *tt.T, x int)     {}\n" +
		"func TestE[X any](t *tt.T)     {}\n" +
		"type S struct{}\n\nfunc (S) TestF(t *tt.T) {}\n" +
		"var s = `\nfunc TestG(t *tt.T) {}\n`\n" + // a raw string, not a declaration
		"func helper(t *tt.T)           {}\n"
	path := filepath.Join(t.TempDir(), "p_test.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg, got, err := TestFuncs(path)
	if err != nil || pkg != "p" || !reflect.DeepEqual(got, []string{"TestA", "Test", "Test_x"}) {
		t.Fatalf("%q %v %v", pkg, got, err)
	}
	dot := filepath.Join(t.TempDir(), "q_test.go")
	if err := os.WriteFile(dot, []byte("package q_test\n\nimport . \"testing\"\n\nfunc TestQ(t *T) {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pkg, got, err := TestFuncs(dot); err != nil || pkg != "q_test" || !reflect.DeepEqual(got, []string{"TestQ"}) {
		t.Fatalf("dot import: %q %v %v", pkg, got, err)
	}
	if _, _, err := TestFuncs(filepath.Join(t.TempDir(), "none_test.go")); err == nil {
		t.Fatal("a missing file parsed")
	}
}

// The generated test goes among the internal test files unless a wanted test is external;
// then internal tests are reached through the package's import.
func TestPlanPackage(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"in_test.go": "package p\n\nimport \"testing\"\n\nfunc TestIn(t *testing.T) {}\nfunc TestBoth(t *testing.T) {}\n",
		"ex_test.go": "package p_test\n\nimport \"testing\"\n\nfunc TestEx(t *testing.T) {}\nfunc TestBoth(t *testing.T) {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := []string{"in_test.go"}
	ex := []string{"ex_test.go"}
	for _, c := range []struct {
		wanted   []string
		pkg      string
		external bool
		tests    []planned
	}{
		{[]string{"TestIn"}, "p", false, []planned{{"TestIn", true}}},
		{[]string{"TestEx"}, "p_test", true, []planned{{"TestEx", false}}},
		{[]string{"TestIn", "TestEx"}, "p_test", true, []planned{{"TestEx", false}, {"TestIn", true}}},
		{[]string{"TestBoth"}, "p_test", true, []planned{{"TestBoth", true}, {"TestBoth", false}}},
		{[]string{"TestNone"}, "p", false, nil},
	} {
		w := map[string][]string{}
		for _, n := range c.wanted {
			w[n] = []string{n}
		}
		plan, err := PlanPackage(dir, "example.com/p", in, ex, w)
		if err != nil || plan.Package != c.pkg || plan.External != c.external || !reflect.DeepEqual(plan.Tests, c.tests) {
			t.Errorf("%v: %+v %v", c.wanted, plan, err)
			continue
		}
		wantImport := false
		for _, pt := range c.tests {
			wantImport = wantImport || c.external && pt.Internal
		}
		src := plan.Source()
		if imp := strings.Contains(src, `rlhostpkg "example.com/p"`); imp != wantImport {
			t.Errorf("%v: import of the package %v:\n%s", c.wanted, imp, src)
		}
	}
}
