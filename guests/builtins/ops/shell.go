package ops

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Shell gives the model a shell tool that runs the commands the pipeline
// grants (grants: {exec: ["go test ./...", "git diff *"], mounts:
// ["./:/work:rw"]}) in the project, and answers with the exit code, stdout
// and stderr, each cut to a size with a note saying how much was left
// out. The command line is split into words as a shell would (quotes
// group, a backslash escapes) but nothing is expanded and no operator
// means anything: `ls src; touch X` is ls with three arguments, which a
// grant of `ls *` refuses. Only a grant that says shell: true runs a line
// under sh -c. The tool description lists what is granted, so the model
// knows what it may run.
//
// A command that ran is a result whatever its exit code (the model reads
// the code); one that is not granted, cannot start or is killed (timeout,
// too much output, the turn cancelled) is an error result. Commands are
// not idempotent: one a crash interrupted is answered
// TOOL_OUTCOME_UNKNOWN.
//
// Config: max_output_bytes [32768] (of stdout, and of stderr, in a
// result: the beginning and the end are kept).
func Shell() Op {
	return Op{
		Manifest: hostabi.Manifest{
			Name:    "shell",
			Version: "1.0.0",
			Capabilities: hostabi.Capabilities{
				Mounts: []hostabi.GuestMount{{Path: "/work", Write: true}},
				Exec:   []string{hostabi.AnyCommand},
			},
			ConfigSchema: strictSchema(`"max_output_bytes":{"type":"integer","minimum":256,"maximum":1048576}`),
		},
		Tools: []pdk.OwnedTool{
			pdk.Tool(hostabi.ToolSpec{Name: "shell", Annotations: &hostabi.ToolAnnotations{Destructive: true},
				Description: "Run a command in the project and get its exit code, stdout and stderr. " +
					"The command line is split into words as a shell would, but nothing is expanded and ; | && > are plain characters, so run one command per call."},
				runShell, pdk.OfferWith(describeShell)),
		},
	}
}

type shellConfig struct {
	MaxOutputBytes int `json:"max_output_bytes"`
}

var shellCache configCache[shellConfig]

func parseShell(raw []byte) (shellConfig, error) {
	c := shellConfig{MaxOutputBytes: 32 << 10}
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("shell: %v", err)
	}
	return c, nil
}

// describeShell lists the granted commands in the tool's description.
func describeShell(c *pdk.Call, spec *hostabi.ToolSpec) bool {
	g := c.Granted()
	if len(g.Exec) == 0 {
		return false
	}
	var argv, lines []string
	for _, x := range g.Exec {
		if x.Shell {
			lines = append(lines, x.Cmd)
		} else {
			argv = append(argv, x.Cmd)
		}
	}
	if len(argv) > 0 {
		spec.Description += " Allowed commands (a * is any one argument, ** any remaining arguments): " + strings.Join(argv, "; ") + "."
	}
	if len(lines) > 0 {
		spec.Description += " Command lines run by a shell (a * is any text): " + strings.Join(lines, "; ") + "."
	}
	if len(g.Mounts) > 0 {
		spec.Description += " Commands run in " + g.Mounts[0].Path + " unless cwd names a directory inside it."
	}
	return true
}

type shellArgs struct {
	Command, Cwd string
	TimeoutMS    int
}

func (a *shellArgs) Fields(f *pdk.Fields) {
	f.String("command", &a.Command).Required().Describe("the command line, e.g. go test ./...")
	f.String("cwd", &a.Cwd).Describe("the directory to run it in, relative to the project (default: the project)")
	f.Int("timeout_ms", &a.TimeoutMS).Describe("stop it after this many milliseconds (the grant's timeout is the most)")
}

func runShell(c *pdk.Call, a shellArgs) (string, error) {
	cfg, err := shellCache.get(c.RawConfig(), parseShell)
	if err != nil {
		return "", err
	}
	g := c.Granted()
	req := hostabi.ExecRequest{Dir: a.Cwd, TimeoutMS: int64(a.TimeoutMS)}
	for _, x := range g.Exec {
		if x.Shell && hostabi.MatchShellLine(x.Cmd, a.Command) {
			req.Shell = a.Command
			break
		}
	}
	if req.Shell == "" {
		argv, err := hostabi.SplitCommand(a.Command)
		if err != nil {
			return "", fmt.Errorf("the command line %v", err)
		}
		if len(argv) == 0 {
			return "", fmt.Errorf("the command line is empty")
		}
		req.Argv = argv
	}
	if req.Dir != "" && !strings.HasPrefix(req.Dir, "/") && len(g.Mounts) > 0 {
		req.Dir = g.Mounts[0].Path + "/" + req.Dir
	}
	resp := c.Exec(req)
	if resp.Code != "" && resp.Killed == "" {
		return "", fmt.Errorf("%s", strings.TrimPrefix(resp.Error, "exec: "))
	}
	var b strings.Builder
	if resp.Killed != "" {
		fmt.Fprintf(&b, "%s (after %s)\n", strings.TrimPrefix(resp.Error, "exec: "), seconds(resp.DurationMS))
	} else {
		fmt.Fprintf(&b, "exit code %d (%s)\n", resp.ExitCode, seconds(resp.DurationMS))
	}
	stream := func(name, text string, total, hostCut int64) {
		if total == 0 {
			return
		}
		kept, cut := headTail(text, cfg.MaxOutputBytes)
		fmt.Fprintf(&b, "--- %s", name)
		if hostCut > 0 || cut > 0 {
			fmt.Fprintf(&b, " (%d bytes; the middle is cut: about %d bytes left out)", total, hostCut+int64(cut))
		}
		b.WriteString(" ---\n")
		b.WriteString(kept)
		if !strings.HasSuffix(kept, "\n") {
			b.WriteByte('\n')
		}
	}
	stream("stdout", resp.Stdout, resp.StdoutBytes, resp.StdoutCut)
	stream("stderr", resp.Stderr, resp.StderrBytes, resp.StderrCut)
	if resp.StdoutBytes == 0 && resp.StderrBytes == 0 {
		b.WriteString("(no output)\n")
	}
	if resp.Killed != "" {
		return "", fmt.Errorf("%s", b.String())
	}
	return b.String(), nil
}

// headTail keeps the first and last halves of s within max bytes, marking
// the cut; it returns the bytes cut.
func headTail(s string, max int) (string, int) {
	if len(s) <= max {
		return s, 0
	}
	h := cutUTF8(s, max/2)
	t := s[len(s)-(max-len(h)):]
	for len(t) > 0 && t[0]&0xC0 == 0x80 {
		t = t[1:]
	}
	cut := len(s) - len(h) - len(t)
	return h + "\n… [" + strconv.Itoa(cut) + " bytes cut] …\n" + t, cut
}

func seconds(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s"
}
