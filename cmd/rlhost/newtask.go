package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/urfave/cli/v2"
	"golang.org/x/mod/modfile"
)

func init() { extraCommands = append(extraCommands, newCommand()) }

// The project templates, with [[ ]] as delimiters (Go and Python code use braces).
//
//go:embed newtask
var newTaskFS embed.FS

// sdkModule is the Go SDK's module path.
const sdkModule = "github.com/rlhost/rlhost/sdk"

// defaultModelFile is the default model's file name, looked up under the source's models/.
const defaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf"

func newCommand() *cli.Command {
	return &cli.Command{
		Name:  "new",
		Usage: "start a new plugin project",
		Subcommands: []*cli.Command{{
			Name:      "task",
			Usage:     "write a task plugin project (Go or Python) that builds, passes conformance and trains as it is",
			ArgsUsage: "NAME",
			Description: "Writes DIR (default ./rlhost-task-NAME): the plugin's code, a test, a tiny dataset (data/*.jsonl),\n" +
				"train.yaml for a one-step run and a README with the commands. The SDK is taken from an rlhost\n" +
				"source tree: --sdk, else $RLHOST_SDK, else the sdk folder of the tree this rlhost binary is in\n" +
				"(BIN/../sdk), else of the current folder or one above it.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "lang", Value: "go", Usage: "go or python"},
				&cli.StringFlag{Name: "dir", Usage: "where to write the project (default ./rlhost-task-NAME); it must not exist or be empty"},
				&cli.StringFlag{Name: "sdk", Usage: "the sdk folder of an rlhost source tree", EnvVars: []string{"RLHOST_SDK"}},
			},
			Action: func(c *cli.Context) error {
				for _, a := range c.Args().Slice() {
					if a == "-h" || a == "--help" || a == "-help" {
						return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
					}
				}
				opts := map[string]string{"lang": c.String("lang"), "dir": c.String("dir"), "sdk": c.String("sdk")}
				name, err := newTaskArgs(c.Args().Slice(), opts)
				if err != nil {
					return cli.Exit("new task: "+err.Error()+"; usage: rlhost new task NAME --lang go|python [--dir D] [--sdk PATH]", 2)
				}
				dir := opts["dir"]
				if dir == "" {
					dir = "rlhost-task-" + name
				}
				sdk, err := findSDK(opts["sdk"])
				if err != nil {
					return err
				}
				files, err := NewTaskProject(name, opts["lang"], sdk)
				if err != nil {
					return err
				}
				if err := writeProject(dir, files); err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "wrote %s (%d files); next:\n  cd %s\n%s", dir, len(files), dir, nextSteps(name, opts["lang"]))
				if w := pythonWheel(filepath.Dir(sdk)); opts["lang"] == "python" && !fileExists(w) {
					fmt.Fprintf(c.App.ErrWriter, "note: requirements.txt installs the Python SDK from %s, which is not built yet: "+
						"run `make python-wheel` in %s first\n", w, filepath.Dir(sdk))
				}
				return nil
			},
		}},
	}
}

// newTaskArgs takes NAME and the flags that follow it (--lang go, --dir=D, ...), which the
// command-line parser leaves among the arguments, into opts.
func newTaskArgs(args []string, opts map[string]string) (string, error) {
	var name string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			if name != "" {
				return "", fmt.Errorf("give one NAME, got %q and %q", name, a)
			}
			name = a
			continue
		}
		key, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if _, ok := opts[key]; !ok {
			return "", fmt.Errorf("unknown flag %s", a)
		}
		if !hasVal {
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag %s needs a value", a)
			}
			i++
			val = args[i]
		}
		opts[key] = val
	}
	if name == "" {
		return "", fmt.Errorf("give a NAME")
	}
	return name, nil
}

func nextSteps(name, lang string) string {
	var b strings.Builder
	if lang == "go" {
		fmt.Fprintf(&b, "  go test ./...\n  go build -o bin/plugins/rlhost-task-%s .\n", name)
	} else {
		b.WriteString("  python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && export RLHOST_PYTHON=$PWD/.venv/bin/python\n")
		b.WriteString("  $RLHOST_PYTHON -m pytest -q\n")
	}
	fmt.Fprintf(&b, "  rlhost conformance %s\n  rlhost preprocess --task %s --input data --output-dir data/%s\n  rlhost train --task %s -c train.yaml\n",
		name, name, name, name)
	return b.String()
}

var validTaskName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,47}$`)

// ProjectFile is one file of a generated project.
type ProjectFile struct {
	Path string // slash-separated, relative to the project folder
	Data []byte
	Mode os.FileMode
}

// NewTaskProject returns the files of a new task plugin project in lang ("go" or "python"),
// built against the Go SDK folder sdk (whose parent is an rlhost source tree).
func NewTaskProject(name, lang, sdk string) ([]ProjectFile, error) {
	if !validTaskName.MatchString(name) || strings.HasSuffix(name, "-") || strings.Contains(name, "--") {
		return nil, fmt.Errorf("new task: name %q: use lower-case letters, digits and single dashes, starting with a letter (the plugin is rlhost-task-NAME)", name)
	}
	root := filepath.Dir(sdk)
	vars := map[string]string{
		"Name":      name,
		"Module":    strings.ReplaceAll(name, "-", "_") + "_task",
		"SDK":       sdk,
		"SDKPython": filepath.Join(root, "sdk", "python"),
		"SDKWheel":  pythonWheel(root),
	}
	if p := filepath.Join(root, "models", defaultModelFile); fileExists(p) {
		vars["Model"] = p
	}
	var files []ProjectFile
	add := func(path, tmpl string, mode os.FileMode) error {
		b, err := render(tmpl, vars)
		if err != nil {
			return err
		}
		files = append(files, ProjectFile{Path: path, Data: b, Mode: mode})
		return nil
	}
	type tf struct{ path, tmpl string }
	var list []tf
	switch lang {
	case "go":
		mod, sum, err := goModFiles(name, sdk)
		if err != nil {
			return nil, err
		}
		files = append(files, ProjectFile{Path: "go.mod", Data: mod, Mode: 0o644}, ProjectFile{Path: "go.sum", Data: sum, Mode: 0o644})
		list = []tf{{"main.go", "go/main.go.tmpl"}, {"main_test.go", "go/main_test.go.tmpl"},
			{"README.md", "go/README.md.tmpl"}, {".gitignore", "go/gitignore.tmpl"}}
	case "python":
		if !fileExists(filepath.Join(vars["SDKPython"], "pyproject.toml")) {
			return nil, fmt.Errorf("new task: the Python SDK is not at %s (an rlhost source tree has sdk/python)", vars["SDKPython"])
		}
		list = []tf{{vars["Module"] + ".py", "python/task.py.tmpl"}, {"test_" + vars["Module"] + ".py", "python/test_task.py.tmpl"},
			{"requirements.txt", "python/requirements.txt.tmpl"}, {"README.md", "python/README.md.tmpl"},
			{".gitignore", "python/gitignore.tmpl"}}
		if err := add("bin/plugins/rlhost-task-"+name, "python/launcher.tmpl", 0o755); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("new task: --lang %q: want go or python", lang)
	}
	list = append(list, tf{"train.yaml", "common/train.yaml.tmpl"})
	for _, f := range list {
		if err := add(f.path, f.tmpl, 0o644); err != nil {
			return nil, err
		}
	}
	train, test := tinyDataset()
	files = append(files, ProjectFile{Path: "data/train.jsonl", Data: train, Mode: 0o644},
		ProjectFile{Path: "data/test.jsonl", Data: test, Mode: 0o644})
	return files, nil
}

// pythonWheel is where `make python-wheel` puts the Python SDK's wheel in the rlhost source
// tree root: bin/python/rlhost-VERSION-py3-none-any.whl, VERSION from sdk/python/pyproject.toml.
func pythonWheel(root string) string {
	version := "0.0.0"
	if b, err := os.ReadFile(filepath.Join(root, "sdk", "python", "pyproject.toml")); err == nil {
		if m := pyprojectVersion.FindSubmatch(b); m != nil {
			version = string(m[1])
		}
	}
	return filepath.Join(root, "bin", "python", "rlhost-"+version+"-py3-none-any.whl")
}

var pyprojectVersion = regexp.MustCompile(`(?m)^version = "([^"]+)"`)

func render(name string, vars map[string]string) ([]byte, error) {
	text, err := fs.ReadFile(newTaskFS, "newtask/"+name)
	if err != nil {
		return nil, err
	}
	t, err := template.New(name).Delims("[[", "]]").Option("missingkey=zero").Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("new task: template %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, vars); err != nil {
		return nil, fmt.Errorf("new task: template %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// goModFiles writes the project's go.mod and go.sum. The SDK module is not published on a
// module proxy, so go.mod replaces it with the SDK folder; it requires what the SDK requires
// (as indirect) and go.sum is the SDK's, so that the project builds without `go mod tidy`.
func goModFiles(name, sdk string) (mod, sum []byte, err error) {
	path := filepath.Join(sdk, "go.mod")
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("new task: the Go SDK: %w", err)
	}
	sdkMod, err := modfile.ParseLax(path, text, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("new task: %w", err)
	}
	if sdkMod.Module == nil || sdkMod.Module.Mod.Path != sdkModule {
		return nil, nil, fmt.Errorf("new task: %s is not the rlhost Go SDK (its module is not %s)", path, sdkModule)
	}
	sum, err = os.ReadFile(filepath.Join(sdk, "go.sum"))
	if err != nil {
		return nil, nil, fmt.Errorf("new task: the Go SDK: %w", err)
	}
	f := &modfile.File{}
	if err := f.AddModuleStmt("example.com/rlhost-task-" + name); err != nil {
		return nil, nil, err
	}
	goVersion := "1.26.0"
	if sdkMod.Go != nil {
		goVersion = sdkMod.Go.Version
	}
	if err := f.AddGoStmt(goVersion); err != nil {
		return nil, nil, err
	}
	f.AddNewRequire(sdkModule, "v0.0.0", false)
	for _, r := range sdkMod.Require {
		f.AddNewRequire(r.Mod.Path, r.Mod.Version, true)
	}
	f.SetRequireSeparateIndirect(f.Require)
	if err := f.AddReplace(sdkModule, "", sdk, ""); err != nil {
		return nil, nil, err
	}
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return nil, nil, err
	}
	header := "// Made by `rlhost new task`. The rlhost SDK module is not published on a module proxy, so the\n" +
		"// replace line below points at the sdk folder of the rlhost source this project was made from;\n" +
		"// change it if that source moves (README.md).\n"
	return append([]byte(header), out...), sum, nil
}

// findSDK returns the Go SDK folder: flag (or RLHOST_SDK), else the sdk folder of the source
// tree this binary was built in (BIN/../sdk, symlinks resolved), else of the current folder's
// ancestors.
func findSDK(flag string) (string, error) {
	var tried []string
	try := func(dir string) (string, bool) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", false
		}
		tried = append(tried, abs)
		if isSDK(abs) {
			return abs, true
		}
		return "", false
	}
	if flag != "" {
		if d, ok := try(flag); ok {
			return d, nil
		}
		return "", fmt.Errorf("new task: --sdk %s is not the rlhost Go SDK (want the sdk folder of an rlhost source tree, with a go.mod for %s)", flag, sdkModule)
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			if d, ok := try(filepath.Join(filepath.Dir(exe), "..", "sdk")); ok {
				return d, nil
			}
		}
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if s, ok := try(filepath.Join(d, "sdk")); ok {
				return s, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("new task: cannot find the rlhost SDK (looked in %s): pass --sdk PATH/TO/rlhost/sdk or set RLHOST_SDK",
		strings.Join(tried, ", "))
}

func isSDK(dir string) bool {
	text, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && modfile.ModulePath(text) == sdkModule
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// writeProject writes files under dir, which must not exist or be empty.
func writeProject(dir string, files []ProjectFile) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("new task: %s exists and is not empty: choose another --dir", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("new task: %w", err)
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("new task: %w", err)
		}
		if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
			return fmt.Errorf("new task: %w", err)
		}
	}
	return nil
}

// tinyDataset is 16 training and 4 test records of two-operand arithmetic, fixed so that
// every project starts from the same data.
func tinyDataset() (train, test []byte) {
	var tr, te bytes.Buffer
	for i := 0; i < 20; i++ {
		a, b := 2+(i*7)%13, 1+(i*5)%9
		op, ans := "+", a+b
		if i%3 == 1 {
			op, ans = "-", a-b
		}
		line := fmt.Sprintf("{\"question\": \"What is %d %s %d?\", \"answer\": \"%d\"}\n", a, op, b, ans)
		if i < 16 {
			tr.WriteString(line)
		} else {
			te.WriteString(line)
		}
	}
	return tr.Bytes(), te.Bytes()
}
