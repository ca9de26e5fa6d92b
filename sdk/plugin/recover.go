package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A panic in a plugin's handler would take the whole process down with twelve lines of gRPC
// frames on stderr and nothing on the call. Serve recovers it instead: the call fails with
// codes.Internal and one line naming the call, the panic's value and the plugin's own frames
//
//	Score: panic: runtime error: integer divide by zero (at main.task.Score main.go:42 <- main.grade main.go:17)
//
// and the full stack goes to the plugin's log. The process keeps serving its other calls.

// maxPanicFrames bounds the frames a panic's message names.
const maxPanicFrames = 4

// RecoverUnary is the unary server interceptor that turns a handler's panic into an Internal
// status (see PanicStatus); log receives the full stack.
func RecoverUnary(log hclog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = PanicStatus(log, methodName(info.FullMethod), p, debug.Stack(), callerPCs())
				resp = nil
			}
		}()
		return handler(ctx, req)
	}
}

// RecoverStream is RecoverUnary for streaming calls.
func RecoverStream(log hclog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = PanicStatus(log, methodName(info.FullMethod), p, debug.Stack(), callerPCs())
			}
		}()
		return handler(srv, ss)
	}
}

// callerPCs returns the program counters of the panicking goroutine as seen from a deferred
// function: the frames of the panic's origin come first.
func callerPCs() []uintptr {
	pcs := make([]uintptr, 64)
	return pcs[:runtime.Callers(3, pcs)]
}

// PanicStatus logs a recovered panic with its stack and returns the Internal status of the
// call: "CALL: panic: VALUE (at FRAME <- FRAME ...)", the frames being the plugin's own (not
// the Go runtime's, gRPC's, go-plugin's or this SDK's), innermost first.
func PanicStatus(log hclog.Logger, call string, value any, stack []byte, pcs []uintptr) error {
	msg := fmt.Sprintf("%s: panic: %v", call, value)
	if frames := PluginFrames(pcs, maxPanicFrames); len(frames) > 0 {
		msg += " (at " + strings.Join(frames, " <- ") + ")"
	}
	msg = strings.ReplaceAll(msg, "\n", " ")
	if log != nil {
		log.Error("a handler panicked; the call fails with Internal and the plugin keeps serving",
			"call", call, "panic", fmt.Sprint(value), "stack", string(stack))
	}
	return status.Error(codes.Internal, msg)
}

// PluginFrames formats up to max frames of pcs as "function file:line", skipping the frames
// of the Go runtime, gRPC, go-plugin and this SDK.
func PluginFrames(pcs []uintptr, max int) []string {
	var out []string
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function != "" && !foreignFrame(f.Function) {
			out = append(out, fmt.Sprintf("%s %s:%d", shortFunc(f.Function), filepath.Base(f.File), f.Line))
			if len(out) == max {
				break
			}
		}
		if !more {
			break
		}
	}
	return out
}

// foreignFrames are the packages whose frames a panic's message leaves out: Go's runtime,
// gRPC, go-plugin and this SDK's (a plugin's own packages, in this module's tasks/ and
// examples/ too, are kept).
var foreignFrames = []string{"runtime.", "runtime/", "google.golang.org/", "github.com/hashicorp/", "golang.org/x/", "reflect.",
	"github.com/rlhost/rlhost/sdk/plugin.", "github.com/rlhost/rlhost/sdk/task.", "github.com/rlhost/rlhost/sdk/trace.",
	"github.com/rlhost/rlhost/sdk/gen/"}

func foreignFrame(fn string) bool {
	for _, p := range foreignFrames {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// shortFunc drops the import path of a function name, keeping its package:
// github.com/a/b/task.(*T).Score -> task.(*T).Score.
func shortFunc(fn string) string {
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// methodName is the method of a full gRPC method name: /rlhost.task.v1.Task/Score -> Score.
func methodName(full string) string {
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}

// grpcServer is go-plugin's default server with the panic interceptors.
func grpcServer(log hclog.Logger) func(opts []grpc.ServerOption) *grpc.Server {
	return func(opts []grpc.ServerOption) *grpc.Server {
		return grpc.NewServer(append(opts, grpc.ChainUnaryInterceptor(RecoverUnary(log)),
			grpc.ChainStreamInterceptor(RecoverStream(log)))...)
	}
}
