package task

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	taskv1 "github.com/rlhost/rlhost/sdk/gen/task/v1"
	"github.com/rlhost/rlhost/sdk/plugin"
	"google.golang.org/grpc"
)

// Client calls a task plugin over a gRPC connection. It implements Task, Configurer,
// Preprocessor (record by record; PreprocessStream for bulk), Prompter and Environment, so
// the host uses a remote task exactly as an in-process one. Errors are gRPC status errors.
type Client struct {
	rpc taskv1.TaskClient
}

// NewClient returns a client on conn.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: taskv1.NewTaskClient(conn)}
}

// Info calls Info.
func (c *Client) Info(ctx context.Context) (Info, error) {
	resp, err := c.rpc.Info(ctx, &taskv1.InfoRequest{HostVersion: plugin.HostVersion})
	if err != nil {
		return Info{}, err
	}
	return infoFromProto(resp)
}

// Configure calls Configure with the config encoded as JSON.
func (c *Client) Configure(ctx context.Context, config map[string]any) error {
	return c.ConfigureWithHost(ctx, config, nil)
}

// ConfigureWithHost is Configure that also tells the plugin where the host's Host service
// listens (nil: nowhere). No configuration (nil or empty) is sent as {}, never null, so that
// a plugin always receives an object.
func (c *Client) ConfigureWithHost(ctx context.Context, config map[string]any, hs *HostService) error {
	text := "{}"
	if len(config) > 0 {
		if text = EncodeJSON(config); text == "" {
			_, err := json.Marshal(config)
			return fmt.Errorf("%w: Configure: the config cannot be encoded as JSON: %v", ErrInvalidArgument, err)
		}
	}
	req := &taskv1.ConfigureRequest{ConfigJson: text}
	if hs != nil {
		req.HostService = &taskv1.HostService{Address: hs.Address, Token: hs.Token, Features: hs.Features}
	}
	_, err := c.rpc.Configure(ctx, req)
	return err
}

// Preprocess sends one record.
func (c *Client) Preprocess(ctx context.Context, rec Record) (Row, error) {
	var row Row
	var skip error
	err := c.PreprocessStream(ctx, func(yield func(Record) error) error { return yield(rec) },
		func(_ int64, r Row, reason string) error {
			row = r
			if reason != "" {
				skip = Skip(reason)
			}
			return nil
		})
	if err != nil {
		return Row{}, err
	}
	return row, skip
}

// PreprocessStream streams records from produce to the plugin and hands each answer to
// consume: a row, or a non-empty skip reason. Answers may come in any order; the index says
// which record each belongs to.
func (c *Client) PreprocessStream(ctx context.Context, produce func(yield func(Record) error) error,
	consume func(index int64, row Row, skipReason string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Preprocess(ctx)
	if err != nil {
		return err
	}
	sendErr := make(chan error, 1)
	go func() {
		err := produce(func(r Record) error {
			text := r.Raw
			if r.Data != nil || text == "" {
				text = EncodeJSON(r.Data)
			}
			if text == "" {
				text = "{}"
			}
			return stream.Send(&taskv1.PreprocessRequest{Index: r.Index, Split: r.Split, RecordJson: text})
		})
		if cerr := stream.CloseSend(); err == nil {
			err = cerr
		}
		sendErr <- err
	}()
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		var row Row
		if resp.GetSkipReason() == "" {
			if row, err = rowFromProto(resp.GetRow()); err != nil {
				return fmt.Errorf("record %d: %w", resp.GetIndex(), err)
			}
		}
		if err := consume(resp.GetIndex(), row, resp.GetSkipReason()); err != nil {
			return err
		}
	}
	return <-sendErr
}

// Prompt calls Prompt.
func (c *Client) Prompt(ctx context.Context, row Row) (Prompt, error) {
	resp, err := c.rpc.Prompt(ctx, &taskv1.PromptRequest{Row: rowToProto(row)})
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{Messages: messagesFromProto(resp.GetMessages()), Tools: toolsFromProto(resp.GetTools()),
		MaxTokens: int(resp.GetHints().GetMaxTokens()), Stop: resp.GetHints().GetStop()}, nil
}

// Start calls Start.
func (c *Client) Start(ctx context.Context, req StartRequest) (StartResult, error) {
	resp, err := c.rpc.Start(ctx, &taskv1.StartRequest{Row: rowToProto(req.Row), TrajectoryId: req.TrajectoryID,
		Step: req.Step, RolloutN: int32(req.RolloutN), Validate: req.Validate,
		EndpointBaseUrl: req.EndpointBaseURL, EndpointApiKey: req.EndpointAPIKey})
	if err != nil {
		return StartResult{}, err
	}
	return StartResult{InstanceID: resp.GetInstanceId(), Messages: messagesFromProto(resp.GetMessages()),
		Lease: time.Duration(resp.GetLeaseSeconds()) * time.Second}, nil
}

// Obs calls Obs.
func (c *Client) Obs(ctx context.Context, req ObsRequest) (ObsResult, error) {
	resp, err := c.rpc.Obs(ctx, &taskv1.ObsRequest{InstanceId: req.InstanceID, Assistant: messageToProto(req.Assistant),
		Kind: taskv1.ObsKind(req.Kind), Turn: int32(req.Turn), History: messagesToProto(req.History)})
	if err != nil {
		return ObsResult{}, err
	}
	return ObsResult{Messages: messagesFromProto(resp.GetMessages()), ToolResults: toolResultsFromProto(resp.GetToolResults()),
		TurnReward: resp.GetTurnReward(), Done: resp.GetDone(), Metrics: resp.GetMetrics()}, nil
}

// End calls End.
func (c *Client) End(ctx context.Context, req EndRequest) (EndResult, error) {
	resp, err := c.rpc.End(ctx, &taskv1.EndRequest{InstanceId: req.InstanceID, Aborted: req.Aborted})
	if err != nil {
		return EndResult{}, err
	}
	extra, err := DecodeObject(resp.GetExtraJson())
	if err != nil {
		return EndResult{}, fmt.Errorf("End: extra_json from the plugin: %w", err)
	}
	return EndResult{HasReward: resp.GetHasReward(), Reward: resp.GetReward(), RewardComponents: resp.GetRewardComponents(),
		Metrics: resp.GetMetrics(), Extra: extra, Messages: messagesFromProto(resp.GetMessages())}, nil
}

// Score calls Score.
func (c *Client) Score(ctx context.Context, items []ScoreItem) ([]ScoreResult, error) {
	req := &taskv1.ScoreRequest{Items: make([]*taskv1.ScoreItem, len(items))}
	for i, it := range items {
		req.Items[i] = &taskv1.ScoreItem{DataSource: it.DataSource, SolutionStr: it.Solution,
			GroundTruthJson: EncodeJSON(it.GroundTruth), ExtraInfoJson: EncodeJSON(it.ExtraInfo)}
	}
	resp, err := c.rpc.Score(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(resp.GetResults()) != len(items) {
		return nil, fmt.Errorf("Score: the plugin returned %d results for %d items", len(resp.GetResults()), len(items))
	}
	out := make([]ScoreResult, len(items))
	for i, r := range resp.GetResults() {
		extra, err := DecodeObject(r.GetExtraJson())
		if err != nil {
			return nil, fmt.Errorf("Score: item %d: extra_json from the plugin: %w", i, err)
		}
		out[i] = ScoreResult{Score: r.GetScore(), Components: r.GetComponents(), Extra: extra, Err: r.GetError()}
	}
	return out, nil
}
