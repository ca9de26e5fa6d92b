package main

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"time"
)

// Block is a shell block of a document marked runnable: the commands of its fence (a command
// continued with a trailing backslash is one command), and the rules of its marker.
type Block struct {
	File     string
	Line     int // of the opening fence
	Commands []Command
	Rules    []Rule
}

// Command is one shell command of a block as the document writes it.
type Command struct {
	Line    int    // of its first line
	Text    string // the command, continuation lines joined, without its trailing comment
	Comment string // the trailing "# ..." comment, "" if none
}

// Rule is one line of a block's marker: what the runner changes or how it runs a command
// (docs/runnable-docs.md).
type Rule struct {
	Kind     string // append, replace, serve, skip, timeout
	Match    string // append, serve, skip: the command's prefix; replace: the text replaced
	Value    string // append: the arguments added; replace: the new text; skip: why
	Duration time.Duration
	Line     int
}

// marker opens the HTML comment that marks the next fenced block runnable.
const marker = "<!-- runnable"

// Parse returns the runnable blocks of a Markdown document: each fenced block (``` or ```sh,
// ```bash, ```shell) whose opening fence follows a "<!-- runnable ... -->" comment, with only
// blank lines between them. The comment starts with words that say what the test does; its
// rules start at its first line that begins with a rule's name, and from there every line is
// a rule. A marker inside another fenced block (an example of one) is text.
func Parse(file string, doc []byte) ([]Block, error) {
	var blocks []Block
	var pending *Block // a marker waiting for its fence
	fence := ""        // the backticks that opened the unmarked fenced block we are in
	lines := splitLines(doc)
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`") == "" {
				fence = ""
			}
			continue
		}
		switch {
		case pending == nil && strings.HasPrefix(trimmed, "```"):
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
		case strings.HasPrefix(trimmed, marker):
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: a runnable marker without a fenced block after it", file, pending.Line)
			}
			b := &Block{File: file, Line: i + 1}
			body := strings.TrimPrefix(trimmed, marker)
			first, rules := true, false
			for {
				end := strings.Contains(body, "-->")
				body, _, _ = strings.Cut(body, "-->")
				if name, _, _ := strings.Cut(strings.TrimSpace(body), " "); !first && ruleNames[name] {
					rules = true
				}
				if rules {
					r, err := parseRule(body)
					if err != nil {
						return nil, fmt.Errorf("%s:%d: %v", file, i+1, err)
					}
					if r != nil {
						r.Line = i + 1
						b.Rules = append(b.Rules, *r)
					}
				}
				first = false
				if end {
					break
				}
				if i++; i >= len(lines) {
					return nil, fmt.Errorf("%s:%d: the runnable marker is not closed with -->", file, b.Line)
				}
				body = lines[i]
			}
			pending = b
		case pending != nil && trimmed == "":
		case pending != nil && strings.HasPrefix(trimmed, "```"):
			lang := strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
			if lang != "" && lang != "sh" && lang != "bash" && lang != "shell" {
				return nil, fmt.Errorf("%s:%d: a runnable block must be a shell block (```sh), not ```%s", file, i+1, lang)
			}
			b := pending
			pending = nil
			b.Line = i + 1
			var body []string
			start := i + 1
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				body = append(body, lines[i])
			}
			if i >= len(lines) {
				return nil, fmt.Errorf("%s:%d: the runnable block is not closed", file, b.Line)
			}
			cmds, err := commands(body, start+1)
			if err != nil {
				return nil, fmt.Errorf("%s:%w", file, err)
			}
			b.Commands = cmds
			if err := b.checkRules(); err != nil {
				return nil, err
			}
			blocks = append(blocks, *b)
		case pending != nil:
			return nil, fmt.Errorf("%s:%d: a runnable marker must be followed by its fenced block (found %q)", file, pending.Line, trimmed)
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: a runnable marker without a fenced block after it", file, pending.Line)
	}
	return blocks, nil
}

func splitLines(doc []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

var ruleNames = map[string]bool{"append": true, "replace": true, "serve": true, "skip": true, "timeout": true}

// parseRule reads one rule line: "append PREFIX => ARGS", "replace OLD => NEW",
// "serve PREFIX", "skip PREFIX => WHY", "timeout DURATION"; a blank line is no rule.
func parseRule(s string) (*Rule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	kind, rest, _ := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	left, right, arrow := strings.Cut(rest, "=>")
	left, right = strings.TrimSpace(left), strings.TrimSpace(right)
	switch kind {
	case "append", "replace", "skip":
		if !arrow || left == "" || (kind != "replace" && right == "") {
			return nil, fmt.Errorf("rule %q: want %s TEXT => TEXT", s, kind)
		}
		return &Rule{Kind: kind, Match: left, Value: right}, nil
	case "serve":
		if arrow || left == "" {
			return nil, fmt.Errorf("rule %q: want serve PREFIX", s)
		}
		return &Rule{Kind: kind, Match: left}, nil
	case "timeout":
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("rule %q: want timeout DURATION (e.g. 10m)", s)
		}
		return &Rule{Kind: kind, Duration: d}, nil
	}
	return nil, fmt.Errorf("rule %q: unknown (append, replace, serve, skip, timeout)", s)
}

// commands splits a block's lines into commands: a line ending in a backslash continues on
// the next; blank lines and lines that are only a comment are not commands.
func commands(lines []string, first int) ([]Command, error) {
	var out []Command
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := Command{Line: first + i}
		text := line
		for strings.HasSuffix(text, "\\") {
			if i++; i >= len(lines) {
				return nil, fmt.Errorf("%d: the command ends with a backslash and no line after it", c.Line)
			}
			text = strings.TrimSpace(strings.TrimSuffix(text, "\\")) + " " + strings.TrimSpace(lines[i])
		}
		code, comment, err := splitComment(text)
		if err != nil {
			return nil, fmt.Errorf("%d: %v", c.Line, err)
		}
		c.Text, c.Comment = code, comment
		out = append(out, c)
	}
	return out, nil
}

// splitComment cuts a shell command line at its comment: a # at the start of a word, outside
// quotes.
func splitComment(s string) (code, comment string, err error) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i:]), nil
		}
	}
	if quote != 0 {
		return "", "", fmt.Errorf("unclosed %c quote in %q", quote, s)
	}
	return strings.TrimSpace(s), "", nil
}

// checkRules fails a rule that matches no command of the block: a rule that changes nothing
// would hide that the document changed.
func (b *Block) checkRules() error {
	for _, r := range b.Rules {
		if r.Kind == "timeout" {
			continue
		}
		found := false
		for _, c := range b.Commands {
			text := c.Text
			if r.Kind != "replace" {
				text = b.replaced(text)
			}
			if r.Kind == "replace" && strings.Contains(text, r.Match) || r.Kind != "replace" && strings.HasPrefix(text, r.Match) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s:%d: rule %s %q matches no command of the block at line %d", b.File, r.Line, r.Kind, r.Match, b.Line)
		}
	}
	return nil
}

// Step is a command as the runner runs it: its text with the block's rules applied.
type Step struct {
	Command
	Run     string        // the shell command run
	Skip    string        // why it is not run ("" runs it)
	Serve   bool          // run it until it prints a URL, fetch the URL, then stop it
	Timeout time.Duration // 0: the runner's default
}

// replaced is text with the block's replace rules applied, each in turn.
func (b *Block) replaced(text string) string {
	for _, r := range b.Rules {
		if r.Kind == "replace" {
			text = strings.ReplaceAll(text, r.Match, r.Value)
		}
	}
	return text
}

// Steps applies the block's rules to its commands: the replace rules first (each in turn),
// then every append, serve and skip rule whose prefix starts the replaced text, in the
// marker's order.
func (b *Block) Steps() []Step {
	var out []Step
	for _, c := range b.Commands {
		s := Step{Command: c, Run: b.replaced(c.Text)}
		for _, r := range b.Rules {
			if r.Kind == "timeout" {
				s.Timeout = r.Duration
			}
		}
		base := s.Run
		for _, r := range b.Rules {
			if !strings.HasPrefix(base, r.Match) {
				continue
			}
			switch r.Kind {
			case "append":
				s.Run += " " + r.Value
			case "serve":
				s.Serve = true
			case "skip":
				s.Skip = r.Value
			}
		}
		out = append(out, s)
	}
	return out
}
