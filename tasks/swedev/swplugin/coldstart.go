package swplugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// SFTMessagesKey is the extra_info key under which Preprocess gives a row's cold-start
// trajectory: the messages that follow the row's prompt, in OpenAI's shape. rlhost preprocess
// moves them out of the RL row into sft/SPLIT.parquet (docs/sft.md).
const SFTMessagesKey = "sft_messages"

// Replies of the editor tool, as the model reads them.
const (
	editedReply  = "The file %s has been edited."
	createdReply = "File created: %s"
)

// Edit is one str_replace_editor call: Command "str_replace" (Path, OldStr once in the file
// replaced by NewStr) or "create" (Path written with FileText).
type Edit struct {
	Command  string
	Path     string
	OldStr   string
	NewStr   string
	FileText string
}

// Arguments are the call's arguments as a JSON object (keys in the order command, path,
// then the command's texts; <, > and & as they are).
func (e Edit) Arguments() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	field := func(k, v string) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		_ = enc.Encode(k)
		b.Truncate(b.Len() - 1) // Encode's newline
		b.WriteByte(':')
		_ = enc.Encode(v)
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('{')
	field("command", e.Command)
	field("path", e.Path)
	if e.Command == "create" {
		field("file_text", e.FileText)
	} else {
		field("old_str", e.OldStr)
		field("new_str", e.NewStr)
	}
	b.WriteByte('}')
	return b.String()
}

// ColdStart is the tool-using trajectory a reference patch gives: one str_replace_editor call
// per hunk (a str_replace whose old_str is the hunk's old text, widened by lines around it
// until it occurs exactly once in the file as it is then; a create for a new file), each
// followed by the editor's reply, then a submit call. Messages are JSON-like values (for
// extra_info): {role, content, tool_calls: [{type, function: {name, arguments (a JSON
// string)}}]}. A patch the editor cannot make (a deleted, renamed or binary file, a mode
// change) or that does not apply to snapshot is an error.
func ColdStart(snapshot map[string]string, patch string) ([]any, error) {
	edits, err := PatchEdits(snapshot, patch)
	if err != nil {
		return nil, err
	}
	call := func(name, args string) []any {
		return []any{map[string]any{"type": "function", "function": map[string]any{"name": name, "arguments": args}}}
	}
	var out []any
	for i, e := range edits {
		text := fmt.Sprintf("Edit %s.", e.Path)
		if i == 0 {
			text = "The fix: edit " + e.Path + "."
		}
		reply := fmt.Sprintf(editedReply, e.Path)
		if e.Command == "create" {
			text = "Create " + e.Path + "."
			reply = fmt.Sprintf(createdReply, e.Path)
		}
		out = append(out,
			map[string]any{"role": "assistant", "content": text, "tool_calls": call(EditorTool, e.Arguments())},
			map[string]any{"role": "tool", "content": reply})
	}
	out = append(out, map[string]any{"role": "assistant", "content": "Done.", "tool_calls": call(SubmitTool, "{}")})
	return out, nil
}

// PatchEdits turns a unified diff into the str_replace_editor calls that make it on
// snapshot (path -> content), in order.
func PatchEdits(snapshot map[string]string, patch string) ([]Edit, error) {
	if strings.TrimSpace(patch) == "" {
		return nil, fmt.Errorf("the patch is empty")
	}
	var out []Edit
	for _, sec := range splitDiff(patch) {
		if !strings.Contains(sec.text, "\n@@ ") && !strings.HasPrefix(sec.text, "@@ ") {
			if strings.TrimSpace(sec.text) == "" {
				continue
			}
			return nil, fmt.Errorf("a file section without hunks (a mode change, rename or binary file): %q", firstLine(sec.text))
		}
		edits, err := fileEdits(snapshot, sec.text)
		if err != nil {
			return nil, err
		}
		out = append(out, edits...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the patch changes nothing")
	}
	return out, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// hunk is one @@ block: the old and new lines (each with its line end, none on a last line
// marked "\ No newline at end of file"), and where the old lines start (0-based).
type hunk struct {
	oldStart int
	old, new []string
}

// fileEdits reads one file's section of a diff.
func fileEdits(snapshot map[string]string, text string) ([]Edit, error) {
	var from, to string
	var hunks []hunk
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	minus, plus := false, false
	for i := 0; i < len(lines); i++ {
		t := strings.TrimRight(lines[i], "\r\n")
		switch {
		case strings.HasPrefix(t, "--- ") && len(hunks) == 0:
			from, minus = diffPath(t[4:]), true
		case strings.HasPrefix(t, "+++ ") && len(hunks) == 0:
			to, plus = diffPath(t[4:]), true
		case strings.HasPrefix(t, "rename "), strings.HasPrefix(t, "copy "), strings.HasPrefix(t, "old mode "),
			strings.HasPrefix(t, "new mode "), strings.HasPrefix(t, "deleted file mode "), strings.HasPrefix(t, "Binary files "):
			return nil, fmt.Errorf("%q: the editor cannot make this change", t)
		case strings.HasPrefix(t, "@@ "):
			h, n, err := readHunk(lines[i:])
			if err != nil {
				return nil, err
			}
			hunks = append(hunks, h)
			i += n - 1
		}
	}
	if !minus || !plus {
		return nil, fmt.Errorf("a file section without its ---/+++ lines")
	}
	if to == "" {
		return nil, fmt.Errorf("%s: a deleted file (the editor cannot delete)", from)
	}
	if from == "" { // a new file: its hunk is the whole text
		if _, ok := snapshot[to]; ok {
			return nil, fmt.Errorf("%s: a new file that the snapshot already has", to)
		}
		var b strings.Builder
		for _, h := range hunks {
			if len(h.old) > 0 {
				return nil, fmt.Errorf("%s: a new file with old lines", to)
			}
			b.WriteString(strings.Join(h.new, ""))
		}
		return []Edit{{Command: "create", Path: to, FileText: b.String()}}, nil
	}
	if from != to {
		return nil, fmt.Errorf("%s -> %s: a renamed file", from, to)
	}
	content, ok := snapshot[from]
	if !ok {
		return nil, fmt.Errorf("%s: the patch changes a file the snapshot does not have", from)
	}
	cur := strings.SplitAfter(content, "\n")
	if cur[len(cur)-1] == "" {
		cur = cur[:len(cur)-1]
	}
	var out []Edit
	delta := 0 // lines added so far minus lines removed
	for k, h := range hunks {
		start := h.oldStart + delta
		if start < 0 || start+len(h.old) > len(cur) || strings.Join(cur[start:start+len(h.old)], "") != strings.Join(h.old, "") {
			return nil, fmt.Errorf("%s: hunk %d does not apply to the snapshot", from, k+1)
		}
		end := start + len(h.old)
		whole := strings.Join(cur, "")
		// Widen [lo, hi) until its text occurs once, there.
		lo, hi := start, end
		for up := true; ; up = !up {
			oldStr := strings.Join(cur[lo:hi], "")
			at := len(strings.Join(cur[:lo], ""))
			if oldStr != "" && strings.Count(whole, oldStr) == 1 && strings.Index(whole, oldStr) == at {
				break
			}
			switch {
			case lo == 0 && hi == len(cur):
				return nil, fmt.Errorf("%s: hunk %d: no text around it occurs once in the file", from, k+1)
			case (up && lo > 0) || hi == len(cur):
				lo--
			default:
				hi++
			}
		}
		newStr := strings.Join(cur[lo:start], "") + strings.Join(h.new, "") + strings.Join(cur[end:hi], "")
		out = append(out, Edit{Command: "str_replace", Path: from, OldStr: strings.Join(cur[lo:hi], ""), NewStr: newStr})
		next := append(append(append([]string(nil), cur[:start]...), h.new...), cur[end:]...)
		cur = next
		delta += len(h.new) - len(h.old)
	}
	return out, nil
}

// readHunk reads the hunk whose @@ line starts lines; n is the number of lines it takes.
func readHunk(lines []string) (h hunk, n int, err error) {
	head := strings.TrimRight(lines[0], "\r\n")
	var oldStart, oldN, newN int
	rest, ok := strings.CutPrefix(head, "@@ -")
	if ok {
		var o, nw string
		o, rest, ok = strings.Cut(rest, " +")
		if ok {
			nw, _, ok = strings.Cut(rest, " @@")
		}
		if ok {
			oldStart, oldN, ok = hunkRange(o)
		}
		if ok {
			_, newN, ok = hunkRange(nw)
		}
	}
	if !ok {
		return h, 0, fmt.Errorf("a malformed hunk header %q", head)
	}
	h.oldStart = oldStart - 1
	if oldN == 0 { // an insertion after line oldStart
		h.oldStart = oldStart
	}
	last := byte(0) // the side of the previous line: ' ', '-' or '+'
	n = 1
	for ; n < len(lines) && (len(h.old) < oldN || len(h.new) < newN || strings.HasPrefix(lines[n], `\`)); n++ {
		l := lines[n]
		if strings.HasPrefix(l, `\`) { // "\ No newline at end of file": the previous line has no line end
			trim := func(s []string) {
				if len(s) > 0 {
					s[len(s)-1] = strings.TrimSuffix(strings.TrimSuffix(s[len(s)-1], "\n"), "\r")
				}
			}
			if last == ' ' || last == '-' {
				trim(h.old)
			}
			if last == ' ' || last == '+' {
				trim(h.new)
			}
			continue
		}
		if l == "\n" || l == "\r\n" { // an empty context line whose space was stripped
			l = " " + l
		}
		last = l[0]
		switch last {
		case ' ':
			h.old = append(h.old, l[1:])
			h.new = append(h.new, l[1:])
		case '-':
			h.old = append(h.old, l[1:])
		case '+':
			h.new = append(h.new, l[1:])
		default:
			return h, 0, fmt.Errorf("hunk %q: a line that is neither context, - nor +: %q", head, strings.TrimRight(l, "\n"))
		}
	}
	if len(h.old) != oldN || len(h.new) != newN {
		return h, 0, fmt.Errorf("hunk %q: %d old and %d new lines, the header says %d and %d", head, len(h.old), len(h.new), oldN, newN)
	}
	return h, n, nil
}

// hunkRange reads "a,b" or "a" (b = 1).
func hunkRange(s string) (start, n int, ok bool) {
	a, b, has := strings.Cut(s, ",")
	start, err := strconv.Atoi(a)
	if err != nil || start < 0 {
		return 0, 0, false
	}
	n = 1
	if has {
		if n, err = strconv.Atoi(b); err != nil || n < 0 {
			return 0, 0, false
		}
	}
	return start, n, true
}
