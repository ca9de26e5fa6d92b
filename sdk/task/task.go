// Package task is what a task plugin author imports: the Task interface and its optional
// parts, the types that cross the wire, DecodeConfig for Configure's config, Serve to run a
// plugin, and Client, the view of a running plugin that the host and the conformance kit
// (sdk/conformance) share. The host's side of the Host service (RegisterHost, Judger) is here
// too: this package is the one place that converts between its types and the protocol's
// messages. The did-you-mean of its errors is sdk/suggest.
//
// A task is polymorphic: every plugin implements Task (Info and Score); it implements
// Configurer, Preprocessor, Prompter and Environment when it has something to say there.
// ToolEnv is a ready Environment for tool-calling tasks with veRL's semantics.
package task

import (
	"context"
	"errors"
	"fmt"
)

// Task is the part every task plugin implements.
type Task interface {
	// Info describes the plugin. It is called first and may be called again at any time.
	Info(ctx context.Context) (Info, error)
	// Score scores a batch; one result per item, in order. An item that cannot be scored gets
	// ScoreResult.Err, not an error of the whole call.
	Score(ctx context.Context, items []ScoreItem) ([]ScoreResult, error)
}

// Configurer takes the task section of the run config (a JSON object, decoded).
type Configurer interface {
	Configure(ctx context.Context, config map[string]any) error
}

// Preprocessor turns raw records into dataset rows. Return Skip(reason) to leave a record out.
type Preprocessor interface {
	Preprocess(ctx context.Context, rec Record) (Row, error)
}

// Prompter builds the prompt for a row. Without one, the prompt is the row's own messages and
// the tools of Info.
type Prompter interface {
	Prompt(ctx context.Context, row Row) (Prompt, error)
}

// Environment runs trajectories: Start, then Obs per assistant turn, then End.
type Environment interface {
	Start(ctx context.Context, req StartRequest) (StartResult, error)
	Obs(ctx context.Context, req ObsRequest) (ObsResult, error)
	End(ctx context.Context, req EndRequest) (EndResult, error)
}

// Errors a plugin returns to say what kind of failure it is; Serve maps them to gRPC codes
// (InvalidArgument, NotFound, FailedPrecondition) and the host reports them as such.
var (
	ErrInvalidArgument = errors.New("invalid argument")
	ErrNotFound        = errors.New("not found")
	ErrNotConfigured   = errors.New("not configured")
)

// InvalidArgument returns an error that Serve reports with code InvalidArgument.
func InvalidArgument(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// NotFound returns an error that Serve reports with code NotFound.
func NotFound(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotFound, fmt.Sprintf(format, args...))
}

// SkipError leaves a record out of a dataset during Preprocess.
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return "skip: " + e.Reason }

// Skip returns a SkipError with the reason.
func Skip(reason string) error { return &SkipError{Reason: reason} }
