// Command rlhost is the rlhost command line: training, data preprocessing, re-scoring, plugin
// management and the plugin conformance kit.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/rlhost/rlhost/gpu/cpu"
	sdkplugin "github.com/rlhost/rlhost/sdk/plugin"
	"github.com/urfave/cli/v2"
)

// defaultGCPercent is the garbage collector's target when GOGC is not set (see main).
const defaultGCPercent = 25

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	// OpenBLAS picks its kernels when it loads: choose them for this CPU first (this may
	// re-execute the program with OPENBLAS_CORETYPE set; a value the user set is kept).
	if err := cpu.EnsureCoreType(); err != nil {
		fmt.Fprintln(os.Stderr, "rlhost: warning:", err)
	}
	sdkplugin.HostVersion = version
	// Training keeps a large, steady live heap (weights, gradients, AdamW moments, KV cache:
	// ~6 GB for the default model at the demo's sizes) of pointer-free float slices that
	// are cheap to mark. Go's default GOGC=100 lets the heap grow to twice that before a
	// collection (10 GB peak RSS measured); 25 keeps the peak within ~25% of the live heap at no
	// measurable step-time cost. A GOGC the user set is kept.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	// Plugins die with us on Ctrl-C or SIGTERM, and their sockets and temporary files go with
	// the run's temporary folder.
	removeTemp := runTemp()
	exit := func(code int) {
		goplugin.CleanupClients()
		removeTemp()
		os.Exit(code)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "rlhost: %v: stopped\n", s)
		exit(130)
	}()
	err := runCLI(app(), os.Args)
	if err != nil {
		if ec, ok := err.(cli.ExitCoder); ok {
			if msg := ec.Error(); msg != "" {
				fmt.Fprintln(os.Stderr, "rlhost:", msg)
			}
			exit(ec.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "rlhost:", err)
		exit(1)
	}
	exit(0)
}

// extraCommands are registered by the files that define them (init functions), so that each
// command lives in its own file.
var extraCommands []*cli.Command

func app() *cli.App {
	return &cli.App{
		Name:    "rlhost",
		Usage:   "reinforcement learning for LLM agents, with tasks and tracing as plugins",
		Version: version,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "trace, debug, info, warn or error (plugin logs included)", EnvVars: []string{"RLHOST_LOG_LEVEL"}},
		},
		Commands: append([]*cli.Command{
			pluginsCommand(),
			preprocessCommand(),
			scoreCommand(),
			conformanceCommand(),
		}, extraCommands...),
	}
}

// logger is the host log: hclog on stderr. Plugin lines appear under the plugin's name.
func logger(c *cli.Context) hclog.Logger {
	level := hclog.LevelFromString(c.String("log-level"))
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	return hclog.New(&hclog.LoggerOptions{Name: "rlhost", Level: level, Output: c.App.ErrWriter})
}
