package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// flagsFirst returns args with each command's flags moved before its positional arguments, so
// that flags may come anywhere on the line: `rlhost train data.train_batch_size=4 --task gsm8k
// --print-config` reads as `rlhost train --task gsm8k --print-config data.train_batch_size=4`
// (urfave/cli, like Go's flag package, stops reading flags at the first argument that is not
// one). The global flags (--log-level) are moved before the command's name, wherever they come:
// `rlhost train --log-level debug ...` reads as `rlhost --log-level debug train ...` (a
// command's own flag of the same name stays the command's). args[0] is the program; the
// command names are kept in order. A flag's value is the argument after it unless it is
// written --name=value; after "--" every argument is positional. A flag the command does not
// define is moved too, so that the error names it ("flag provided but not defined"). Lines that
// do not name a command, or name one that parses no flags, are unchanged.
func flagsFirst(a *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	i := skipFlags(a.Flags, args, 1)
	lead := args[:i] // the program and the global flags before the command
	var globals, path []string
	// take moves the flag at args[k] (with its value) to globals or to dst, and returns the
	// index after it.
	take := func(cmd *cli.Command, k int, dst *[]string) int {
		n := 1
		global := isGlobalFlag(a, cmd, args[k])
		if (global && takesValue(a.Flags, args[k])) || (!global && takesValue(cmd.Flags, args[k])) {
			n = 2
		}
		end := min(k+n, len(args))
		if global {
			globals = append(globals, args[k:end]...)
		} else {
			*dst = append(*dst, args[k:end]...)
		}
		return end
	}
	cmds := a.Commands
	var cmd *cli.Command
	for i < len(args) {
		next := findCommand(cmds, args[i])
		if next == nil {
			break
		}
		cmd, cmds = next, next.Subcommands
		path = append(path, args[i])
		i++
		if len(cmds) == 0 || cmd.SkipFlagParsing {
			break
		}
		// Flags of a command that has subcommands come before the subcommand's name.
		for i < len(args) && isFlag(args[i]) && args[i] != "--" {
			i = take(cmd, i, &path)
		}
	}
	if cmd == nil {
		return args
	}
	var flags, positional []string
	dashed := false // a positional argument starts with "-" (it came after "--")
	if cmd.SkipFlagParsing {
		positional = args[i:]
	}
	for j := i; j < len(args) && !cmd.SkipFlagParsing; {
		arg := args[j]
		if arg == "--" {
			for _, p := range args[j+1:] {
				dashed = dashed || strings.HasPrefix(p, "-")
			}
			positional = append(positional, args[j+1:]...)
			break
		}
		if !isFlag(arg) {
			positional = append(positional, arg)
			j++
			continue
		}
		j = take(cmd, j, &flags)
	}
	out := append(append(append(append([]string{}, lead...), globals...), path...), flags...)
	if dashed {
		out = append(out, "--")
	}
	return append(out, positional...)
}

// isGlobalFlag reports whether the flag written as arg is one of the app's flags and not one
// of cmd's.
func isGlobalFlag(a *cli.App, cmd *cli.Command, arg string) bool {
	return hasFlag(a.Flags, arg) && !hasFlag(cmd.Flags, arg)
}

// hasFlag reports whether the flag written as arg (-x, --name, --name=value) is one of flags.
func hasFlag(flags []cli.Flag, arg string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
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
