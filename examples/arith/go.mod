module example.com/rlhost-task-arith

go 1.26.0

require github.com/rlhost/rlhost/sdk v0.0.0

require (
	github.com/fatih/color v1.13.0 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/hashicorp/go-hclog v1.6.3 // indirect
	github.com/hashicorp/go-plugin v1.8.0 // indirect
	github.com/hashicorp/yamux v0.1.2 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.17 // indirect
	github.com/oklog/run v1.1.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// The SDK module is not published on a module proxy: this example, a module of its own to prove
// it needs nothing but the SDK, takes it from this repository (docs/writing-a-task-plugin.md).
// `rlhost new task` writes the same line, with the SDK's absolute path, for projects elsewhere.
replace github.com/rlhost/rlhost/sdk => ../../sdk
