package task

import (
	"context"
	"errors"
	"fmt"
	"github.com/rlhost/rlhost/sdk/plugin"
	"io"
	"sort"
	"sync"
	"time"

	taskv1 "github.com/rlhost/rlhost/sdk/gen/task/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// protocolMinor is the minor revision of task.v1 this SDK implements (1: the Host service and
// ConfigureRequest.host_service).
const protocolMinor = 1

// NewServer wraps a Task implementation as the gRPC service. Serve uses it; tests can register
// it on an in-memory connection.
func NewServer(impl Task) taskv1.TaskServer { return &server{impl: impl} }

// Register registers impl's service on s.
func Register(s *grpc.Server, impl Task) { taskv1.RegisterTaskServer(s, NewServer(impl)) }

type server struct {
	taskv1.UnimplementedTaskServer
	impl Task

	hostMu sync.Mutex
	host   *Host // the last Configure's Host service connection (HostUser tasks)
}

// taskErrorCodes are the codes of the task SDK's sentinel errors.
var taskErrorCodes = []plugin.ErrorCode{
	{Err: ErrInvalidArgument, Code: codes.InvalidArgument},
	{Err: ErrNotFound, Code: codes.NotFound},
	{Err: ErrNotConfigured, Code: codes.FailedPrecondition},
	{Err: context.DeadlineExceeded, Code: codes.DeadlineExceeded},
	{Err: context.Canceled, Code: codes.Canceled},
}

// toStatus turns an implementation's error into a gRPC status a user can act on.
func toStatus(call string, err error) error { return plugin.Status(call, err, taskErrorCodes...) }

// features returns the declared features plus those implied by the implementation's type.
func features(impl Task, declared []string) []string {
	set := map[string]bool{FeatureScore: true}
	for _, f := range declared {
		set[f] = true
	}
	if _, ok := impl.(Configurer); ok {
		set[FeatureConfigure] = true
	}
	if _, ok := impl.(Preprocessor); ok {
		set[FeaturePreprocess] = true
	}
	if _, ok := impl.(Prompter); ok {
		set[FeaturePrompt] = true
	}
	if _, ok := impl.(Environment); ok {
		set[FeatureEnvironment] = true
	}
	if _, ok := impl.(HostUser); ok {
		set[FeatureHostService] = true
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

func (s *server) info(ctx context.Context) (Info, error) {
	info, err := s.impl.Info(ctx)
	if err != nil {
		return Info{}, err
	}
	info.Features = features(s.impl, info.Features)
	info.ProtocolMinor = protocolMinor
	return info, nil
}

func (s *server) Info(ctx context.Context, _ *taskv1.InfoRequest) (*taskv1.InfoResponse, error) {
	info, err := s.info(ctx)
	if err != nil {
		return nil, toStatus("Info", err)
	}
	return infoToProto(info), nil
}

func (s *server) Configure(ctx context.Context, req *taskv1.ConfigureRequest) (*taskv1.ConfigureResponse, error) {
	cfg, err := DecodeObject(req.GetConfigJson())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "Configure: config_json: %v", err)
	}
	if hu, ok := s.impl.(HostUser); ok {
		hs := req.GetHostService()
		h, err := DialHost(HostService{Address: hs.GetAddress(), Token: hs.GetToken(), Features: hs.GetFeatures()})
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "Configure: host_service: %v", err)
		}
		s.hostMu.Lock()
		old := s.host
		s.host = h
		s.hostMu.Unlock()
		if old != nil {
			old.Close()
		}
		hu.UseHost(h)
	}
	c, ok := s.impl.(Configurer)
	if !ok {
		if len(cfg) > 0 {
			keys := make([]string, 0, len(cfg))
			for k := range cfg {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return nil, status.Errorf(codes.InvalidArgument, "Configure: this task takes no configuration, got keys %v", keys)
		}
		return &taskv1.ConfigureResponse{}, nil
	}
	if err := c.Configure(ctx, cfg); err != nil {
		if !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
		return nil, toStatus("Configure", err)
	}
	return &taskv1.ConfigureResponse{}, nil
}

func (s *server) Preprocess(stream grpc.BidiStreamingServer[taskv1.PreprocessRequest, taskv1.PreprocessResponse]) error {
	p, ok := s.impl.(Preprocessor)
	if !ok {
		return status.Error(codes.Unimplemented, "Preprocess: this task has no preprocessor")
	}
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		resp := &taskv1.PreprocessResponse{Index: req.GetIndex()}
		data, err := DecodeObject(req.GetRecordJson())
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "Preprocess: record %d of split %q: %v", req.GetIndex(), req.GetSplit(), err)
		}
		row, err := p.Preprocess(ctx, Record{Index: req.GetIndex(), Split: req.GetSplit(), Data: data})
		var skip *SkipError
		switch {
		case errors.As(err, &skip):
			resp.SkipReason = skip.Reason
			if resp.SkipReason == "" {
				resp.SkipReason = "skipped"
			}
		case err != nil:
			return toStatus(fmt.Sprintf("Preprocess: record %d of split %q", req.GetIndex(), req.GetSplit()), err)
		default:
			resp.Row = rowToProto(row)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (s *server) Prompt(ctx context.Context, req *taskv1.PromptRequest) (*taskv1.PromptResponse, error) {
	row, err := rowFromProto(req.GetRow())
	if err != nil {
		return nil, toStatus("Prompt", err)
	}
	var pr Prompt
	if p, ok := s.impl.(Prompter); ok {
		pr, err = p.Prompt(ctx, row)
		if err != nil {
			return nil, toStatus("Prompt", err)
		}
	} else {
		info, err := s.impl.Info(ctx)
		if err != nil {
			return nil, toStatus("Prompt", err)
		}
		pr = Prompt{Messages: row.Prompt, Tools: info.Tools}
	}
	return &taskv1.PromptResponse{
		Messages: messagesToProto(pr.Messages),
		Tools:    toolsToProto(pr.Tools),
		Hints:    &taskv1.SamplingHints{MaxTokens: int32(pr.MaxTokens), Stop: pr.Stop},
	}, nil
}

func (s *server) env() (Environment, error) {
	e, ok := s.impl.(Environment)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this task has no environment (Start/Obs/End); use single_turn_agent")
	}
	return e, nil
}

func (s *server) Start(ctx context.Context, req *taskv1.StartRequest) (*taskv1.StartResponse, error) {
	e, err := s.env()
	if err != nil {
		return nil, err
	}
	row, err := rowFromProto(req.GetRow())
	if err != nil {
		return nil, toStatus("Start", err)
	}
	res, err := e.Start(ctx, StartRequest{
		Row: row, TrajectoryID: req.GetTrajectoryId(), Step: req.GetStep(), RolloutN: int(req.GetRolloutN()),
		Validate: req.GetValidate(), EndpointBaseURL: req.GetEndpointBaseUrl(), EndpointAPIKey: req.GetEndpointApiKey(),
	})
	if err != nil {
		return nil, toStatus("Start", err)
	}
	return &taskv1.StartResponse{InstanceId: res.InstanceID, Messages: messagesToProto(res.Messages),
		LeaseSeconds: int64(res.Lease / time.Second)}, nil
}

func (s *server) Obs(ctx context.Context, req *taskv1.ObsRequest) (*taskv1.ObsResponse, error) {
	e, err := s.env()
	if err != nil {
		return nil, err
	}
	if req.GetInstanceId() == "" {
		return nil, status.Error(codes.InvalidArgument, "Obs: instance_id is empty")
	}
	kind := ObsKind(req.GetKind())
	if kind != ObsTools && kind != ObsInteraction {
		return nil, status.Errorf(codes.InvalidArgument, "Obs: kind %v is not tools or interaction", req.GetKind())
	}
	res, err := e.Obs(ctx, ObsRequest{InstanceID: req.GetInstanceId(), Assistant: messageFromProto(req.GetAssistant()),
		Kind: kind, Turn: int(req.GetTurn()), History: messagesFromProto(req.GetHistory())})
	if err != nil {
		return nil, toStatus("Obs", err)
	}
	return &taskv1.ObsResponse{Messages: messagesToProto(res.Messages), ToolResults: toolResultsToProto(res.ToolResults),
		TurnReward: res.TurnReward, Done: res.Done, Metrics: res.Metrics}, nil
}

func (s *server) End(ctx context.Context, req *taskv1.EndRequest) (*taskv1.EndResponse, error) {
	e, err := s.env()
	if err != nil {
		return nil, err
	}
	if req.GetInstanceId() == "" {
		return nil, status.Error(codes.InvalidArgument, "End: instance_id is empty")
	}
	res, err := e.End(ctx, EndRequest{InstanceID: req.GetInstanceId(), Aborted: req.GetAborted()})
	if err != nil {
		return nil, toStatus("End", err)
	}
	return &taskv1.EndResponse{HasReward: res.HasReward, Reward: res.Reward, RewardComponents: res.RewardComponents,
		Metrics: res.Metrics, ExtraJson: EncodeJSON(res.Extra), Messages: messagesToProto(res.Messages)}, nil
}

func (s *server) Score(ctx context.Context, req *taskv1.ScoreRequest) (*taskv1.ScoreResponse, error) {
	items := make([]ScoreItem, len(req.GetItems()))
	for i, it := range req.GetItems() {
		gt, err := DecodeJSON(it.GetGroundTruthJson())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "Score: item %d: ground_truth_json: %v", i, err)
		}
		extra, err := DecodeObject(it.GetExtraInfoJson())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "Score: item %d: extra_info_json: %v", i, err)
		}
		items[i] = ScoreItem{DataSource: it.GetDataSource(), Solution: it.GetSolutionStr(), GroundTruth: gt, ExtraInfo: extra}
	}
	res, err := s.impl.Score(ctx, items)
	if err != nil {
		return nil, toStatus("Score", err)
	}
	if len(res) != len(items) {
		return nil, status.Errorf(codes.Internal, "Score: the task returned %d results for %d items", len(res), len(items))
	}
	out := &taskv1.ScoreResponse{Results: make([]*taskv1.ScoreResult, len(res))}
	for i, r := range res {
		out.Results[i] = &taskv1.ScoreResult{Score: r.Score, Components: r.Components, ExtraJson: EncodeJSON(r.Extra), Error: r.Err}
	}
	return out, nil
}
