// Package drplugin is the dr (deep research) task as an rlhost plugin: the model answers a
// question by calling search(query, topk) and open(doc_id) against an rlhost-retriever, and
// writes its answer in <answer>...</answer>; Score rates it by exact match after answer
// normalisation, with F1 and the number of searches as components. Command rlhost-task-dr
// serves it. See docs/dr.md.
package drplugin

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rlhost/rlhost/sdk/task"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Names of the task.
const (
	DefaultDataSource = "dr"
	Ability           = "fact-reasoning"
	SearchTool        = "search"
	OpenTool          = "open"
)

// Config is the task section of the run config.
type Config struct {
	RetrieverURL  string        `config:"retriever_url"`                             // base URL of rlhost-retriever
	Timeout       time.Duration `config:"timeout_s"`                                 // of one retriever request; past it the tool call is an error the model sees
	TopK          int           `config:"topk" want:"a positive integer"`            // topk of a search call that gives none
	MaxTopK       int           `config:"max_topk" want:"a positive integer"`        // largest topk a search call may ask for
	MaxQueryChars int           `config:"max_query_chars" want:"a positive integer"` // longest query a search call may send
	MaxDocChars   int           `config:"max_doc_chars" want:"a positive integer"`   // a document's text in search results is cut to this many characters
	MaxOpenChars  int           `config:"max_open_chars" want:"a positive integer"`  // and in open results to this many
	FormatScore   float64       `config:"format_score"`                              // the score of a tagged but wrong answer (Search-R1's format_score)
	// Retriever, when Corpus is set and nothing answers at RetrieverURL, is started by the
	// plugin as a child process: Binary -corpus Corpus -index Index -addr host:port.
	RetrieverBin string `config:"retriever_bin"`
	Corpus       string `config:"corpus"`
	Index        string `config:"index"`
}

// DefaultConfig is the default task config.
func DefaultConfig() Config {
	return Config{RetrieverURL: "http://127.0.0.1:8765", Timeout: 5 * time.Second, TopK: 3, MaxTopK: 10,
		MaxQueryChars: 1000, MaxDocChars: 600, MaxOpenChars: 4000, RetrieverBin: "rlhost-retriever"}
}

// Task is the dr task.
type Task struct {
	*task.ToolEnv
	mu     sync.RWMutex
	cfg    Config
	client *http.Client
	child  *child
}

// New returns the task with its default config.
func New() *Task {
	t := &Task{cfg: DefaultConfig(), client: &http.Client{}}
	t.ToolEnv = &task.ToolEnv{Tools: []task.Tool{searchTool{t}, openTool{t}}, Lease: 2 * time.Hour}
	return t
}

func (t *Task) config() Config {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.cfg
}

var sampleRecord = map[string]any{
	"id":             "train_0",
	"question":       `Which word means "a member of the genus Canis (probably descended from the common wolf) that has been domesticated by man since prehistoric times; occurs in many breeds"?`,
	"golden_answers": []any{"dog", "domestic dog", "Canis familiaris"},
	"data_source":    "wordnet_dr",
	"metadata":       map[string]any{"type": "definition", "hops": int64(1), "evidence": []any{[]any{"n02084071"}}},
}

// Info describes the plugin.
func (t *Task) Info(context.Context) (task.Info, error) {
	return task.Info{
		Name:             "dr",
		Version:          Version,
		Description:      "deep research: multi-hop questions answered with search/open over a local BM25 retriever, rewarded by exact match",
		Tools:            t.ToolSpecs(),
		DefaultAgentLoop: task.ToolAgent,
		DataSources:      []string{"wordnet_dr_hop1", "wordnet_dr_hop2", "wordnet_dr_hop3", DefaultDataSource},
		DefaultInputs:    []task.InputFile{{Split: "train", Name: "train.jsonl"}, {Split: "test", Name: "test.jsonl"}},
		ConfigSchema: []byte(`{"type":"object","properties":{` +
			`"retriever_url":{"type":"string","description":"base URL of rlhost-retriever (default http://127.0.0.1:8765)"},` +
			`"timeout_s":{"type":"number","description":"time limit of one retriever request, seconds (default 5)"},` +
			`"topk":{"type":"integer","description":"topk of a search call that gives none (default 3)"},` +
			`"max_topk":{"type":"integer","description":"largest topk a search call may ask for (default 10)"},` +
			`"max_query_chars":{"type":"integer","description":"longest search query (default 1000)"},` +
			`"max_doc_chars":{"type":"integer","description":"document text shown per search hit (default 600)"},` +
			`"max_open_chars":{"type":"integer","description":"document text shown by open (default 4000)"},` +
			`"format_score":{"type":"number","description":"score of an answer in <answer> tags that does not match (default 0)"},` +
			`"retriever_bin":{"type":"string","description":"retriever binary started when corpus is set and none answers (default rlhost-retriever on PATH or beside the plugin)"},` +
			`"corpus":{"type":"string","description":"corpus JSONL: when set and no retriever answers at retriever_url, the plugin starts one"},` +
			`"index":{"type":"string","description":"index directory of the retriever the plugin starts"}}}`),
		Samples: []task.Sample{{Split: "train", Record: sampleRecord, ReferenceSolution: "<answer>dog</answer>"}},
	}, nil
}

// Configure applies the task config (the keys of Config's tags); with corpus set it makes
// sure a retriever answers.
func (t *Task) Configure(ctx context.Context, raw map[string]any) error {
	cfg := DefaultConfig()
	if err := task.DecodeConfig("dr", raw, &cfg); err != nil {
		return err
	}
	cfg.RetrieverURL = strings.TrimRight(cfg.RetrieverURL, "/")
	if !strings.HasPrefix(cfg.RetrieverURL, "http://") && !strings.HasPrefix(cfg.RetrieverURL, "https://") {
		return task.InvalidArgument("dr config key %q: want an http:// or https:// URL, got %q", "retriever_url", cfg.RetrieverURL)
	}
	if cfg.Timeout <= 0 {
		return task.InvalidArgument("dr config key %q: want a positive number of seconds, got %v", "timeout_s", cfg.Timeout.Seconds())
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"topk", cfg.TopK}, {"max_topk", cfg.MaxTopK}, {"max_query_chars", cfg.MaxQueryChars},
		{"max_doc_chars", cfg.MaxDocChars}, {"max_open_chars", cfg.MaxOpenChars}} {
		if n.v < 1 {
			return task.InvalidArgument("dr config key %q: want a positive integer, got %d", n.key, n.v)
		}
	}
	if cfg.TopK > cfg.MaxTopK {
		return task.InvalidArgument("dr config: topk %d is over max_topk %d", cfg.TopK, cfg.MaxTopK)
	}
	t.mu.Lock()
	t.cfg = cfg
	t.mu.Unlock()
	if cfg.Corpus != "" {
		return t.ensureRetriever(ctx, cfg)
	}
	return nil
}
