package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// flagsFirst returns args with each command's flags moved before its positional arguments, so
// that flags may come anywhere on the line: `rlhost train data.train_batch_size=4 --task gsm8k
// --print-config` reads as `rlhost train --task gsm8k --print-config data.train_batch_size=4`
// (urfave/cli, like Go's flag package, stops reading flags at the first argument that is not
// one). args[0] is the program; the global flags and the command names are kept where they are.
// A flag's value is the argument after it unless it is written --name=value; after "--" every
// argument is positional. A flag the command does not define is moved too, so that the error
// names it ("flag provided but not defined"). Lines that do not name a command are unchanged.
func flagsFirst(a *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	i := skipFlags(a.Flags, args, 1)
	cmds := a.Commands
	var cmd *cli.Command
	for i < len(args) {
		next := findCommand(cmds, args[i])
		if next == nil {
			break
		}
		cmd, cmds = next, next.Subcommands
		i++
		if len(cmds) == 0 {
			break
		}
		// Flags of a command that has subcommands come before the subcommand's name.
		i = skipFlags(cmd.Flags, args, i)
	}
	if cmd == nil || cmd.SkipFlagParsing || i >= len(args) {
		return args
	}
	var flags, positional []string
	dashed := false // a positional argument starts with "-" (it came after "--")
	rest := args[i:]
	for j := 0; j < len(rest); j++ {
		arg := rest[j]
		if arg == "--" {
			for _, p := range rest[j+1:] {
				dashed = dashed || strings.HasPrefix(p, "-")
			}
			positional = append(positional, rest[j+1:]...)
			break
		}
		if !isFlag(arg) {
			positional = append(positional, arg)
			continue
		}
		flags = append(flags, arg)
		if takesValue(cmd.Flags, arg) && j+1 < len(rest) {
			j++
			flags = append(flags, rest[j])
		}
	}
	out := append(append([]string{}, args[:i]...), flags...)
	if dashed {
		out = append(out, "--")
	}
	return append(out, positional...)
}

// runCLI runs the app on the command line args (args[0] is the program), flags anywhere.
func runCLI(a *cli.App, args []string) error { return a.Run(flagsFirst(a, args)) }

// skipFlags returns the index of the first argument at or after i that is neither one of flags
// nor its value.
func skipFlags(flags []cli.Flag, args []string, i int) int {
	for i < len(args) && isFlag(args[i]) && args[i] != "--" {
		if takesValue(flags, args[i]) {
			i++
		}
		i++
	}
	return i
}

// isFlag reports whether arg is written as a flag: -x, --name, --name=value ("-" alone and
// negative numbers are arguments).
func isFlag(arg string) bool {
	if len(arg) < 2 || arg[0] != '-' {
		return false
	}
	c := strings.TrimLeft(arg, "-")
	return c != "" && (c[0] < '0' || c[0] > '9') && c[0] != '.'
}

// takesValue reports whether the flag written as arg is one of flags that takes its value
// from the next argument.
func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if strings.Contains(name, "=") {
		return false
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				df, ok := f.(cli.DocGenerationFlag)
				return ok && df.TakesValue()
			}
		}
	}
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
