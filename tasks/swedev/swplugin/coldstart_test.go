package swplugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/sdk/task"
)

// replayColdStart runs a row's cold-start trajectory through the task's real tools in a
// sandbox instance and checks it against the reference patch: every call names a declared
// tool and gets the reply the row has, the submit ends the episode, and the instance's diff
// is the diff of a second instance where git applied the reference patch.
func replayColdStart(t *testing.T, p *Task, row task.Row, patch string) {
	t.Helper()
	ctx := context.Background()
	raw, ok := row.ExtraInfo[SFTMessagesKey]
	if !ok {
		t.Fatalf("no extra_info.%s", SFTMessagesKey)
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []struct {
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(b, &msgs); err != nil {
		t.Fatalf("the messages do not parse: %v", err)
	}
	declared := map[string]bool{}
	for _, s := range p.ToolSpecs() {
		declared[s.Name] = true
	}
	st, err := p.Start(ctx, task.StartRequest{Row: row})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := p.End(ctx, task.EndRequest{InstanceID: st.InstanceID, Aborted: true}); err != nil {
			t.Error(err)
		}
	}()
	done := false
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role != "assistant" || len(m.ToolCalls) != 1 || done {
			t.Fatalf("message %d: %+v (want one assistant tool call per turn, none after submit)", i, m)
		}
		c := m.ToolCalls[0]
		if c.Type != "function" || !declared[c.Function.Name] {
			t.Fatalf("message %d calls %q (type %q); the task declares %v", i, c.Function.Name, c.Type, declared)
		}
		if !json.Valid([]byte(c.Function.Arguments)) {
			t.Fatalf("message %d: arguments are not JSON: %s", i, c.Function.Arguments)
		}
		res := obs(t, p, st.InstanceID, task.ToolCall{ID: "c", Name: c.Function.Name, Arguments: json.RawMessage(c.Function.Arguments)})
		if len(res.ToolResults) != 1 || res.ToolResults[0].Error {
			t.Fatalf("message %d: %+v", i, res.ToolResults)
		}
		if c.Function.Name == SubmitTool {
			done = res.Done
			continue
		}
		if i+1 >= len(msgs) || msgs[i+1].Role != "tool" || msgs[i+1].Content != res.ToolResults[0].Text {
			t.Fatalf("message %d: the tool replied %q; the row's next message is %+v", i, res.ToolResults[0].Text, msgs[min(i+1, len(msgs)-1)])
		}
		i++
	}
	if !done {
		t.Fatal("the trajectory does not end with a submit that ends the episode")
	}
	sb, id, _, err := p.sandboxOf(st.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sb.Diff(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := p.Start(ctx, task.StartRequest{Row: row})
	if err != nil {
		t.Fatal(err)
	}
	defer p.End(ctx, task.EndRequest{InstanceID: ref.InstanceID, Aborted: true})
	sb, refID, _, err := p.sandboxOf(ref.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sb.ApplyPatch(ctx, refID, patch); err != nil || res.ExitCode != 0 {
		t.Fatalf("git apply of the reference patch: %v %+v", err, res)
	}
	want, err := sb.Diff(ctx, refID)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || strings.TrimSpace(want) == "" {
		t.Fatalf("the edits give the diff\n%s\ngit apply of the reference patch gives\n%s", got, want)
	}
}

// Every task of the starter dataset and the sample gets a cold-start trajectory that makes
// its reference patch with str_replace_editor, then submits.
func TestColdStartDataset(t *testing.T) {
	p := New()
	defer p.Close()
	recs := append(datasetRecords(t), task.Record{Split: "train", Data: sampleRecord})
	for _, r := range recs {
		id, _ := r.Data["instance_id"].(string)
		t.Run(id, func(t *testing.T) {
			row, err := p.Preprocess(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			replayColdStart(t, p, row, r.Data["patch"].(string))
		})
	}
}

// The reference fix made by the sample's cold-start trajectory scores 1.
func TestColdStartSampleScores(t *testing.T) {
	p := New()
	defer p.Close()
	ctx := context.Background()
	row := sampleRow(t, p)
	st, err := p.Start(ctx, task.StartRequest{Row: row})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range row.ExtraInfo[SFTMessagesKey].([]any) {
		mm := m.(map[string]any)
		if mm["role"] != "assistant" {
			continue
		}
		f := mm["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
		obs(t, p, st.InstanceID, task.ToolCall{ID: "c", Name: f["name"].(string), Arguments: json.RawMessage(f["arguments"].(string))})
	}
	end, err := p.End(ctx, task.EndRequest{InstanceID: st.InstanceID})
	if err != nil {
		t.Fatal(err)
	}
	if end.Reward != 1 || end.Metrics["submitted"] != 1 {
		t.Fatalf("%+v", end)
	}
}

// patchCases: diffs whose hunks need care, each with its snapshot.
var patchCases = []struct {
	name     string
	snapshot map[string]string
	patch    string
}{
	{"repeated old text widened until unique",
		map[string]string{"a.py": "a\nx\nb\nc\na\nx\nb\n"},
		"--- a/a.py\n+++ b/a.py\n@@ -5,3 +5,3 @@\n a\n-x\n+y\n b\n"},
	{"an insertion",
		map[string]string{"a.py": "a\nb\nc\n"},
		"--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,3 @@\n a\n+inserted\n b\n"},
	{"two hunks, the second shifted by the first",
		map[string]string{"a.py": "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"},
		"--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,5 @@\n 1\n+1a\n+1b\n 2\n 3\n@@ -10,3 +12,2 @@\n 10\n-11\n 12\n"},
	{"no newline at the end, before and after",
		map[string]string{"a.py": "a\nb"},
		"--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
	{"a line end added at the end",
		map[string]string{"a.py": "a\nb"},
		"--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
	{"a new file and an edit, with git headers",
		map[string]string{"a.py": "a\n"},
		"diff --git a/a.py b/a.py\nindex 1..2 100644\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+b\n" +
			"diff --git a/new/b.py b/new/b.py\nnew file mode 100644\nindex 0000000..1\n--- /dev/null\n+++ b/new/b.py\n@@ -0,0 +1,2 @@\n+x <y> & z\n+w\n"},
}

// applyEdits makes edits as str_replace_editor does (str_replace: old_str once; create).
func applyEdits(t *testing.T, files map[string]string, edits []Edit) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	for i, e := range edits {
		var args map[string]any
		if err := json.Unmarshal([]byte(e.Arguments()), &args); err != nil || args["command"] != e.Command || args["path"] != e.Path {
			t.Fatalf("edit %d: arguments %s: %v", i, e.Arguments(), err)
		}
		switch e.Command {
		case "create":
			out[e.Path] = args["file_text"].(string)
		case "str_replace":
			old := args["old_str"].(string)
			if n := strings.Count(out[e.Path], old); n != 1 || old == "" {
				t.Fatalf("edit %d: old_str %q occurs %d times in %q", i, old, n, out[e.Path])
			}
			out[e.Path] = strings.Replace(out[e.Path], old, args["new_str"].(string), 1)
		default:
			t.Fatalf("edit %d: command %q", i, e.Command)
		}
	}
	return out
}

// The edits of each case give what git apply gives, checked through the sandbox's real editor
// and git (replayColdStart) and by the edits' own arithmetic.
func TestPatchEdits(t *testing.T) {
	p := New()
	defer p.Close()
	for _, c := range patchCases {
		t.Run(c.name, func(t *testing.T) {
			edits, err := PatchEdits(c.snapshot, c.patch)
			if err != nil {
				t.Fatal(err)
			}
			applyEdits(t, c.snapshot, edits)
			rec := map[string]any{}
			for k, v := range sampleRecord {
				rec[k] = v
			}
			snap := map[string]any{}
			for k, v := range sampleRecord["snapshot"].(map[string]any) {
				snap[k] = v
			}
			for k, v := range c.snapshot {
				snap[k] = v
			}
			rec["snapshot"], rec["patch"] = snap, c.patch
			row, err := p.Preprocess(context.Background(), task.Record{Split: "train", Data: rec})
			if err != nil {
				t.Fatal(err)
			}
			replayColdStart(t, p, row, c.patch)
		})
	}
}

// The expected edits of two cases, written out.
func TestPatchEditsText(t *testing.T) {
	edits, err := PatchEdits(patchCases[0].snapshot, patchCases[0].patch)
	if err != nil {
		t.Fatal(err)
	}
	if len(edits) != 1 || edits[0].OldStr != "c\na\nx\nb\n" || edits[0].NewStr != "c\na\ny\nb\n" {
		t.Errorf("widened edit: %+v", edits)
	}
	// An insertion without context (git diff -U0): the lines around it make the old_str.
	snap := map[string]string{"a.py": "a\nb\nc\n"}
	edits, err = PatchEdits(snap, "--- a/a.py\n+++ b/a.py\n@@ -1,0 +2,1 @@\n+inserted\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := applyEdits(t, snap, edits)["a.py"]; got != "a\ninserted\nb\nc\n" || edits[0].OldStr != "a\n" {
		t.Errorf("insertion without context: %+v gives %q", edits, got)
	}
	edits, err = PatchEdits(patchCases[5].snapshot, patchCases[5].patch)
	if err != nil {
		t.Fatal(err)
	}
	if len(edits) != 2 || edits[1].Arguments() != `{"command":"create","path":"new/b.py","file_text":"x <y> & z\nw\n"}` {
		t.Errorf("create edit: %+v", edits)
	}
}

// Patches the editor cannot make, or that do not fit the snapshot, give no trajectory, with
// the reason.
func TestPatchEditsErrors(t *testing.T) {
	snap := map[string]string{"a.py": "a\nb\n", "b.py": "x\n"}
	for _, c := range []struct{ patch, want string }{
		{"", "empty"},
		{"diff --git a/b.py b/b.py\ndeleted file mode 100644\n--- a/b.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n", "cannot make"},
		{"--- a/b.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n", "deleted file"},
		{"diff --git a/b.py b/c.py\nsimilarity index 100%\nrename from b.py\nrename to c.py\n", "without hunks"},
		{"--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n a\n-c\n+d\n", "does not apply"},
		{"--- a/z.py\n+++ b/z.py\n@@ -1 +1 @@\n-a\n+b\n", "does not have"},
		{"--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n a\n", "header says"},
		{"--- a/a.py\n+++ b/a.py\n@@ -x +1 @@\n", "malformed hunk header"},
		{"--- /dev/null\n+++ b/a.py\n@@ -0,0 +1 @@\n+a\n", "already has"},
		{"--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n a\n*b\n", "neither context"},
	} {
		_, err := PatchEdits(snap, c.patch)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("patch %q: error %v, want one containing %q", c.patch, err, c.want)
		}
	}
}
