package task

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// The package's exported names (top-level names, methods of exported types and of exported
// interfaces) are the ones
// listed in testdata/exported.txt: what a plugin author needs. A name the host alone uses
// belongs in the host (or, shared, in a package of its own such as sdk/suggest); adding a name
// here is a change of the SDK's API, made on purpose by updating the list.
func TestExportedNames(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range pkgs["task"].Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					got = append(got, d.Name.Name)
					continue
				}
				rt := d.Recv.List[0].Type
				if s, ok := rt.(*ast.StarExpr); ok {
					rt = s.X
				}
				if id, ok := rt.(*ast.Ident); ok && id.IsExported() {
					got = append(got, id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						got = append(got, s.Name.Name)
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									got = append(got, s.Name.Name+"."+n.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								got = append(got, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(got)
	b, err := os.ReadFile("testdata/exported.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(b))
	for _, n := range got {
		if !slices.Contains(want, n) {
			t.Errorf("%s is exported but not in testdata/exported.txt", n)
		}
	}
	for _, n := range want {
		if !slices.Contains(got, n) {
			t.Errorf("testdata/exported.txt lists %s, which the package does not export", n)
		}
	}
}
