// Package devcuda holds the CUDA kernels that are not the product's: the
// variants waiting for a GPU to time them against the default kernels, and
// the planted defects that prove the checks catch a broken kernel. As
// llm.c's dev/cuda beside its llmc/, none of it is compiled into the PTX
// that gpu/cuda embeds.
//
// Every one is a build (dev/cuda/*.edits): a kernel family, a file of
// gpu/cuda/kernels or a variant's own file (dev/cuda/*.cuh), with lines
// edited or none, registered as "kernel/name"; the emulator's tests launch
// it in the kernel's place, or, for a variant whose kernels take other
// arguments, launch it themselves.
//
// The kernel emulator (gpu/cuda/internal/emu, build tag cudaemu) runs them:
// Generate writes its dev_gen.h, which holds each build as a copy of its
// family, edited, in a namespace of its own. `make cuda-dev-gen` rewrites
// it; TestGeneratedCurrent fails while it is stale. The benchmarks that
// time a variant against its default on a GPU (dev/cuda/*.cu, nvcc, no Go)
// include the same files.
package devcuda

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Build is one build: Func of File with Edits applied, registered as Name.
type Build struct {
	Name  string // kernel/name: the kernel it stands in for, and its own name
	File  string // what it edits: a file of gpu/cuda/kernels or of dev/cuda, or a build before it
	Func  string // the __global__ function registered; the kernel of Name unless given
	About string // what it is
	Edits []Edit
	at    string // file:line of its header, for errors
}

// Kernel is the function it registers.
func (p Build) Kernel() string {
	if p.Func != "" {
		return p.Func
	}
	k, _, _ := strings.Cut(p.Name, "/")
	return k
}

// Edit replaces the first occurrence of From after the first occurrence of
// After (from the start of the text when After is empty) with To. From must
// occur there: an edit that no longer matches the kernel it edits is an
// error naming it, so a build follows its kernel or fails loudly.
type Edit struct {
	After, From, To string
	at              string
}

// ParseEdits reads a .edits file. Each build starts with a header line
//
//	== kernel/name file.cuh [function]: what it is
//
// (or "== kernel/name kernel/other ...", a build of an earlier build;
// function, the __global__ function registered, when it is not the kernel
// of the name), followed by edits (none: the file as it is, for a variant's
// own file): an optional "@ text" line (the edit applies after the
// first occurrence of text), lines "-" + a line of the family (what is
// replaced) and lines "+" + a line of the build (what replaces it).
// Lines starting with "#" and blank lines between edits are comments.
func ParseEdits(name string, src []byte) ([]Build, error) {
	var out []Build
	var cur *Edit
	flush := func() {
		if cur != nil {
			p := &out[len(out)-1]
			p.Edits = append(p.Edits, *cur)
			cur = nil
		}
	}
	for i, line := range strings.Split(string(src), "\n") {
		at := fmt.Sprintf("%s:%d", name, i+1)
		switch {
		case strings.HasPrefix(line, "== "):
			flush()
			head, about, ok := strings.Cut(line[3:], ": ")
			f := strings.Fields(head)
			if !ok || len(f) < 2 || len(f) > 3 || !strings.Contains(f[0], "/") {
				return nil, fmt.Errorf("%s: want \"== kernel/name file.cuh [function]: what it is\", got %q", at, line)
			}
			b := Build{Name: f[0], File: f[1], About: about, at: at}
			if len(f) == 3 {
				b.Func = f[2]
			}
			out = append(out, b)
		case len(out) == 0 && (line == "" || strings.HasPrefix(line, "#")):
		case len(out) == 0:
			return nil, fmt.Errorf("%s: a line before the first \"== \" header: %q", at, line)
		case strings.HasPrefix(line, "@ "):
			flush()
			cur = &Edit{After: line[2:], at: at}
		case strings.HasPrefix(line, "-"), strings.HasPrefix(line, "+"):
			if cur == nil || (line[0] == '-' && cur.To != "") {
				flush()
				cur = &Edit{at: at}
			}
			if line[0] == '-' {
				cur.From += line[1:] + "\n"
			} else {
				cur.To += line[1:] + "\n"
			}
		case line == "" || strings.HasPrefix(line, "#"):
			flush()
		default:
			return nil, fmt.Errorf("%s: want \"@ \", \"-\", \"+\", \"#\" or \"== \", got %q", at, line)
		}
	}
	flush()
	for _, p := range out {
		if len(p.Edits) == 0 && p.Func == "" {
			return nil, fmt.Errorf("%s: build %s has no edits (a file as it is names its function)", p.at, p.Name)
		}
		for _, e := range p.Edits {
			if e.From == "" {
				return nil, fmt.Errorf("%s: an edit of %s replaces nothing (no \"-\" line)", e.at, p.Name)
			}
		}
	}
	return out, nil
}

// Apply returns src with p's edits made, in order.
func (p Build) Apply(src string) (string, error) {
	for _, e := range p.Edits {
		start := 0
		if e.After != "" {
			i := strings.Index(src, e.After)
			if i < 0 {
				return "", fmt.Errorf("%s: %s: %q is not in %s", e.at, p.Name, e.After, p.File)
			}
			start = i + len(e.After)
		}
		i := strings.Index(src[start:], e.From)
		if i < 0 {
			return "", fmt.Errorf("%s: %s: the lines to replace are not in %s%s:\n%s", e.at, p.Name, p.File, afterText(e.After), e.From)
		}
		i += start
		src = src[:i] + e.To + src[i+len(e.From):]
	}
	return src, nil
}

func afterText(a string) string {
	if a == "" {
		return ""
	}
	return fmt.Sprintf(" after %q", a)
}

// GenHeader is the first line of the generated file.
const GenHeader = "// Code generated by `make cuda-dev-gen` (dev/cuda) from dev/cuda and gpu/cuda/kernels. DO NOT EDIT."

var ident = regexp.MustCompile(`[^A-Za-z0-9]+`)

// Generate returns the emulator's dev_gen.h: each build of dev's *.edits,
// whose families are dev's *.cuh and kernels' (gpu/cuda/kernels, the
// product's).
func Generate(dev, kernels fs.FS) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintln(&b, GenHeader)
	fmt.Fprintln(&b, "// The emulator's builds of dev/cuda (gpu/cuda/internal/emu/emu.cc includes it after")
	fmt.Fprintln(&b, "// gpu/cuda/kernels/kernels.cu): each build, a copy of its family with the build's")
	fmt.Fprintln(&b, "// edits, in a namespace of its own (internal linkage: only the registered kernel is")
	fmt.Fprintln(&b, "// compiled).")
	fmt.Fprintln(&b, "#pragma once")
	files, err := fs.Glob(dev, "*.edits")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var reg []string
	seen := map[string]string{}    // the builds' header lines, by name
	outputs := map[string]string{} // the builds made so far, by name
	for _, f := range files {
		src, err := fs.ReadFile(dev, f)
		if err != nil {
			return nil, err
		}
		builds, err := ParseEdits("dev/cuda/"+f, src)
		if err != nil {
			return nil, err
		}
		for _, p := range builds {
			if prev := seen[p.Name]; prev != "" {
				return nil, fmt.Errorf("%s: build %s is also at %s", p.at, p.Name, prev)
			}
			seen[p.Name] = p.at
			fam, ok := outputs[p.File]
			if !ok {
				fam, err = family(p, dev, kernels)
				if err != nil {
					return nil, err
				}
			}
			out, err := p.Apply(fam)
			if err != nil {
				return nil, err
			}
			if !strings.Contains(out, p.Kernel()+"(") {
				return nil, fmt.Errorf("%s: %s: %s has no kernel %s", p.at, p.Name, p.File, p.Kernel())
			}
			outputs[p.Name] = out
			ns := "rl_build_" + strings.Trim(ident.ReplaceAllString(p.Name, "_"), "_")
			fmt.Fprintf(&b, "\n// ---- %s: %s (%s)\nnamespace {\nnamespace %s {\n%s}  // namespace %s\n}  // namespace\n",
				p.Name, p.About, p.File, ns, strip(out), ns)
			reg = append(reg, fmt.Sprintf("rl_make(%q, %s::%s)", p.Name, ns, p.Kernel()))
		}
	}
	fmt.Fprintln(&b, "\n// RL_DEV_KERNELS: the builds, as entries of emu.cc's kernel table.")
	fmt.Fprint(&b, "#define RL_DEV_KERNELS")
	for _, r := range reg {
		fmt.Fprintf(&b, " \\\n    %s,", r)
	}
	fmt.Fprintln(&b)
	return b.Bytes(), nil
}

// family is the text p edits: a file of dev (a variant's own) or of kernels.
func family(p Build, dev, kernels fs.FS) (string, error) {
	for _, dir := range []fs.FS{dev, kernels} {
		if src, err := fs.ReadFile(dir, p.File); err == nil {
			return string(src), nil
		}
	}
	return "", fmt.Errorf("%s: %s: no kernel family %s in gpu/cuda/kernels or dev/cuda, nor a build of that name before it", p.at, p.Name, p.File)
}

// strip drops the lines a copied family must not repeat inside a
// namespace: #pragma once and its #include of another family (every
// family is included once, at file scope, before).
func strip(src string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "#pragma once" || strings.HasPrefix(t, "#include ") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// The paths the generator reads and writes, from the repository's root.
var (
	Root       = path.Join("dev", "cuda")
	KernelsDir = path.Join("gpu", "cuda", "kernels")
	GenPath    = path.Join("gpu", "cuda", "internal", "emu", "dev_gen.h")
)
