package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves flags that follow positional arguments in front of
// them, so `wagent log SESSION --json` means what it says: urfave/cli stops
// parsing flags at the first positional argument. Only flags the command
// defines are moved (with their value, for flags that take one); "--" ends
// the flags as usual.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cmds := app.Commands
	var cmd *cli.Command
	i := 1
	// Walk the command path (e.g. "ops check").
	for i < len(args) {
		c := find(cmds, args[i])
		if c == nil {
			break
		}
		cmd = c
		cmds = c.Subcommands
		i++
	}
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	head := append([]string(nil), args[:i]...)
	var flags, positional []string
	rest := args[i:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		if a == "--" {
			positional = append(positional, rest[j:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			name := strings.TrimLeft(a, "-")
			if k := strings.IndexByte(name, '='); k >= 0 {
				name = name[:k]
			}
			flags = append(flags, a)
			if takesValue[name] && !strings.Contains(a, "=") && j+1 < len(rest) {
				j++
				flags = append(flags, rest[j])
			}
			continue
		}
		positional = append(positional, a)
	}
	return append(append(head, flags...), positional...)
}

func find(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
