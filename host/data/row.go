package data

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Message is one chat message of a prompt.
type Message struct {
	Role, Content string
}

// RewardModel is the reward_model column.
type RewardModel struct {
	Style       string
	GroundTruth any
}

// Row is one dataset row.
type Row struct {
	DataSource  string
	Prompt      []Message
	Ability     string
	RewardModel RewardModel
	// ExtraInfo is JSON-like: string, bool, int64, float64, []any, map[string]any, nil.
	// It is nil when the column is absent or the row's value is null.
	ExtraInfo map[string]any
	// AgentName is "" when the column is absent.
	AgentName string
	// Extra holds any other columns, by column name.
	Extra map[string]any
}

// Column names of the schema.
const (
	ColDataSource  = "data_source"
	ColPrompt      = "prompt"
	ColAbility     = "ability"
	ColRewardModel = "reward_model"
	ColExtraInfo   = "extra_info"
	ColAgentName   = "agent_name"
)

// requiredColumns must be present in every file.
var requiredColumns = []string{ColDataSource, ColPrompt, ColRewardModel}

// knownColumns are the columns Row has fields for.
var knownColumns = map[string]bool{
	ColDataSource: true, ColPrompt: true, ColAbility: true, ColRewardModel: true,
	ColExtraInfo: true, ColAgentName: true,
}

// ErrNotParquet is returned (wrapped) for files that are not parquet.
var ErrNotParquet = errors.New("data: not a parquet file")

// Error is a problem with a dataset file. Row is -1 when it is not about one row, Column
// is "" when it is not about one column.
type Error struct {
	File   string
	Row    int
	Column string
	Msg    string
	Err    error
}

func (e *Error) Error() string {
	parts := []string{"data"}
	if e.File != "" {
		parts = append(parts, e.File)
	}
	if e.Row >= 0 {
		parts = append(parts, fmt.Sprintf("row %d", e.Row))
	}
	if e.Column != "" {
		parts = append(parts, "column "+e.Column)
	}
	var b strings.Builder
	b.WriteString(strings.Join(append(parts, e.Msg), ": "))
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// didYouMean returns the column of have closest to want, or "".
func didYouMean(want string, have []string) string {
	best, bestD := "", 1<<30
	for _, h := range have {
		if knownColumns[h] {
			continue
		}
		d := editDistance(strings.ToLower(want), strings.ToLower(h))
		if strings.Contains(strings.ToLower(h), want) || strings.Contains(want, strings.ToLower(h)) {
			d = min(d, 2)
		}
		if d < bestD || (d == bestD && h < best) {
			best, bestD = h, d
		}
	}
	if bestD <= max(2, len(want)/3) {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
