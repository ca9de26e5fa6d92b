package main

import (
	"fmt"
	"io"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/urfave/cli/v2"
)

func init() { extraCommands = append(extraCommands, selftestCommand()) }

// selftestCommand checks that a compute device works: on cuda it compares
// every kernel and a tiny training step with the CPU backend.
func selftestCommand() *cli.Command {
	return &cli.Command{
		Name:  "selftest",
		Usage: "check a compute device: --device cuda compares every GPU kernel and a training step with the CPU backend",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "device", Value: "cpu", Usage: "cpu or cuda"},
		}, benchFlags...),
		Action: func(c *cli.Context) error {
			w := c.App.Writer
			bc, err := benchArgs(c)
			if err != nil {
				return err
			}
			if d := c.String("device"); bc.Dir != "" && (d == "cpu" || d == "cuda") {
				return selftestBench(w, d, bc)
			}
			switch d := c.String("device"); d {
			case "cpu":
				return selftestCPU(w)
			case "cuda":
				return selftestCUDA(w)
			default:
				return cli.Exit(fmt.Sprintf("selftest: unknown --device %q (cpu or cuda)", d), 2)
			}
		},
	}
}

func selftestCPU(w io.Writer) error {
	if err := cpu.SelfCheck(); err != nil {
		return cli.Exit("selftest: cpu: "+err.Error(), 1)
	}
	fmt.Fprintf(w, "ok  %s: sgemm matches a naive product\n", cpu.New().Name())
	return nil
}
