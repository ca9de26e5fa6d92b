package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/host/metrics"
	hostplugin "github.com/rlhost/rlhost/host/plugin"
	"golang.org/x/mod/modfile"
)

func repoSDK(t *testing.T) string {
	t.Helper()
	sdk, err := filepath.Abs(filepath.Join("..", "..", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	return sdk
}

func TestNewTaskProjectFiles(t *testing.T) {
	sdk := repoSDK(t)
	cases := []struct {
		lang string
		want []string
	}{
		{"go", []string{"go.mod", "go.sum", "main.go", "main_test.go", "README.md", ".gitignore", "train.yaml", "data/train.jsonl", "data/test.jsonl"}},
		{"python", []string{"bin/plugins/rlhost-task-my-task", "my_task_task.py", "test_my_task_task.py", "requirements.txt", "README.md", ".gitignore", "train.yaml", "data/train.jsonl", "data/test.jsonl"}},
	}
	for _, c := range cases {
		t.Run(c.lang, func(t *testing.T) {
			files, err := NewTaskProject("my-task", c.lang, sdk)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]ProjectFile{}
			for _, f := range files {
				got[f.Path] = f
			}
			for _, p := range c.want {
				if _, ok := got[p]; !ok {
					t.Errorf("no %s among %d files", p, len(files))
				}
			}
			if len(got) != len(c.want) {
				t.Errorf("%d files, want %d", len(got), len(c.want))
			}
			if c.lang == "python" && got["bin/plugins/rlhost-task-my-task"].Mode&0o111 == 0 {
				t.Error("the launcher is not executable")
			}
			// the SDK from the wheel make builds (never from sdk/python itself: pip would build in place there)
			wheel := filepath.Join(filepath.Dir(sdk), "bin", "python", "rlhost-0.1.0-py3-none-any.whl")
			if req := string(got["requirements.txt"].Data); c.lang == "python" && !strings.Contains(req, "\nrlhost @ file://"+wheel+"\n") {
				t.Errorf("requirements.txt does not install %s:\n%s", wheel, req)
			}
			if c.lang != "go" {
				return
			}
			mf, err := modfile.Parse("go.mod", got["go.mod"].Data, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(mf.Replace) != 1 || mf.Replace[0].Old.Path != sdkModule || mf.Replace[0].New.Path != sdk {
				t.Errorf("go.mod replace: %+v; want %s => %s", mf.Replace, sdkModule, sdk)
			}
			sdkText, _ := os.ReadFile(filepath.Join(sdk, "go.mod"))
			sdkMod, _ := modfile.Parse("sdk/go.mod", sdkText, nil)
			req := map[string]string{}
			for _, r := range mf.Require {
				req[r.Mod.Path] = r.Mod.Version
			}
			for _, r := range sdkMod.Require {
				if req[r.Mod.Path] != r.Mod.Version {
					t.Errorf("go.mod requires %s %q; the SDK requires %s", r.Mod.Path, req[r.Mod.Path], r.Mod.Version)
				}
			}
		})
	}
	bad := []struct{ name, lang, want string }{
		{"My_Task", "go", "lower-case letters"},
		{"9lives", "go", "starting with a letter"},
		{"a--b", "go", "single dashes"},
		{"ok", "rust", `--lang "rust": want go or python`},
	}
	for _, b := range bad {
		if _, err := NewTaskProject(b.name, b.lang, sdk); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("NewTaskProject(%q, %q): %v; want an error mentioning %q", b.name, b.lang, err, b.want)
		}
	}
	// Without --sdk: the sdk folder of the current folder's ancestors (the test runs in cmd/rlhost;
	// the test binary itself lives in a temporary folder).
	if got, err := findSDK(""); err != nil || got != sdk {
		t.Errorf("findSDK(\"\") from cmd/rlhost = %q, %v; want %s", got, err, sdk)
	}
	if _, err := findSDK(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not the rlhost Go SDK") {
		t.Errorf("findSDK of an empty folder: %v", err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "keep"), "x")
	if _, _, err := run(t, "new", "task", "x", "--dir", dir, "--sdk", sdk); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("new task into a non-empty folder: %v", err)
	}
}

// TestNewTaskEndToEnd is a plugin author's first hour: `rlhost new task` into a folder outside
// the source tree, then, unchanged, the project's own tests, a build (Go) that may not edit
// go.mod (-mod=readonly), `rlhost conformance NAME`, `rlhost preprocess` of its tiny dataset and one training step
// with `rlhost train --task NAME -c train.yaml`.
func TestNewTaskEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two plugin projects and trains one step with each")
	}
	model := repoModel(t)
	sdk := repoSDK(t)
	for _, lang := range []string{"go", "python"} {
		t.Run(lang, func(t *testing.T) {
			name := "first-" + lang
			dir := filepath.Join(t.TempDir(), "proj")
			if _, _, err := run(t, "new", "task", name, "--lang", lang, "--dir", dir, "--sdk", sdk); err != nil {
				t.Fatal(err)
			}
			shell := func(env []string, prog string, args ...string) {
				t.Helper()
				cmd := exec.Command(prog, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), env...)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
				}
			}
			switch lang {
			case "go":
				// As written: no go.mod or go.sum edits (modules missing from the cache may be
				// downloaded: a clean cache need not hold the SDK's exact versions).
				env := []string{"GOFLAGS=-mod=readonly", "GOWORK=off"}
				shell(env, "go", "vet", "./...")
				shell(env, "go", "test", "-count=1", "./...")
				shell(env, "go", "build", "-o", "bin/plugins/rlhost-task-"+name, ".")
			case "python":
				py := os.Getenv("RLHOST_PYTHON")
				if py == "" {
					home, _ := os.UserHomeDir()
					py = filepath.Join(home, ".cache", "rlhost", "python-venv", "bin", "python")
				}
				if err := exec.Command(py, "-c", "import rlhost, pytest").Run(); err != nil {
					if os.Getenv("CI") != "" {
						t.Fatalf("no Python with the rlhost SDK at %s: run make setup-python", py)
					}
					t.Skipf("no Python with the rlhost SDK at %s: run make setup-python", py)
				}
				t.Setenv("RLHOST_PYTHON", py)
				shell(nil, py, "-m", "pytest", "-q", "-p", "no:cacheprovider")
			}
			t.Chdir(dir)
			if out, _, err := run(t, "conformance", name); err != nil {
				t.Fatalf("rlhost conformance %s: %v\n%s", name, err, out)
			}
			if _, stderr, err := run(t, "preprocess", "--task", name, "--input", "data", "--output-dir", "data/"+name); err != nil {
				t.Fatalf("rlhost preprocess: %v\n%s", err, stderr)
			}
			if _, stderr, err := run(t, "train", "--task", name, "-c", "train.yaml", "actor_rollout_ref.model.path="+model); err != nil {
				t.Fatalf("rlhost train: %v\n%s", err, stderr)
			}
			steps, err := metrics.ReadJSONL(filepath.Join("runs", name, "metrics.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if len(steps) == 0 || steps[len(steps)-1].Step != 1 {
				t.Fatalf("metrics.jsonl steps %+v; want step 1", steps)
			}
			if _, ok := steps[len(steps)-1].Values["critic/score/mean"]; !ok {
				t.Errorf("step 1 has no critic/score/mean: %v", steps[len(steps)-1].Values)
			}
		})
	}
}

func TestNewTaskArgs(t *testing.T) {
	cases := []struct {
		args     []string
		name     string
		lang, dd string
		err      string
	}{
		{[]string{"mine"}, "mine", "go", "", ""},
		{[]string{"mine", "--lang", "python", "--dir", "/tmp/x"}, "mine", "python", "/tmp/x", ""},
		{[]string{"--lang=python", "mine", "-dir=d"}, "mine", "python", "d", ""},
		{[]string{"mine", "--lang"}, "", "", "", "flag --lang needs a value"},
		{[]string{"mine", "--colour", "red"}, "", "", "", "unknown flag --colour"},
		{[]string{"a", "b"}, "", "", "", `give one NAME, got "a" and "b"`},
		{nil, "", "", "", "give a NAME"},
	}
	for _, c := range cases {
		opts := map[string]string{"lang": "go", "dir": "", "sdk": ""}
		name, err := newTaskArgs(c.args, opts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v; want an error mentioning %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || name != c.name || opts["lang"] != c.lang || opts["dir"] != c.dd {
			t.Errorf("%q: name %q opts %v err %v; want %q lang %q dir %q", c.args, name, opts, err, c.name, c.lang, c.dd)
		}
	}
}

// The plugin search order is written the same in the generated projects' READMEs, README.md
// and the plugin guide: the order host/plugin.SearchPath looks in.
func TestPluginSearchOrderDocumented(t *testing.T) {
	env, home := t.TempDir(), t.TempDir()
	t.Setenv("RLHOST_PLUGIN_PATH", env)
	t.Setenv("HOME", home)
	wd, _ := os.Getwd()
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	want := []string{env, filepath.Join(wd, "bin", "plugins"), filepath.Join(filepath.Dir(exe), "plugins"), filepath.Join(home, ".rlhost", "plugins")}
	if got := hostplugin.SearchPath(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("SearchPath %q; want %q: change the documents with it", got, want)
	}
	// the same four places, in that order, in each text
	marks := []string{"RLHOST_PLUGIN_PATH", "./bin/plugins", "beside the `rlhost` binary", "~/.rlhost/plugins"}
	texts := map[string]string{}
	for _, lang := range []string{"go", "python"} {
		files, err := NewTaskProject("my-task", lang, repoSDK(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Path == "README.md" {
				texts["rlhost new task --lang "+lang+": README.md"] = string(f.Data)
			}
		}
	}
	for _, doc := range []string{"README.md", "docs/writing-a-task-plugin.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		texts[doc] = string(b)
	}
	for name, text := range texts {
		text = strings.Join(strings.Fields(text), " ")
		i := strings.Index(text, marks[0])
		if i < 0 {
			t.Errorf("%s does not give the plugin search order", name)
			continue
		}
		sentence := text[i:min(len(text), i+400)]
		last := -1
		for _, m := range marks {
			j := strings.Index(sentence, m)
			if j <= last {
				t.Errorf("%s: the search order is not %q: %q", name, marks, sentence)
				break
			}
			last = j
		}
	}
}
