package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/dist"
	"github.com/rlhost/rlhost/host/metrics"
	hostplugin "github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/trainer"
	sdkplugin "github.com/rlhost/rlhost/sdk/plugin"
	"github.com/urfave/cli/v2"
)

func init() {
	extraCommands = append(extraCommands, trainCommand(), plotCommand())
}

func trainCommand() *cli.Command {
	return &cli.Command{
		Name:      "train",
		Usage:     "train a policy with GRPO/PPO on a task (veRL config keys)",
		ArgsUsage: "[key=value ...]",
		Description: "Configuration: the defaults, then each --config YAML file, then the key=value overrides, with\n" +
			"veRL's key names (data.train_batch_size=8 actor_rollout_ref.rollout.n=4 ...; +key=value is accepted).\n" +
			"See docs/config.md for every key.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "task", Usage: "task plugin name (rlhost-task-NAME); repeat it or give a comma list (--task gsm8k --task dr, --task gsm8k,dr) for a mixed run; sets task.name"},
			&cli.StringFlag{Name: "model", Usage: "a GGUF file or an HF model directory; sets actor_rollout_ref.model.path (default: the model `make model` installs, see docs/config.md)"},
			&cli.StringSliceFlag{Name: "config", Aliases: []string{"c"}, Usage: "YAML config file (repeatable; later files win)"},
			&cli.BoolFlag{Name: "print-config", Usage: "print the resolved config (secrets redacted) and exit"},
		},
		Action: func(c *cli.Context) error {
			// Launched by torchrun or srun as one of several ranks (docs/distributed.md).
			w, err := dist.FromEnv(os.Getenv)
			if err != nil {
				return cli.Exit("train: "+err.Error(), 2)
			}
			if !w.Single() && !commAvailable {
				// no communicator between processes: say so before anything is written
				_, _, err := openComm(c.Context, w, 0)
				return cli.Exit("train: "+err.Error(), 2)
			}
			overrides := c.Args().Slice()
			if names := c.StringSlice("task"); len(names) > 0 {
				overrides = append([]string{"task.name=" + strings.Join(names, ",")}, overrides...)
			}
			if m := c.String("model"); m != "" {
				overrides = append(overrides, "actor_rollout_ref.model.path="+m)
			}
			cfg, err := config.Load(c.StringSlice("config"), overrides)
			if err != nil {
				return err
			}
			if len(cfg.TaskNames()) == 0 {
				return cli.Exit("train: no task: pass --task NAME (or set task.name); `rlhost plugins list` shows the installed ones", 2)
			}
			for _, name := range cfg.TaskNames() {
				if _, err := hostplugin.Find(sdkplugin.KindTask, name); err != nil {
					return err
				}
			}
			if c.Bool("print-config") {
				return cfg.WriteYAML(c.App.Writer)
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if err := cfg.ResolvePaths(); err != nil {
				return err
			}
			if err := cpu.SelfCheck(); err != nil {
				return fmt.Errorf("the BLAS library computes wrong results on this CPU (%v); set OPENBLAS_CORETYPE to a kernel it supports", err)
			}
			log := logger(c)
			opts := trainer.Options{Log: log, Progress: c.App.ErrWriter, Plugin: hostplugin.Options{Logger: log}}
			if !w.Single() {
				timeout := time.Duration(cfg.ActorRolloutRef.NCCLTimeout) * time.Second
				ctx, cancel := context.WithTimeout(c.Context, timeout)
				comm, closeComm, err := openComm(ctx, w, timeout)
				cancel()
				if err != nil {
					return fmt.Errorf("train: %s: %w", w, err)
				}
				defer closeComm()
				opts.Comm = comm
				fmt.Fprintf(c.App.ErrWriter, "train: %s\n", w)
			}
			tr, err := trainer.New(c.Context, cfg, opts)
			if err != nil {
				return err
			}
			defer tr.Close()
			fmt.Fprintf(c.App.ErrWriter, "run directory: %s\n", tr.RunDir())
			if err := tr.Run(c.Context); err != nil {
				return err
			}
			runSummary(c.App.ErrWriter, tr.RunDir())
			return nil
		},
	}
}

// runSummary ends a run's console output with what to look at next, each line only when the
// run wrote it: the curves, the command that opens the trace viewer on the run, the metrics
// and the checkpoints.
func runSummary(w io.Writer, runDir string) {
	exists := func(p string) bool { _, err := os.Stat(filepath.Join(runDir, p)); return err == nil }
	fmt.Fprintf(w, "done: %s\n", runDir)
	if exists("curves.png") {
		fmt.Fprintf(w, "  curves:      %s\n", filepath.Join(runDir, "curves.png"))
	}
	if exists(filepath.Join("traces", "traces.db")) {
		fmt.Fprintf(w, "  traces:      %s traces serve --run %s\n", selfCommand(), runDir)
	}
	if exists("metrics.jsonl") {
		fmt.Fprintf(w, "  metrics:     %s\n", filepath.Join(runDir, "metrics.jsonl"))
	}
	if exists("checkpoints") {
		fmt.Fprintf(w, "  checkpoints: %s\n", filepath.Join(runDir, "checkpoints"))
	}
}

// selfCommand is how to run this program again from the current directory: the path it was
// started with when that has a directory (bin/rlhost), else its name.
func selfCommand() string {
	if p := os.Args[0]; strings.ContainsRune(p, filepath.Separator) && !strings.HasSuffix(p, ".test") {
		return p
	}
	return "rlhost"
}

func plotCommand() *cli.Command {
	return &cli.Command{
		Name:      "plot",
		Usage:     "draw the reward, accuracy and length curves of a run (RUN_DIR/curves.png)",
		ArgsUsage: "RUN_DIR",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("plot: give one run directory", 2)
			}
			if _, err := os.Stat(c.Args().First()); err != nil {
				return err
			}
			out, err := metrics.PlotRun(c.Args().First())
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, out)
			return nil
		},
	}
}
