package devcuda

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// root is the repository's root, two folders up from this package.
var root = filepath.Join("..", "..")

// TestGeneratedCurrent: the emulator's dev_gen.h is what dev/cuda and
// gpu/cuda/kernels make now.
func TestGeneratedCurrent(t *testing.T) {
	want, err := Generate(os.DirFS(filepath.Join(root, Root)), os.DirFS(filepath.Join(root, KernelsDir)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, GenPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run make cuda-dev-gen and commit it", GenPath)
	}
}

// TestVariantFile: a variant's own file, registered as it is under the
// name of the kernel it stands in for.
func TestVariantFile(t *testing.T) {
	kernels := fstest.MapFS{"k.cuh": {Data: []byte("__global__ void k(float* x) {\n    x[0] = 1;\n}\n")}}
	dev := fstest.MapFS{
		"v.cuh":   {Data: []byte("#pragma once\n__global__ void k_fast(float* x) {\n    x[0] = 1;\n}\n")},
		"v.edits": {Data: []byte("== k/fast v.cuh k_fast: k, faster\n\n== k/fast_bug k/fast k_fast: k/fast, broken\n-    x[0] = 1;\n+    x[0] = 2;\n")},
	}
	out, err := Generate(dev, kernels)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, w := range []string{`rl_make("k/fast", rl_build_k_fast::k_fast),`, `rl_make("k/fast_bug", rl_build_k_fast_bug::k_fast),`, "x[0] = 2;"} {
		if !strings.Contains(s, w) {
			t.Errorf("generated file lacks %q:\n%s", w, s)
		}
	}
	if strings.Contains(s, "#pragma once\n__global__") {
		t.Errorf("a copied file keeps its #pragma once:\n%s", s)
	}
}

func TestEditsApply(t *testing.T) {
	kernels := fstest.MapFS{"k.cuh": {Data: []byte("__global__ void k(float* x) {\n    x[0] = 1;\n    x[1] = 1;\n}\n__global__ void j(float* x) {\n    x[1] = 1;\n}\n")}}
	dev := fstest.MapFS{"k.edits": {Data: []byte("# a comment\n== j/two k.cuh: j writes 2\n@ void j(\n-    x[1] = 1;\n+    x[1] = 2;\n")}}
	out, err := Generate(dev, kernels)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, w := range []string{"namespace rl_build_j_two {", "    x[0] = 1;\n    x[1] = 1;\n}\n__global__ void j(float* x) {\n    x[1] = 2;\n}", `rl_make("j/two", rl_build_j_two::j),`} {
		if !strings.Contains(s, w) {
			t.Errorf("generated file lacks %q:\n%s", w, s)
		}
	}
}

// TestEditsErrors: an edit that does not match its kernel, a build of an
// unknown family or kernel, and malformed files are errors that name the
// build's line.
func TestEditsErrors(t *testing.T) {
	kernels := fstest.MapFS{"k.cuh": {Data: []byte("__global__ void k(float* x) {\n    x[0] = 1;\n}\n")}}
	for _, c := range []struct{ edits, want string }{
		{"== k/a k.cuh: a\n-    x[0] = 3;\n+    x[0] = 2;\n", "a.edits:2: k/a: the lines to replace are not in k.cuh"},
		{"== k/a k.cuh: a\n@ void j(\n-    x[0] = 1;\n+    x[0] = 2;\n", `a.edits:2: k/a: "void j(" is not in k.cuh`},
		{"== k/a m.cuh: a\n-    x[0] = 1;\n", "a.edits:1: k/a: no kernel family m.cuh"},
		{"== z/a k.cuh: a\n-    x[0] = 1;\n", "a.edits:1: z/a: k.cuh has no kernel z"},
		{"== k/a k.cuh: a\n", "a.edits:1: build k/a has no edits"},
		{"== k/a k.cuh: a\n+    x[0] = 1;\n", "a.edits:2: an edit of k/a replaces nothing"},
		{"== k/a k.cuh\n", "a.edits:1: want"},
		{"== k/a k.cuh k j x: a\n", "a.edits:1: want"},
		{"== k/a k.cuh: a\n-    x[0] = 1;\n== k/a k.cuh: b\n-    x[0] = 1;\n", "a.edits:3: build k/a is also at dev/cuda/a.edits:1"},
		{"== k/a k.cuh: a\n x\n", `a.edits:2: want "@ "`},
	} {
		_, err := Generate(fstest.MapFS{"a.edits": {Data: []byte(c.edits)}}, kernels)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error with %q", c.edits, err, c.want)
		}
	}
}
