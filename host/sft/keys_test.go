package sft

import (
	"os"
	"strings"
	"testing"
)

// TestDocsKeys: docs/sft.md lists every key with its default (KeysMarkdown); run with
// UPDATE_DOCS=1 to rewrite the table.
func TestDocsKeys(t *testing.T) {
	const path = "../../docs/sft.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Keys\n")
	if i < 0 {
		t.Fatal("docs/sft.md has no ## Keys section")
	}
	want := doc[:i] + "## Keys\n\n" + KeysMarkdown()
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Error("docs/sft.md's key table is out of date: run UPDATE_DOCS=1 go test -run TestDocsKeys ./host/sft/")
	}
}
