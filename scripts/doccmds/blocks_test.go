package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

const doc = "# A page\n\n" +
	"```sh\nnot marked\n```\n\n" +
	"````markdown\n<!-- runnable -->\n```sh\nan example of a marker, in a fence\n```\n````\n\n" +
	"<!-- runnable: the test runs this block, a run\ncut to one step:\n" +
	"  append bin/rlhost train => trainer.total_training_steps=1 a=2\n" +
	"  replace --min-reward 1 => --min-reward 0\n" +
	"  serve bin/rlhost traces serve\n" +
	"  skip make example-arith => ten minutes\n" +
	"  timeout 5m\n" +
	"-->\n\n" +
	"```sh\n" +
	"make build model                     # the binaries\n" +
	"bin/rlhost train --task gsm8k \\\n" +
	"    'data.x=[a, b]'   # veRL keys\n" +
	"# a comment line\n" +
	"\n" +
	"bin/rlhost sft --from-traces runs/x --min-reward 1\n" +
	"bin/rlhost traces serve --run runs/x\n" +
	"make example-arith\n" +
	"echo 'a # not a comment' \"b # nor this\" # but this\n" +
	"```\n"

func TestParse(t *testing.T) {
	blocks, err := Parse("page.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || blocks[0].Line != 23 {
		t.Fatalf("blocks %+v; want one at line 23", blocks)
	}
	b := blocks[0]
	var got []string
	for _, s := range b.Steps() {
		got = append(got, strings.Join([]string{strconv.Itoa(s.Line), s.Run, s.Comment, s.Skip, map[bool]string{true: "serve"}[s.Serve], s.Timeout.String()}, " | "))
	}
	want := []string{
		"24 | make build model | # the binaries |  |  | 5m0s",
		"25 | bin/rlhost train --task gsm8k 'data.x=[a, b]' trainer.total_training_steps=1 a=2 | # veRL keys |  |  | 5m0s",
		"29 | bin/rlhost sft --from-traces runs/x --min-reward 0 |  |  |  | 5m0s",
		"30 | bin/rlhost traces serve --run runs/x |  |  | serve | 5m0s",
		"31 | make example-arith |  | ten minutes |  | 5m0s",
		"32 | echo 'a # not a comment' \"b # nor this\" | # but this |  |  | 5m0s",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps\n got %q\nwant %q", got, want)
	}
	if b.Rules[4].Duration != 5*time.Minute {
		t.Errorf("rules %+v", b.Rules)
	}
}

// Mistakes in a marker are errors naming the file and line, never a block run otherwise than
// written: a rule that matches nothing (the document changed under it) included.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"<!-- runnable -->\ntext\n```sh\nls\n```\n", "page.md:1: a runnable marker must be followed by its fenced block"},
		{"<!-- runnable -->\n", "page.md:1: a runnable marker without a fenced block"},
		{"<!-- runnable\nappend ls\n-->\n```sh\nls\n```\n", `page.md:2: rule "append ls": want append TEXT => TEXT`},
		{"<!-- runnable\nappend ls => -l\nfrobnicate x\n-->\n```sh\nls\n```\n", "unknown (append, replace, serve, skip, timeout)"},
		{"<!-- runnable\ntimeout soon\n-->\n```sh\nls\n```\n", "want timeout DURATION"},
		{"<!-- runnable\nappend make => X=1\n-->\n```sh\nls\n```\n", `page.md:2: rule append "make" matches no command of the block at line 4`},
		{"<!-- runnable\nreplace -x => -y\n-->\n```sh\nls\n```\n", `rule replace "-x" matches no command`},
		{"<!-- runnable -->\n```go\nfunc main() {}\n```\n", "must be a shell block"},
		{"<!-- runnable -->\n```sh\nls\n", "is not closed"},
		{"<!-- runnable\nappend ls => -l\n", "not closed with -->"},
		{"<!-- runnable -->\n```sh\nls \\\n```\n", "ends with a backslash"},
		{"<!-- runnable -->\n```sh\necho 'a\n```\n", "unclosed ' quote"},
	} {
		_, err := Parse("page.md", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want %q", tc.doc, err, tc.want)
		}
	}
}

// The documents' markers parse, and the blocks the docs promise are marked: README.md's
// "Using it" and docs/training.md's mixed-task example.
func TestProjectDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	found := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Parse(f, b)
		if err != nil {
			t.Error(err)
		}
		for _, bl := range blocks {
			for _, c := range bl.Commands {
				found[filepath.Base(f)+": "+c.Text] = true
			}
		}
	}
	for _, want := range []string{
		"README.md: make build model",
		"README.md: bin/rlhost sft --from-traces runs/rlhost/gsm8k --min-reward 1",
		"training.md: bin/rlhost train --task gsm8k --task arith 'data.train_files=[data/gsm8k/train.parquet, data/arith/*.parquet]' " +
			"'data.val_files=[data/gsm8k/test.parquet, data/arith/test.parquet]' 'data.sampling_weights={openai/gsm8k: 3, arith: 1}' task.reward_weights.arith=0.5",
	} {
		if !found[want] {
			t.Errorf("no runnable block has %q", want)
		}
	}
}
