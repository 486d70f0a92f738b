package wasmhost

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
)

// A call the op's grants would refuse is answered before anyone is asked
// about it (engine.GrantChecker): the host reads the argument that names
// what the call reaches (a command line, a URL) and runs the same grant
// check it runs when the op asks for the command or the request. The
// module has no part in it: which argument is checked, and how, is the
// pipeline's to say (Config.Checks; the built-ins shell and fetch say it
// for their tools), never the manifest's. What only running can show
// (where a URL's name resolves, a redirect's target, the working
// directory, where a path inside a mount leads) is still checked when the
// call runs.

// ArgCheck names a string argument of one of the op's tools that the host
// checks against the op's grants before the call is put to a guard or a
// person.
type ArgCheck struct {
	// Tool is a tool the op owns.
	Tool string
	// Arg is a top-level argument whose value is a string (the last one
	// when the key is given twice, as the guest kit decodes it); a call
	// without it, or with another type, is not checked (its schema is).
	Arg string
	// As says what the value is.
	As ArgKind
}

// ArgKind says what a checked argument is, and so which grant it must
// fit.
type ArgKind uint8

const (
	// CommandLine is a command line the tool runs the way builtin:shell
	// does: under sh -c when a shell grant's line matches it, otherwise as
	// the argv hostabi.SplitCommand makes of it. The call may run when an
	// exec grant allows it either way.
	CommandLine ArgKind = iota + 1
	// URL is the URL the tool requests through http_request: the call may
	// run when it is an absolute http or https URL whose host and port an
	// HTTP grant allows.
	URL
)

func (k ArgKind) String() string {
	switch k {
	case CommandLine:
		return "command line"
	case URL:
		return "URL"
	}
	return fmt.Sprintf("ArgKind(%d)", uint8(k))
}

var _ engine.GrantChecker = (*Op)(nil)

// checkArgChecks refuses checks on tools the op does not own or of kinds
// not known.
func checkArgChecks(man *hostabi.Manifest, checks []ArgCheck) error {
	for _, c := range checks {
		switch {
		case !man.OwnsTool(c.Tool):
			return fmt.Errorf("op %s: a grant check names tool %q, which the op does not own", man.Name, c.Tool)
		case c.Arg == "":
			return fmt.Errorf("op %s: the grant check of tool %s names no argument", man.Name, c.Tool)
		case c.As != CommandLine && c.As != URL:
			return fmt.Errorf("op %s: the grant check of %s.%s has an unknown kind %v", man.Name, c.Tool, c.Arg, c.As)
		}
	}
	return nil
}

// CheckGrants reports why the op's grants would refuse a call of tool with
// args, as far as the checks its pipeline gave it (Config.Checks) tell
// without running anything; nil when they would not.
func (o *Op) CheckGrants(tool string, args json.RawMessage) error {
	for _, c := range o.checks {
		if c.Tool != tool {
			continue
		}
		raw, ok := hostabi.Field(args, c.Arg)
		if !ok || len(raw) == 0 || raw[0] != '"' {
			continue
		}
		v, err := hostabi.String(raw)
		if err != nil {
			continue
		}
		switch c.As {
		case CommandLine:
			err = o.commandGranted(v)
		case URL:
			err = o.urlGranted(v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// commandGranted is exec's grant check (execGrantFor) for a command line
// run as builtin:shell runs it.
func (o *Op) commandGranted(line string) error {
	if o.execGrantFor(&hostabi.ExecRequest{Shell: line}) != nil {
		return nil
	}
	argv, err := hostabi.SplitCommand(line)
	switch {
	case err != nil:
		return fmt.Errorf("the command line %s %v, and no exec grant of op %s allows it (granted: %s)", quoteArg(clip(line, quotedBytes)), err, o.man.Name, o.grantedCommands())
	case len(argv) == 0:
		return fmt.Errorf("the command line is empty (op %s may run: %s)", o.man.Name, o.grantedCommands())
	case o.execGrantFor(&hostabi.ExecRequest{Argv: argv}) != nil:
		return nil
	}
	return fmt.Errorf("%s matches no exec grant of op %s (granted: %s)", clip(strings.Join(quoteArgs(argv), " "), quotedBytes), o.man.Name, o.grantedCommands())
}

// urlGranted is http_request's check of a URL before it connects.
func (o *Op) urlGranted(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return fmt.Errorf("%q is not an absolute URL", clip(raw, quotedBytes))
	}
	host, port, err := target(u)
	if err != nil {
		return fmt.Errorf("%s: %v", clip(raw, quotedBytes), err)
	}
	if _, ok := o.grantFor(host, port); !ok {
		return &notGrantedError{hostport: clip(hostPort(host, port), quotedBytes), granted: o.grantedHosts()}
	}
	return nil
}
