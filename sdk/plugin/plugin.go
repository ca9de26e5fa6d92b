// Package plugin holds what every rlhost plugin and the host agree on before the first RPC:
// the handshake (magic cookie and protocol major versions), the plugin kinds, the logger
// plugins write to stderr, and the go-plugin glue that serves a gRPC service.
//
// A plugin process is started by the host with the cookie in its environment. It prints one
// handshake line on stdout,
//
//	1|1|unix|/tmp/plugin123|grpc|<base64 server cert>
//
// (core protocol 1, app protocol major version, network, address, "grpc", the plugin's TLS
// certificate: the host always sends PLUGIN_CLIENT_CERT, see certs.go), and then serves gRPC
// over mutual TLS, including the standard health service with service "plugin" SERVING. Run without the cookie it refuses, with an explanation, and exits 1.
package plugin

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// The cookie the host sets in a plugin's environment. It tells a plugin binary that it was
// started by rlhost and not by a person at a shell.
const (
	MagicCookieKey   = "RLHOST_PLUGIN_COOKIE"
	MagicCookieValue = "d8f0a7c4e2b94f6d9a1c3e5b7f2d4a6c-rlhost"
)

// Kinds of plugin. The kind is the go-plugin plugin name and the binary name prefix:
// rlhost-task-NAME serves KindTask, rlhost-trace-NAME serves KindTrace.
const (
	KindTask  = "task"
	KindTrace = "trace"
)

// Protocol major versions this SDK speaks, per kind. A new major version is served beside the
// old one, and the host and plugin settle on the highest both know.
const (
	TaskProtocolMajor  = 1
	TraceProtocolMajor = 1
)

// HostVersion is the host's version, sent in every plugin's Info call (task and trace); the
// host sets it at start-up.
var HostVersion = "dev"

// Handshake is the base handshake. ProtocolVersion is left 0: versions are negotiated through
// VersionedPlugins (go-plugin sends PLUGIN_PROTOCOL_VERSIONS to the plugin).
var Handshake = goplugin.HandshakeConfig{
	MagicCookieKey:   MagicCookieKey,
	MagicCookieValue: MagicCookieValue,
}

// BinaryPrefix returns the executable name prefix for a kind: "rlhost-task-" or "rlhost-trace-".
func BinaryPrefix(kind string) string { return "rlhost-" + kind + "-" }

// NewLogger returns the logger a plugin uses: hclog JSON lines on stderr, which the host parses
// and routes into its own log under the plugin's name. The level comes from RLHOST_LOG_LEVEL
// (trace, debug, info, warn, error), info by default.
func NewLogger(name string) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("RLHOST_LOG_LEVEL"))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      level,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

// GRPCPlugin adapts a register function to go-plugin's GRPCPlugin interface. Only the server
// half is used by plugins; the host builds its clients from the raw connection, so Client
// hands the connection back.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Register func(*grpc.Server)
}

// GRPCServer registers the service.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Register == nil {
		return fmt.Errorf("plugin: nothing to serve")
	}
	p.Register(s)
	return nil
}

// GRPCClient returns the connection itself; see ClientConn.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (interface{}, error) {
	return c, nil
}

// ServeOptions are the knobs of Serve beyond the service itself.
type ServeOptions struct {
	// Logger defaults to NewLogger(name).
	Logger hclog.Logger
	// Test, when set, serves in-process for tests (see go-plugin's ServeTestConfig).
	Test *goplugin.ServeTestConfig
}

// Serve serves register's service as a plugin of the given kind and protocol major version and
// does not return until the host shuts the plugin down. A handler that panics fails its call
// with the panic's value and the plugin's frames (recover.go) instead of ending the process.
// Without the magic cookie in the environment it prints why on stderr and exits with status 1.
func Serve(kind string, major int, name string, register func(*grpc.Server), opts ServeOptions) {
	logger := opts.Logger
	if logger == nil {
		logger = NewLogger(name)
	}
	if opts.Test == nil && os.Getenv(MagicCookieKey) != MagicCookieValue {
		fmt.Fprintf(os.Stderr, "%s is an rlhost %s plugin: it is started by rlhost, not run by hand.\n"+
			"Install it in ./bin/plugins, ~/.rlhost/plugins or a directory on RLHOST_PLUGIN_PATH, then\n"+
			"  rlhost plugins list\n  rlhost conformance %s\n", os.Args[0], kind, os.Args[0])
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{
			major: {kind: &GRPCPlugin{Register: register}},
		},
		GRPCServer: grpcServer(logger), // go-plugin's default, recovering panics (recover.go)
		Logger:     logger,
		Test:       opts.Test,
	})
}
