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
	if cmd == nil || cmd.SkipFlagParsing {
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
		if name, ok := flagName(a); ok {
			flags = append(flags, a)
			if takesValue[name] && !strings.Contains(a, "=") && j+1 < len(rest) {
				j++
				flags = append(flags, rest[j])
			}
			continue
		}
		positional = append(positional, a)
	}
	out := append(head, flags...)
	// A positional that starts with '-' ("-5 degrees", "-" for standard
	// input) must not be read as a flag: "--" ends the flags before them.
	for _, p := range positional {
		if strings.HasPrefix(p, "-") && p != "--" {
			if len(positional) == 0 || positional[0] != "--" {
				out = append(out, "--")
			}
			break
		}
	}
	return append(out, positional...)
}

// flagName reports whether a looks like a flag (-x, --name, --name=value:
// a letter after the dashes, then letters, digits and dashes) and returns
// its name. Anything else that starts with '-' ("-5 degrees", "- item",
// "-") is text.
func flagName(a string) (string, bool) {
	name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	if name == a || name == "" {
		return "", false
	}
	if k := strings.IndexByte(name, '='); k >= 0 {
		name = name[:k]
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '_'):
		default:
			return "", false
		}
	}
	return name, name != ""
}

func find(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// commandPath names the command c runs as a person types it ("ops
// inspect"); "" for wagent itself. urfave/cli's FullName gives only the
// last word for a subcommand.
func commandPath(c *cli.Context) string {
	var names []string
	for _, cc := range c.Lineage() {
		if cc.Command != nil && cc.Command.Name != "" && (cc.App == nil || cc.Command.Name != cc.App.Name) {
			names = append([]string{cc.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}

// unknownSubcommands makes a command of subcommands (ops, mcp, config)
// refuse a word it does not know with a usage error, as wagent itself
// does, instead of printing a line and exiting 0.
func unknownSubcommands(cmds []*cli.Command) {
	for _, cmd := range cmds {
		if len(cmd.Subcommands) == 0 {
			continue
		}
		unknownSubcommands(cmd.Subcommands)
		if cmd.Action != nil {
			continue
		}
		cmd.Action = func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return fail(exitUsage, "no command %q%s (see wagent %s --help)", commandPath(c)+" "+c.Args().First(), didYouMeanCommand(c.Args().First(), c.Command.Subcommands), commandPath(c))
			}
			return cli.ShowSubcommandHelp(c)
		}
	}
}
