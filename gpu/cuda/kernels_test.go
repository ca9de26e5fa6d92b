package cuda

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	entryRe = regexp.MustCompile(`(?s)\.visible \.entry (\w+)\((.*?)\)`)
	paramRe = regexp.MustCompile(`\.param \.(\w+) \w+`)
)

// ptxEntries maps each kernel of a PTX file to the types of its parameters.
func ptxEntries(t *testing.T, path string) map[string][]string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range entryRe.FindAllStringSubmatch(string(src), -1) {
		var types []string
		for _, p := range paramRe.FindAllStringSubmatch(m[2], -1) {
			types = append(types, p[1])
		}
		out[m[1]] = types
	}
	return out
}

type launchSite struct {
	pos    string
	kernel string
	args   []string // ptr, i64 or f32: the slot helper of each argument
}

// launchSites finds every d.launch("name", grid, args...) call in the
// package's Go files (tagged ones included: they are parsed, not built).
func launchSites(t *testing.T) []launchSite {
	t.Helper()
	fset := token.NewFileSet()
	files, _ := os.ReadDir(".")
	var sites []launchSite
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "launch" || len(call.Args) < 2 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			s := launchSite{pos: fset.Position(call.Pos()).String(), kernel: name}
			for _, a := range call.Args[2:] {
				kind := "?"
				if c, ok := a.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok {
						kind = id.Name
					}
				}
				s.args = append(s.args, kind)
			}
			sites = append(sites, s)
			return true
		})
	}
	return sites
}

// TestLaunchArgumentsMatchPTX checks, without a GPU, that every kernel launch
// passes as many arguments as the PTX entry declares, each in the slot its
// type needs: ptr or i64 for .u64/.s64, f32 for .f32. A mismatch would read
// garbage on the device.
func TestLaunchArgumentsMatchPTX(t *testing.T) {
	sites := launchSites(t)
	if len(sites) < len(kernelNames) {
		t.Fatalf("found %d launch sites for %d kernels: the parser misses some", len(sites), len(kernelNames))
	}
	for _, ptx := range []string{"ptx/kernels_sm80.ptx", "ptx/kernels_sm90.ptx"} {
		entries := ptxEntries(t, ptx)
		for _, k := range kernelNames {
			if _, ok := entries[k]; !ok {
				t.Errorf("%s: no entry %s (kernelNames lists it)", ptx, k)
			}
		}
		for k := range entries {
			if !slices.Contains(kernelNames, k) {
				t.Errorf("%s: entry %s is missing from kernelNames", ptx, k)
			}
		}
		for _, s := range sites {
			types, ok := entries[s.kernel]
			if !ok {
				t.Errorf("%s: launch of %s, which %s lacks", s.pos, s.kernel, ptx)
				continue
			}
			if len(types) != len(s.args) {
				t.Errorf("%s: %s takes %d arguments (%v), the launch passes %d (%v)", s.pos, s.kernel, len(types), types, len(s.args), s.args)
				continue
			}
			for i, ty := range types {
				want := map[string][]string{"u64": {"ptr", "i64"}, "s64": {"i64"}, "f32": {"f32"}}[ty]
				if !slices.Contains(want, s.args[i]) {
					t.Errorf("%s: argument %d of %s is .%s in the PTX, passed through %s", s.pos, i, s.kernel, ty, s.args[i])
				}
			}
		}
	}
}

// TestPTXTargets checks each PTX file is built for its architecture.
func TestPTXTargets(t *testing.T) {
	for _, tc := range []struct{ path, target string }{
		{"ptx/kernels_sm80.ptx", ".target sm_80"}, {"ptx/kernels_sm90.ptx", ".target sm_90"},
	} {
		src, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), tc.target) {
			t.Errorf("%s is not built for %s", tc.path, tc.target)
		}
	}
}

// TestPTXMarkedGenerated: the committed PTX says on its first line that it
// is generated (Go's convention), so that tools and reviewers leave it to
// make cuda-ptx.
func TestPTXMarkedGenerated(t *testing.T) {
	gen := regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)
	for _, p := range []string{"ptx/kernels_sm80.ptx", "ptx/kernels_sm90.ptx"} {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(src), "\n")
		if !gen.MatchString(first) {
			t.Errorf("%s: first line %q is not a \"// Code generated ... DO NOT EDIT.\" line", p, first)
		}
	}
}
