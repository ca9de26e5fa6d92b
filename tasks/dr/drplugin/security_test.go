package drplugin

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/tasks/dr/retriever"
)

// What the model can reach through search and open is the corpus and nothing else
// (docs/security.md): the QA files cannot be served as a corpus, a QA record's id is no
// document, route-like and path-like ids are unknown documents, and searching every question's
// own text returns documents of the corpus only, none holding a QA record or its answers list.
func TestToolsReachOnlyTheCorpus(t *testing.T) {
	for _, qa := range []string{"../testdata/train.jsonl", "../testdata/test.jsonl"} {
		if _, err := retriever.LoadCorpus(qa); err == nil || !strings.Contains(err.Error(), `neither "text" nor "contents"`) {
			t.Errorf("LoadCorpus(%s) = %v; a QA file must not load as a corpus", qa, err)
		}
	}
	tk := New()
	if err := tk.Configure(context.Background(), map[string]any{"retriever_url": sampleRetriever(t), "max_doc_chars": int64(4000)}); err != nil {
		t.Fatal(err)
	}
	var questions, ids []string
	for _, qa := range []string{"../testdata/train.jsonl", "../testdata/test.jsonl"} {
		f, err := os.Open(qa)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r struct{ ID, Question string }
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			questions, ids = append(questions, r.Question), append(ids, r.ID)
		}
		f.Close()
	}
	if len(questions) == 0 {
		t.Fatal("no questions read")
	}
	var calls []string
	for _, q := range questions {
		b, _ := json.Marshal(map[string]any{"query": q, "topk": 10})
		calls = append(calls, "search\x00"+string(b))
	}
	for _, id := range append(ids, "../health", "..%2Fhealth", "/retrieve", "?queries=x", "train.jsonl", "../../../etc/passwd") {
		b, _ := json.Marshal(map[string]any{"doc_id": id})
		calls = append(calls, "open\x00"+string(b))
	}
	for _, c := range calls {
		name, args, _ := strings.Cut(c, "\x00")
		r := obs(t, tk, call(name, args))[0]
		switch name {
		case "search":
			if r.Error {
				t.Fatalf("search %s: %s", args, r.Text)
			}
			for _, bad := range []string{"golden_answers", "Which word means", "hypernym) for the word", "evidence"} {
				if strings.Contains(r.Text, bad) {
					t.Errorf("search %s returned text holding %q:\n%s", args, bad, r.Text)
				}
			}
		case "open":
			if !r.Error || !strings.Contains(r.Text, "unknown document id") {
				t.Errorf("open %s: error=%v %q, want an unknown document", args, r.Error, r.Text)
			}
		}
	}
}
