// Command rowsplugin is a task plugin for the tests of `rlhost preprocess`: each raw record
// of train.jsonl is the row it becomes ({"data_source", "prompt": [{"role", "content"}],
// "ground_truth", "extra_info"}; {"skip": REASON} skips it), so a test can hand the host any
// row, a bad one included. Every row's extra_info.configure_json is the config_json of the
// last Configure call, as the plugin received it on the wire.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	taskv1 "github.com/rlhost/rlhost/sdk/gen/task/v1"
	"github.com/rlhost/rlhost/sdk/plugin"
	"github.com/rlhost/rlhost/sdk/task"
	"google.golang.org/grpc"
)

var (
	mu         sync.Mutex
	configJSON = "(no Configure call)"
)

type rows struct{}

func (rows) Info(context.Context) (task.Info, error) {
	return task.Info{Name: "rows", Version: "0.0.1", DataSources: []string{"rows"},
		DefaultInputs: []task.InputFile{{Split: "train", Name: "train.jsonl"}}}, nil
}

func (rows) Configure(context.Context, map[string]any) error { return nil }

func (rows) Score(_ context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	return make([]task.ScoreResult, len(items)), nil
}

func (rows) Preprocess(_ context.Context, rec task.Record) (task.Row, error) {
	var in struct {
		Skip        string          `json:"skip"`
		DataSource  string          `json:"data_source"`
		Prompt      []task.Message  `json:"prompt"`
		GroundTruth json.RawMessage `json:"ground_truth"`
		ExtraInfo   map[string]any  `json:"extra_info"`
	}
	raw := []byte(rec.Raw)
	if rec.Data != nil {
		raw, _ = json.Marshal(rec.Data)
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return task.Row{}, fmt.Errorf("record %d: %w: %v", rec.Index, task.ErrInvalidArgument, err)
	}
	if in.Skip != "" {
		return task.Row{}, task.Skip(in.Skip)
	}
	gt, err := task.DecodeJSON(string(in.GroundTruth))
	if err != nil && len(in.GroundTruth) > 0 {
		return task.Row{}, fmt.Errorf("record %d: ground_truth: %w: %v", rec.Index, task.ErrInvalidArgument, err)
	}
	if in.ExtraInfo == nil {
		in.ExtraInfo = map[string]any{}
	}
	mu.Lock()
	in.ExtraInfo["configure_json"] = configJSON
	mu.Unlock()
	return task.Row{DataSource: in.DataSource, Prompt: in.Prompt, RewardModel: task.RewardModel{Style: "rule", GroundTruth: gt},
		ExtraInfo: in.ExtraInfo}, nil
}

// recorder is the SDK's server with Configure's request recorded first.
type recorder struct{ taskv1.TaskServer }

func (r recorder) Configure(ctx context.Context, req *taskv1.ConfigureRequest) (*taskv1.ConfigureResponse, error) {
	mu.Lock()
	configJSON = req.GetConfigJson()
	mu.Unlock()
	return r.TaskServer.Configure(ctx, req)
}

func main() {
	plugin.Serve(plugin.KindTask, plugin.TaskProtocolMajor, "rows", func(s *grpc.Server) {
		taskv1.RegisterTaskServer(s, recorder{task.NewServer(rows{})})
	}, plugin.ServeOptions{Logger: task.Logger()})
}
