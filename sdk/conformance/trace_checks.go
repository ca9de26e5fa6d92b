package conformance

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rlhost/rlhost/sdk/trace"
)

func traceChecks() []check {
	return []check{
		{"health SERVING", checkHealth},
		{"Info consistent", checkTraceInfo},
		{"Init/Export/Flush", checkTraceExport},
	}
}

func checkTraceInfo(ctx context.Context, s *session) error {
	info, err := trace.NewClient(s.conn).Info(ctx)
	if err != nil {
		return fmt.Errorf("Info: %w", err)
	}
	if info.Name == "" || info.Version == "" {
		return fmt.Errorf("Info: name %q and version %q must both be set", info.Name, info.Version)
	}
	if s.name != "" && info.Name != s.name {
		return fmt.Errorf("Info: name %q differs from the binary's name %q", info.Name, s.name)
	}
	return nil
}

func checkTraceExport(ctx context.Context, s *session) error {
	dir, err := os.MkdirTemp("", "rlhost-conformance-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c := trace.NewClient(s.conn)
	if _, err := c.Init(ctx, trace.Run{Project: "conformance", Experiment: "conformance", RunID: "run-1",
		RunName: "conformance", RunDir: dir, Config: map[string]any{}}); err != nil {
		return fmt.Errorf("Init: %w", err)
	}
	now := time.Now()
	spans := []trace.Span{
		{TraceID: "t1", SpanID: "s1", Name: "agent_loop", Start: now, End: now.Add(time.Millisecond),
			Attributes: map[string]any{"step": int64(1), "sample_index": int64(0), "rollout_n": int64(0), "validate": false,
				"experiment_name": "conformance"}},
		{TraceID: "t1", SpanID: "s2", ParentID: "s1", Name: "generate", Start: now, End: now.Add(time.Millisecond),
			Inputs: `{"prompt_ids":[1,2]}`, Outputs: `{"response_ids":[3]}`},
		{TraceID: "t1", SpanID: "s3", ParentID: "s1", Name: "tool_call:x", Start: now, End: now, Error: "boom"},
	}
	if err := c.Export(ctx, spans); err != nil {
		return fmt.Errorf("Export: %w", err)
	}
	if err := c.Export(ctx, []trace.Span{{Name: "no ids"}}); err == nil {
		return fmt.Errorf("Export of a span without ids succeeded; want InvalidArgument")
	}
	if err := c.Flush(ctx); err != nil {
		return fmt.Errorf("Flush: %w", err)
	}
	if err := c.Shutdown(ctx); err != nil {
		return fmt.Errorf("Shutdown: %w", err)
	}
	return nil
}
