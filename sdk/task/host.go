package task

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"

	taskv1 "github.com/rlhost/rlhost/sdk/gen/task/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// FeatureHostService is declared by a plugin that uses the host's services (a HostUser): the
// host then calls Configure with the Host service's address even without a task config.
const FeatureHostService = "host_service"

// HostFeatureJudge is the Host call Judge (HostService.Features).
const HostFeatureJudge = "judge"

// HostService is where a plugin reaches the host's Host service: a gRPC target (a Unix socket
// in the run's private temporary directory), the token every call carries, and the calls the
// host offers.
type HostService struct {
	Address  string
	Token    string
	Features []string
}

// HostUser is implemented by a task that calls back into the host (an LLM judge, say).
// UseHost is called before Configure, and again after every restart of the plugin; h is
// never nil, but h.Has tells whether a call is offered.
type HostUser interface {
	UseHost(h *Host)
}

// JudgeRequest asks the run's judge model for one chat completion.
type JudgeRequest struct {
	Messages    []Message
	MaxTokens   int     // 0: the run's reward_model.judge.max_tokens
	Temperature float64 // 0: greedy
	Stop        []string
}

// JudgeResult is the judge's reply.
type JudgeResult struct {
	Text             string
	FinishReason     string // "stop" | "length"
	PromptTokens     int
	CompletionTokens int
	Model            string
}

// Judger answers JudgeRequests: what the host serves behind Host.Judge.
type Judger interface {
	Judge(ctx context.Context, req JudgeRequest) (JudgeResult, error)
}

// ErrNoHostCall is a Host call the host does not offer in this run.
var ErrNoHostCall = errors.New("task: the host does not offer this call")

// Host is a plugin's connection to the host's Host service.
type Host struct {
	conn     *grpc.ClientConn
	rpc      taskv1.HostClient
	token    string
	features []string
}

// DialHost connects to the Host service described by hs (no I/O until the first call).
func DialHost(hs HostService) (*Host, error) {
	h := &Host{token: hs.Token, features: slices.Clone(hs.Features)}
	if hs.Address == "" {
		return h, nil
	}
	conn, err := grpc.NewClient(hs.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("task: host service %s: %w", hs.Address, err)
	}
	h.conn, h.rpc = conn, taskv1.NewHostClient(conn)
	return h, nil
}

// Has reports whether the host offers a call (HostFeatureJudge).
func (h *Host) Has(feature string) bool { return h != nil && slices.Contains(h.features, feature) }

// Close closes the connection.
func (h *Host) Close() error {
	if h == nil || h.conn == nil {
		return nil
	}
	return h.conn.Close()
}

// Judge asks the run's judge model for one chat completion. Without a judge in the run it
// returns ErrNoHostCall.
func (h *Host) Judge(ctx context.Context, req JudgeRequest) (JudgeResult, error) {
	if !h.Has(HostFeatureJudge) || h.rpc == nil {
		return JudgeResult{}, fmt.Errorf("%w: Judge (set reward_model.judge.backend in the run config)", ErrNoHostCall)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+h.token)
	resp, err := h.rpc.Judge(ctx, &taskv1.JudgeRequest{Messages: messagesToProto(req.Messages),
		MaxTokens: int32(req.MaxTokens), Temperature: req.Temperature, Stop: req.Stop})
	if err != nil {
		return JudgeResult{}, fmt.Errorf("task: host Judge: %w", err)
	}
	return JudgeResult{Text: resp.GetText(), FinishReason: resp.GetFinishReason(), PromptTokens: int(resp.GetPromptTokens()),
		CompletionTokens: int(resp.GetCompletionTokens()), Model: resp.GetModel()}, nil
}

// newHostServer is the host's side of the Host service: Judge calls go to judge (nil: no
// judge, Unavailable), and a call without the token is Unauthenticated.
func newHostServer(judge Judger, token string) taskv1.HostServer {
	return &hostServer{judge: judge, token: token}
}

// RegisterHost registers the Host service on s.
func RegisterHost(s *grpc.Server, judge Judger, token string) {
	taskv1.RegisterHostServer(s, newHostServer(judge, token))
}

type hostServer struct {
	taskv1.UnimplementedHostServer
	judge Judger
	token string
}

func (s *hostServer) authorize(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok && subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "host service: missing or wrong token (the one of ConfigureRequest.host_service)")
}

func (s *hostServer) Judge(ctx context.Context, req *taskv1.JudgeRequest) (*taskv1.JudgeResponse, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	if s.judge == nil {
		return nil, status.Error(codes.Unavailable, "Judge: this run has no judge model: set reward_model.judge.backend (policy, model or openai)")
	}
	if len(req.GetMessages()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "Judge: no messages")
	}
	if req.GetMaxTokens() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "Judge: max_tokens %d is negative", req.GetMaxTokens())
	}
	r, err := s.judge.Judge(ctx, JudgeRequest{Messages: messagesFromProto(req.GetMessages()), MaxTokens: int(req.GetMaxTokens()),
		Temperature: req.GetTemperature(), Stop: req.GetStop()})
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, status.Errorf(codes.Unavailable, "Judge: %v", err)
	}
	return &taskv1.JudgeResponse{Text: r.Text, FinishReason: r.FinishReason, PromptTokens: int32(r.PromptTokens),
		CompletionTokens: int32(r.CompletionTokens), Model: r.Model}, nil
}
