package trace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	tracev1 "github.com/rlhost/rlhost/sdk/gen/trace/v1"
	"github.com/rlhost/rlhost/sdk/plugin"
	"github.com/rlhost/rlhost/sdk/task"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ProtocolMinor is the minor revision of trace.v1 this SDK implements.
const ProtocolMinor = 0

// Register registers impl's service on s.
func Register(s *grpc.Server, impl Backend) { tracev1.RegisterBackendServer(s, &server{impl: impl}) }

// Serve runs impl as a trace-backend plugin; it returns when the host shuts it down.
func Serve(impl Backend) {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), plugin.BinaryPrefix(plugin.KindTrace))
	Logger = plugin.NewLogger(name)
	plugin.Serve(plugin.KindTrace, plugin.TraceProtocolMajor, name,
		func(s *grpc.Server) { Register(s, impl) }, plugin.ServeOptions{Logger: Logger})
}

// Logger is the plugin's logger (hclog JSON on stderr), set by Serve.
var Logger hclog.Logger = hclog.NewNullLogger()

type server struct {
	tracev1.UnimplementedBackendServer
	impl Backend
}

var traceErrorCodes = []plugin.ErrorCode{
	{Err: ErrUnavailable, Code: codes.Unavailable},
	{Err: ErrInvalidArgument, Code: codes.InvalidArgument},
	{Err: context.DeadlineExceeded, Code: codes.DeadlineExceeded},
}

func toStatus(call string, err error) error { return plugin.Status(call, err, traceErrorCodes...) }

func (s *server) Info(ctx context.Context, _ *tracev1.InfoRequest) (*tracev1.InfoResponse, error) {
	i, err := s.impl.Info(ctx)
	if err != nil {
		return nil, toStatus("Info", err)
	}
	return &tracev1.InfoResponse{Name: i.Name, Version: i.Version, ProtocolMinor: ProtocolMinor, Features: i.Features}, nil
}

func (s *server) Init(ctx context.Context, req *tracev1.InitRequest) (*tracev1.InitResponse, error) {
	cfg, err := task.DecodeObject(req.GetConfigJson())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "Init: config_json: %v", err)
	}
	url, err := s.impl.Init(ctx, Run{Project: req.GetProject(), Experiment: req.GetExperiment(), RunID: req.GetRunId(),
		RunName: req.GetRunName(), RunDir: req.GetRunDir(), Config: cfg, RunConfig: req.GetRunConfigJson()})
	if err != nil {
		return nil, toStatus("Init", err)
	}
	return &tracev1.InitResponse{RunUrl: url}, nil
}

func (s *server) Export(ctx context.Context, req *tracev1.ExportRequest) (*tracev1.ExportResponse, error) {
	spans := make([]Span, len(req.GetSpans()))
	for i, p := range req.GetSpans() {
		if p.GetTraceId() == "" || p.GetSpanId() == "" {
			return nil, status.Errorf(codes.InvalidArgument, "Export: span %d has no trace_id or span_id", i)
		}
		spans[i] = SpanFromProto(p)
	}
	if err := s.impl.Export(ctx, spans); err != nil {
		return nil, toStatus("Export", err)
	}
	return &tracev1.ExportResponse{Accepted: int64(len(spans))}, nil
}

func (s *server) Flush(ctx context.Context, _ *tracev1.FlushRequest) (*tracev1.FlushResponse, error) {
	return &tracev1.FlushResponse{}, toStatus("Flush", s.impl.Flush(ctx))
}

func (s *server) Shutdown(ctx context.Context, _ *tracev1.ShutdownRequest) (*tracev1.ShutdownResponse, error) {
	return &tracev1.ShutdownResponse{}, toStatus("Shutdown", s.impl.Shutdown(ctx))
}

// SpanToProto converts a span.
func SpanToProto(s Span) *tracev1.Span {
	p := &tracev1.Span{TraceId: s.TraceID, SpanId: s.SpanID, ParentSpanId: s.ParentID, Name: s.Name,
		StartUnixNano: s.Start.UnixNano(), EndUnixNano: s.End.UnixNano(), InputsJson: s.Inputs, OutputsJson: s.Outputs,
		Error: s.Error, Status: tracev1.StatusCode_STATUS_CODE_OK, Attributes: map[string]*tracev1.AttributeValue{}}
	if s.Error != "" {
		p.Status = tracev1.StatusCode_STATUS_CODE_ERROR
	}
	for k, v := range s.Attributes {
		switch x := v.(type) {
		case string:
			p.Attributes[k] = &tracev1.AttributeValue{Value: &tracev1.AttributeValue_StringValue{StringValue: x}}
		case bool:
			p.Attributes[k] = &tracev1.AttributeValue{Value: &tracev1.AttributeValue_BoolValue{BoolValue: x}}
		case int:
			p.Attributes[k] = &tracev1.AttributeValue{Value: &tracev1.AttributeValue_IntValue{IntValue: int64(x)}}
		case int64:
			p.Attributes[k] = &tracev1.AttributeValue{Value: &tracev1.AttributeValue_IntValue{IntValue: x}}
		case float64:
			p.Attributes[k] = &tracev1.AttributeValue{Value: &tracev1.AttributeValue_DoubleValue{DoubleValue: x}}
		default:
			p.Attributes[k] = &tracev1.AttributeValue{Value: &tracev1.AttributeValue_StringValue{StringValue: fmt.Sprint(x)}}
		}
	}
	return p
}

// SpanFromProto converts a span.
func SpanFromProto(p *tracev1.Span) Span {
	s := Span{TraceID: p.GetTraceId(), SpanID: p.GetSpanId(), ParentID: p.GetParentSpanId(), Name: p.GetName(),
		Start: time.Unix(0, p.GetStartUnixNano()), End: time.Unix(0, p.GetEndUnixNano()),
		Inputs: p.GetInputsJson(), Outputs: p.GetOutputsJson(), Error: p.GetError(), Attributes: map[string]any{}}
	for k, v := range p.GetAttributes() {
		switch x := v.GetValue().(type) {
		case *tracev1.AttributeValue_StringValue:
			s.Attributes[k] = x.StringValue
		case *tracev1.AttributeValue_IntValue:
			s.Attributes[k] = x.IntValue
		case *tracev1.AttributeValue_DoubleValue:
			s.Attributes[k] = x.DoubleValue
		case *tracev1.AttributeValue_BoolValue:
			s.Attributes[k] = x.BoolValue
		}
	}
	return s
}

// Client calls a trace backend plugin; it implements Backend.
type Client struct{ rpc tracev1.BackendClient }

// NewClient returns a client on conn.
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: tracev1.NewBackendClient(conn)}
}

// Info calls Info.
func (c *Client) Info(ctx context.Context) (Info, error) {
	r, err := c.rpc.Info(ctx, &tracev1.InfoRequest{HostVersion: plugin.HostVersion})
	if err != nil {
		return Info{}, err
	}
	return Info{Name: r.GetName(), Version: r.GetVersion(), Features: r.GetFeatures(), ProtocolMinor: r.GetProtocolMinor()}, nil
}

// Init calls Init.
func (c *Client) Init(ctx context.Context, run Run) (string, error) {
	cfg := task.EncodeJSON(run.Config)
	r, err := c.rpc.Init(ctx, &tracev1.InitRequest{Project: run.Project, Experiment: run.Experiment, RunId: run.RunID,
		RunName: run.RunName, RunDir: run.RunDir, ConfigJson: cfg, RunConfigJson: run.RunConfig})
	if err != nil {
		return "", err
	}
	return r.GetRunUrl(), nil
}

// Export calls Export.
func (c *Client) Export(ctx context.Context, spans []Span) error {
	req := &tracev1.ExportRequest{Spans: make([]*tracev1.Span, len(spans))}
	for i, s := range spans {
		req.Spans[i] = SpanToProto(s)
	}
	_, err := c.rpc.Export(ctx, req)
	return err
}

// Flush calls Flush.
func (c *Client) Flush(ctx context.Context) error {
	_, err := c.rpc.Flush(ctx, &tracev1.FlushRequest{})
	return err
}

// Shutdown calls Shutdown.
func (c *Client) Shutdown(ctx context.Context) error {
	_, err := c.rpc.Shutdown(ctx, &tracev1.ShutdownRequest{})
	return err
}
