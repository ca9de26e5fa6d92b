package plugin_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/rlhost/rlhost/sdk/plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// scoreItems panics as a plugin's code would: an index past the end of a slice.
func scoreItems(n int) []float64 {
	out := make([]float64, n)
	out[n] = 1
	return out
}

// A panicking handler fails its call with Internal and one line: the call, the panic's value
// and the plugin's own frames (here the test's), not the runtime's or gRPC's; the log gets
// the full stack.
func TestRecoverUnary(t *testing.T) {
	var logBuf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logBuf, JSONFormat: true})
	handler := func(ctx context.Context, req any) (any, error) { return scoreItems(2), nil }
	resp, err := plugin.RecoverUnary(log)(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/rlhost.task.v1.Task/Score"}, handler)
	if resp != nil || status.Code(err) != codes.Internal {
		t.Fatalf("resp %v, err %v; want nil and Internal", resp, err)
	}
	msg := status.Convert(err).Message()
	for _, want := range []string{"Score: panic: runtime error: index out of range [2] with length 2", "(at plugin_test.scoreItems recover_test.go:",
		" <- plugin_test.TestRecoverUnary.func1 recover_test.go:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	for _, bad := range []string{"\n", "runtime.", "grpc", "goroutine"} {
		if strings.Contains(msg, bad) {
			t.Errorf("message %q contains %q: want one line of the plugin's own frames", msg, bad)
		}
	}
	if !strings.Contains(logBuf.String(), "goroutine") || !strings.Contains(logBuf.String(), `"call":"Score"`) {
		t.Errorf("the log lacks the full stack:\n%s", logBuf.String())
	}

	// A handler that does not panic is untouched; so is a streaming one.
	ok := func(ctx context.Context, req any) (any, error) { return "fine", nil }
	if resp, err := plugin.RecoverUnary(log)(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"}, ok); resp != "fine" || err != nil {
		t.Fatalf("a handler without a panic: %v %v", resp, err)
	}
	err = plugin.RecoverStream(log)(nil, nil, &grpc.StreamServerInfo{FullMethod: "/rlhost.task.v1.Task/Preprocess"},
		func(any, grpc.ServerStream) error { panic("bad record") })
	if msg := status.Convert(err).Message(); status.Code(err) != codes.Internal || !strings.HasPrefix(msg, "Preprocess: panic: bad record (at plugin_test.TestRecoverUnary") {
		t.Fatalf("stream panic: %v", err)
	}
}
