package ops

import (
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Permission modes: what the approval op does with a call no rule
// decides. The config's mode holds until a person switches with /mode
// (wagent run and chat --mode send the command before the first prompt);
// the switch is recorded as the op's note "mode", so it is in the log,
// survives a restart and wins over the config from then on.
var modes = map[string]string{
	"ask":   "a person decides every call no rule allows (the built-ins' reads run without asking)",
	"edits": "write_file and edit_file of the files op run without asking; shell and every other write still ask",
	"plan":  "read-only: every call not marked read-only (shell, write_file, edit_file, MCP tools without readOnlyHint) is refused with the reason; reads run",
	"auto":  "every call the grants allow runs without asking (deny and ask rules still apply)",
	"deny":  "every call no rule allows is denied",
}

// modeNote is the note that holds the mode set at run time.
const modeNote = "mode"

// currentMode is the mode in force: the note, else the config's.
func currentMode(c *pdk.Call, cfg *approvalConfig) string {
	if v, ok := c.Note(modeNote); ok {
		if _, known := modes[v]; known {
			return v
		}
	}
	return cfg.Mode
}

// readOnly reports whether a call only reads: a built-in's read, or a
// tool its source marks read-only (an MCP tool without readOnlyHint
// counts as a write).
func readOnly(call *hostabi.PendingCall) bool {
	return builtinRead(call) || call.Annotations != nil && call.Annotations.ReadOnly
}

// isFileEdit reports whether a call is the built-in files op's write_file
// or edit_file (the pipeline keeps the name files for the built-in).
func isFileEdit(call *hostabi.PendingCall) bool {
	return call.Owner == "files" && (call.Name == "write_file" || call.Name == "edit_file")
}

// planRefusal is the reason the model reads for a call plan mode refuses.
func planRefusal(call *hostabi.PendingCall) string {
	return "plan mode: read-only; " + call.Name + " is not a read-only tool, so it was not run. " +
		"Read what you need, then describe the changes you would make; the person switches modes (/mode edits or /mode ask) to let them happen"
}

// modeCommand answers /mode [MODE]: with no argument it says the mode in
// force, with one it records the new mode.
func modeCommand(c *pdk.Call) error {
	cfg, err := approvalCache.get(c.RawConfig(), parseApproval)
	if err != nil {
		return err
	}
	arg := strings.ToLower(strings.TrimSpace(c.View.Command.Args))
	cur := currentMode(c, cfg)
	switch {
	case arg == "":
		c.Reply("mode " + cur + ": " + modes[cur] + ". Switch with /mode ask|edits|plan|auto.")
	case arg == "deny" || modes[arg] == "":
		c.Reply("/mode: no mode " + quoted(arg) + "; the modes are ask, edits, plan and auto (now: " + cur + ")")
	default:
		c.SetNote(modeNote, arg)
		c.Reply("mode " + arg + ": " + modes[arg] + ".")
	}
	return nil
}
