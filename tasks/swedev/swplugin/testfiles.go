package swplugin

import (
	"path"
	"sort"
	"strconv"
	"strings"
)

// IsTestPath reports whether a file of the repository belongs to its tests, whose changes in
// a model's patch do not count: a file test_patch touches, a file in a folder of one of
// those (tests/__init__.py beside tests/test_x.py), and by language: Go's *_test.go files and
// testdata folders; Python's test_*.py, *_test.py, conftest.py, and files under a folder named
// test or tests.
func IsTestPath(p string, spec Spec) bool {
	p = path.Clean(p)
	for _, tp := range testPatchPaths(spec.TestPatch) {
		if p == tp || path.Dir(tp) != "." && strings.HasPrefix(p, path.Dir(tp)+"/") {
			return true
		}
	}
	base := path.Base(p)
	parts := strings.Split(p, "/")
	switch spec.Language {
	case "go":
		if strings.HasSuffix(base, "_test.go") {
			return true
		}
		for _, d := range parts[:len(parts)-1] {
			if d == "testdata" {
				return true
			}
		}
	case "python":
		if strings.HasPrefix(base, "test_") && strings.HasSuffix(base, ".py") || strings.HasSuffix(base, "_test.py") || base == "conftest.py" {
			return true
		}
		for _, d := range parts[:len(parts)-1] {
			if d == "test" || d == "tests" {
				return true
			}
		}
	}
	return false
}

func testPatchPaths(patch string) []string {
	var out []string
	for _, s := range splitDiff(patch) {
		out = append(out, s.paths...)
	}
	return out
}

type diffSection struct {
	text  string
	paths []string // the paths it names: a/ and b/ of its header, ---, +++, rename and copy lines
}

// splitDiff cuts a unified diff into its files' sections (each from a "diff --git" line; text
// before the first one is a section of its own, with the ---/+++ paths it names).
func splitDiff(diff string) []diffSection {
	var out []diffSection
	var cur *diffSection
	lines := strings.SplitAfter(diff, "\n")
	plus := false // the section has its +++ line
	for i, l := range lines {
		// A new file: a "diff --git" line, or (in a diff without git headers) a ---/+++ pair
		// after the section's own.
		next := strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ ") && plus
		if strings.HasPrefix(l, "diff --git ") || cur == nil || next {
			out = append(out, diffSection{})
			cur = &out[len(out)-1]
			plus = false
		}
		if strings.HasPrefix(l, "+++ ") {
			plus = true
		}
		cur.text += l
		t := strings.TrimRight(l, "\r\n")
		switch {
		case strings.HasPrefix(t, "diff --git "):
			cur.paths = append(cur.paths, gitHeaderPaths(strings.TrimPrefix(t, "diff --git "))...)
		case strings.HasPrefix(t, "--- "), strings.HasPrefix(t, "+++ "):
			if p := diffPath(t[4:]); p != "" {
				cur.paths = append(cur.paths, p)
			}
		case strings.HasPrefix(t, "rename from "), strings.HasPrefix(t, "rename to "), strings.HasPrefix(t, "copy from "), strings.HasPrefix(t, "copy to "):
			_, rest, _ := strings.Cut(t, " ")
			_, rest, _ = strings.Cut(rest, " ")
			cur.paths = append(cur.paths, unquote(rest))
		}
	}
	return out
}

// diffPath reads the path of a ---/+++ line: a/x or b/x (quoted when odd), "" for /dev/null.
func diffPath(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = unquote(s)
	if s == "/dev/null" {
		return ""
	}
	if strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/") {
		return s[2:]
	}
	return s
}

func gitHeaderPaths(s string) []string {
	if strings.HasPrefix(s, `"`) {
		// "a/x y" "b/x y"
		if i := strings.Index(s[1:], `" `); i >= 0 {
			return []string{diffPath(s[:i+2]), diffPath(s[i+3:])}
		}
		return nil
	}
	// a/x b/x: the two halves are the same path when there is no rename.
	if n := len(s); n%2 == 1 && s[:n/2][2:] == s[n/2+1:][2:] {
		return []string{s[2 : n/2]}
	}
	if i := strings.Index(s, " b/"); i >= 0 {
		return []string{diffPath(s[:i]), diffPath(s[i+1:])}
	}
	return nil
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// WithoutTestChanges returns the patch without the sections of files IsTestPath names (kept)
// and those files' paths (dropped, sorted). Tests are the task's: a patch that edits them,
// adds a test hook beside them or rewrites a test helper gains nothing.
func WithoutTestChanges(patch string, spec Spec) (kept string, dropped []string) {
	var b strings.Builder
	seen := map[string]bool{}
	for _, s := range splitDiff(patch) {
		test := false
		for _, p := range s.paths {
			if IsTestPath(p, spec) {
				test = true
				if !seen[p] {
					seen[p] = true
					dropped = append(dropped, p)
				}
			}
		}
		if !test {
			b.WriteString(s.text)
		}
	}
	sort.Strings(dropped)
	return b.String(), dropped
}
