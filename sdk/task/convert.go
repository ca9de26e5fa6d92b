package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	taskv1 "github.com/rlhost/rlhost/sdk/gen/task/v1"
	"github.com/rlhost/rlhost/sdk/internal/configdecode"
)

// Conversions between the hand-written types of this package and the generated protocol
// messages. Free-form values travel as JSON text.

// DecodeJSON decodes a JSON value into JSON-like Go values, keeping integers as int64 (other
// numbers become float64). Empty input decodes to nil.
func DecodeJSON(text string) (any, error) {
	if text == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return normalize(v), nil
}

// DecodeObject decodes a JSON object (empty text gives an empty map).
func DecodeObject(text string) (map[string]any, error) {
	v, err := DecodeJSON(text)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON object, got %s", jsonKind(v))
	}
	return m, nil
}

// normalize turns json.Number values (from a decoder with UseNumber) into int64 or float64,
// recursively.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	case int:
		return int64(x)
	}
	return v
}

// jsonKind names the JSON kind of a decoded value ("a string", "an object").
var jsonKind = configdecode.Kind

// EncodeJSON encodes v as compact JSON; nil encodes as "".
func EncodeJSON(v any) string {
	if v == nil {
		return ""
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return string(bytes.TrimRight(b.Bytes(), "\n"))
}

func messagesToProto(ms []Message) []*taskv1.Message {
	out := make([]*taskv1.Message, len(ms))
	for i, m := range ms {
		out[i] = messageToProto(m)
	}
	return out
}

func messagesFromProto(ms []*taskv1.Message) []Message {
	if len(ms) == 0 {
		return nil
	}
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = messageFromProto(m)
	}
	return out
}

// messageToProto converts a Message.
func messageToProto(m Message) *taskv1.Message {
	p := &taskv1.Message{Role: m.Role, Content: m.Content, ToolCallId: m.ToolCallID, Name: m.Name}
	for _, c := range m.ToolCalls {
		p.ToolCalls = append(p.ToolCalls, &taskv1.ToolCall{Id: c.ID, Name: c.Name, ArgumentsJson: string(c.Arguments)})
	}
	return p
}

// messageFromProto converts a Message.
func messageFromProto(p *taskv1.Message) Message {
	m := Message{Role: p.GetRole(), Content: p.GetContent(), ToolCallID: p.GetToolCallId(), Name: p.GetName()}
	for _, c := range p.GetToolCalls() {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: json.RawMessage(c.GetArgumentsJson())})
	}
	return m
}

func toolsToProto(ts []ToolSpec) []*taskv1.Tool {
	out := make([]*taskv1.Tool, len(ts))
	for i, t := range ts {
		out[i] = &taskv1.Tool{Name: t.Name, Description: t.Description, ParametersJson: string(t.Parameters)}
	}
	return out
}

func toolsFromProto(ts []*taskv1.Tool) []ToolSpec {
	if len(ts) == 0 {
		return nil
	}
	out := make([]ToolSpec, len(ts))
	for i, t := range ts {
		out[i] = ToolSpec{Name: t.GetName(), Description: t.GetDescription(), Parameters: json.RawMessage(t.GetParametersJson())}
	}
	return out
}

// rowToProto converts a Row.
func rowToProto(r Row) *taskv1.Row {
	return &taskv1.Row{
		DataSource: r.DataSource,
		Prompt:     messagesToProto(r.Prompt),
		Ability:    r.Ability,
		RewardModel: &taskv1.RewardModel{
			Style:           r.RewardModel.Style,
			GroundTruthJson: EncodeJSON(r.RewardModel.GroundTruth),
		},
		ExtraInfoJson: EncodeJSON(r.ExtraInfo),
		AgentName:     r.AgentName,
	}
}

// rowFromProto converts a Row; malformed JSON fields are InvalidArgument errors naming the field.
func rowFromProto(p *taskv1.Row) (Row, error) {
	if p == nil {
		return Row{}, InvalidArgument("row is missing")
	}
	gt, err := DecodeJSON(p.GetRewardModel().GetGroundTruthJson())
	if err != nil {
		return Row{}, InvalidArgument("row.reward_model.ground_truth_json: %v", err)
	}
	extra, err := DecodeObject(p.GetExtraInfoJson())
	if err != nil {
		return Row{}, InvalidArgument("row.extra_info_json: %v", err)
	}
	return Row{
		DataSource:  p.GetDataSource(),
		Prompt:      messagesFromProto(p.GetPrompt()),
		Ability:     p.GetAbility(),
		RewardModel: RewardModel{Style: p.GetRewardModel().GetStyle(), GroundTruth: gt},
		ExtraInfo:   extra,
		AgentName:   p.GetAgentName(),
	}, nil
}

func infoToProto(i Info) *taskv1.InfoResponse {
	p := &taskv1.InfoResponse{
		Name: i.Name, Version: i.Version, Description: i.Description,
		ProtocolMinor: i.ProtocolMinor, Features: i.Features, Tools: toolsToProto(i.Tools),
		DefaultAgentLoop: i.DefaultAgentLoop, DataSources: i.DataSources,
		ConfigSchemaJson: string(i.ConfigSchema),
	}
	for _, f := range i.DefaultInputs {
		p.DefaultInputs = append(p.DefaultInputs, &taskv1.InputFile{Split: f.Split, Name: f.Name})
	}
	for _, smp := range i.Samples {
		ps := &taskv1.Sample{Split: smp.Split, RecordJson: EncodeJSON(smp.Record), ReferenceSolution: smp.ReferenceSolution}
		if smp.Row != nil {
			ps.Row = rowToProto(*smp.Row)
		}
		p.Samples = append(p.Samples, ps)
	}
	return p
}

func infoFromProto(p *taskv1.InfoResponse) (Info, error) {
	i := Info{
		Name: p.GetName(), Version: p.GetVersion(), Description: p.GetDescription(),
		ProtocolMinor: p.GetProtocolMinor(), Features: p.GetFeatures(), Tools: toolsFromProto(p.GetTools()),
		DefaultAgentLoop: p.GetDefaultAgentLoop(), DataSources: p.GetDataSources(),
		ConfigSchema: json.RawMessage(p.GetConfigSchemaJson()),
	}
	for _, f := range p.GetDefaultInputs() {
		i.DefaultInputs = append(i.DefaultInputs, InputFile{Split: f.GetSplit(), Name: f.GetName()})
	}
	for n, ps := range p.GetSamples() {
		smp := Sample{Split: ps.GetSplit(), ReferenceSolution: ps.GetReferenceSolution()}
		if ps.GetRecordJson() != "" {
			rec, err := DecodeObject(ps.GetRecordJson())
			if err != nil {
				return Info{}, fmt.Errorf("Info: sample %d: record_json: %w", n, err)
			}
			smp.Record = rec
		}
		if ps.Row != nil {
			row, err := rowFromProto(ps.Row)
			if err != nil {
				return Info{}, fmt.Errorf("Info: sample %d: %w", n, err)
			}
			smp.Row = &row
		}
		i.Samples = append(i.Samples, smp)
	}
	return i, nil
}

func toolResultsToProto(rs []ToolResult) []*taskv1.ToolResult {
	out := make([]*taskv1.ToolResult, len(rs))
	for i, r := range rs {
		out[i] = &taskv1.ToolResult{ToolCallId: r.ToolCallID, Name: r.Name, Text: r.Text, StepReward: r.StepReward,
			Error: r.Error, Metrics: r.Metrics, DurationNs: int64(r.Duration)}
	}
	return out
}

func toolResultsFromProto(rs []*taskv1.ToolResult) []ToolResult {
	if len(rs) == 0 {
		return nil
	}
	out := make([]ToolResult, len(rs))
	for i, r := range rs {
		out[i] = ToolResult{ToolCallID: r.GetToolCallId(), Name: r.GetName(), Text: r.GetText(), StepReward: r.GetStepReward(),
			Error: r.GetError(), Metrics: r.GetMetrics(), Duration: time.Duration(r.GetDurationNs())}
	}
	return out
}
