package task

import (
	"encoding/json"
	"time"
)

// Message is one chat message.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is one call the model asked for. Arguments is the JSON object the model wrote.
type ToolCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool as an OpenAI function schema; Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// OpenAI returns the spec in the form chat templates and OpenAI clients take:
// {"type": "function", "function": {...}}, keys in that order (the order Python's dict
// literal gives, which templates print with tojson).
func (s ToolSpec) OpenAI() json.RawMessage {
	b, _ := json.Marshal(struct {
		Type     string   `json:"type"`
		Function ToolSpec `json:"function"`
	}{"function", s})
	return b
}

// RewardModel is the reward_model column: Style ("rule", ...) and the ground truth, any JSON value.
type RewardModel struct {
	Style       string `json:"style"`
	GroundTruth any    `json:"ground_truth"`
}

// Row is one dataset row in the veRL parquet schema. ExtraInfo values are JSON-like: string,
// bool, int64, float64, []any, map[string]any or nil.
type Row struct {
	DataSource  string         `json:"data_source"`
	Prompt      []Message      `json:"prompt"`
	Ability     string         `json:"ability"`
	RewardModel RewardModel    `json:"reward_model"`
	ExtraInfo   map[string]any `json:"extra_info"`
	AgentName   string         `json:"agent_name,omitempty"`
}

// Index returns extra_info.index, the row's position in its source split, or -1.
func (r Row) Index() int64 {
	if v, ok := r.ExtraInfo["index"]; ok {
		switch n := v.(type) {
		case int64:
			return n
		case float64:
			return int64(n)
		}
	}
	return -1
}

// ToolsKwargs returns extra_info.tools_kwargs[tool][key] (for example "create_kwargs") as an
// object, or nil.
func (r Row) ToolsKwargs(tool, key string) map[string]any {
	tk, _ := r.ExtraInfo["tools_kwargs"].(map[string]any)
	t, _ := tk[tool].(map[string]any)
	m, _ := t[key].(map[string]any)
	return m
}

// Input files and features.
type InputFile struct {
	Split string // "train", "test"
	Name  string // file inside the input directory, e.g. "train.jsonl"
}

// Feature names a plugin may declare in Info. Serve adds the ones it can see from the
// implementation's type (configure, preprocess, prompt, environment, score).
const (
	FeatureConfigure       = "configure"
	FeaturePreprocess      = "preprocess"
	FeaturePrompt          = "prompt"
	FeatureEnvironment     = "environment"
	FeatureInteraction     = "interaction"
	FeatureScore           = "score"
	FeatureExternalEpisode = "external_episode"
	// FeatureWeakIsolation: the plugin's environment cannot keep the machine's files from
	// the policy (a sandbox without a file system view of its own), so a trajectory may read
	// the dataset's hidden answers. The host refuses to train such a task unless
	// task.allow_weak_isolation is set.
	FeatureWeakIsolation = "weak_isolation"
)

// Agent loop names (veRL's).
const (
	SingleTurnAgent = "single_turn_agent"
	ToolAgent       = "tool_agent"
)

// Info describes a task plugin.
type Info struct {
	Name             string
	Version          string
	Description      string
	Features         []string
	Tools            []ToolSpec
	DefaultAgentLoop string
	DataSources      []string
	DefaultInputs    []InputFile
	ConfigSchema     json.RawMessage
	// Samples are a few inputs the plugin is known to handle; `rlhost conformance` runs its
	// round trips on them. Give at least one.
	Samples       []Sample
	ProtocolMinor uint32 // set by the SDK
}

// Sample is an example input: a raw record (for Preprocess) or a ready Row, and a response
// that Score must rate above an empty one.
type Sample struct {
	Split             string
	Record            map[string]any
	Row               *Row
	ReferenceSolution string
}

// Has reports whether the plugin declared feature f.
func (i Info) Has(f string) bool {
	for _, x := range i.Features {
		if x == f {
			return true
		}
	}
	return false
}

// Record is one raw input record for Preprocess.
type Record struct {
	Index int64
	Split string
	Data  map[string]any // the record as a JSON object
	// Raw, when Data is nil, is the record's JSON object text, sent as is (a host reading
	// JSONL saves decoding and re-encoding every line).
	Raw string
}

// Prompt is what the policy sees for a row.
type Prompt struct {
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int
	Stop      []string
}

// StartRequest begins a trajectory.
type StartRequest struct {
	Row          Row
	TrajectoryID string
	Step         int64
	RolloutN     int
	Validate     bool
	// For external_episode tasks: the policy, served for this trajectory only.
	EndpointBaseURL string
	EndpointAPIKey  string
}

// StartResult is Start's answer.
type StartResult struct {
	InstanceID string
	Messages   []Message
	Lease      time.Duration
}

// ObsKind says what the host wants from Obs.
type ObsKind int

const (
	ObsTools       ObsKind = 1 // run the tool calls of the assistant turn
	ObsInteraction ObsKind = 2 // answer as the user simulator
)

// ObsRequest carries one assistant turn.
type ObsRequest struct {
	InstanceID string
	Assistant  Message
	Kind       ObsKind
	Turn       int
	History    []Message
}

// ToolResult is the outcome of one tool call.
type ToolResult struct {
	ToolCallID string
	Name       string
	Text       string
	StepReward float64
	Error      bool
	Metrics    map[string]float64
	Duration   time.Duration
}

// ObsResult is Obs's answer.
type ObsResult struct {
	Messages    []Message
	ToolResults []ToolResult
	TurnReward  float64
	Done        bool
	Metrics     map[string]float64
}

// EndRequest finishes a trajectory.
type EndRequest struct {
	InstanceID string
	Aborted    bool
}

// EndResult is End's answer. HasReward false means the reward comes from Score.
type EndResult struct {
	HasReward        bool
	Reward           float64
	RewardComponents map[string]float64
	Metrics          map[string]float64
	Extra            map[string]any
	Messages         []Message
}

// ScoreItem is one response to score.
type ScoreItem struct {
	DataSource  string
	Solution    string
	GroundTruth any
	ExtraInfo   map[string]any
}

// ScoreResult is the score of one item. Err non-empty means it could not be scored.
type ScoreResult struct {
	Score      float64
	Components map[string]float64
	Extra      map[string]any
	Err        string
}
