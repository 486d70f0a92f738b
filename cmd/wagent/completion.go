package main

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/render"
)

// Shell completion: `wagent completion bash|zsh|fish` prints a script
// that asks the hidden `wagent __complete WORD…` for candidates, so the
// three shells complete the same way from one definition (the commands
// and flags as the CLI declares them, and the store's sessions where a
// command takes SESSION). With no candidate the shells complete file
// names, for the flags that take a FILE.

var completionScripts = map[string]string{
	"bash": `# wagent completion for bash: source it from ~/.bashrc
_wagent() {
    local IFS=$'\n'
    local words=("${COMP_WORDS[@]:1:COMP_CWORD}")
    COMPREPLY=($(wagent __complete "${words[@]}" 2>/dev/null))
    if [ ${#COMPREPLY[@]} -eq 0 ]; then
        COMPREPLY=($(compgen -f -- "${COMP_WORDS[COMP_CWORD]}"))
    fi
}
complete -o filenames -F _wagent wagent
`,
	"zsh": `#compdef wagent
# wagent completion for zsh: put it in a folder of $fpath as _wagent
_wagent() {
    local -a candidates
    candidates=("${(@f)$(wagent __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    candidates=(${candidates:#})
    if (( ${#candidates} )); then
        compadd -a candidates
    else
        _files
    fi
}
if [ "$funcstack[1]" = "_wagent" ]; then
    _wagent "$@"
else
    compdef _wagent wagent
fi
`,
	"fish": `# wagent completion for fish: save it as ~/.config/fish/completions/wagent.fish
function __wagent_complete
    set -l words (commandline -opc)[2..-1] (commandline -ct)
    wagent __complete $words 2>/dev/null
end
complete -c wagent -f -a '(__wagent_complete)'
`,
}

func completionCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "completion",
		Usage: "print a shell completion script (bash, zsh or fish)",
		UsageText: `wagent completion bash|zsh|fish

Commands, subcommands, flags and session ids complete.

Examples:
   echo 'source <(wagent completion bash)' >> ~/.bashrc
   wagent completion zsh > "${fpath[1]}/_wagent"
   wagent completion fish > ~/.config/fish/completions/wagent.fish`,
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "bash|zsh|fish"); err != nil {
				return err
			}
			s, ok := completionScripts[c.Args().First()]
			if !ok {
				return fail(exitUsage, "no completion for shell %q: use bash, zsh or fish", c.Args().First())
			}
			render.Fprint(env.Stdout, s)
			return nil
		},
	}
}

// completeCommand is the entry point the scripts call: its arguments are
// the words after wagent, the last the one being completed ("" for a new
// word); it prints the candidates, one a line.
func completeCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:            "__complete",
		Hidden:          true,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			words := c.Args().Slice()
			if len(words) == 0 {
				words = []string{""}
			}
			for _, s := range complete(c.App, words, func(store string) []string { return sessionIDs(c, env, store) }) {
				render.Fprintln(env.Stdout, s)
			}
			return nil
		},
	}
}

// complete returns the candidates for the last of words; sessions lists
// the sessions of the store the line names with --store ("": the default).
func complete(app *cli.App, words []string, sessions func(store string) []string) []string {
	cur, done := words[len(words)-1], words[:len(words)-1]
	cmds, flags := app.Commands, app.Flags
	var cmd *cli.Command
	positional := 0
	valueOf := "" // the flag whose value cur is
	store := ""
	for i := 0; i < len(done); i++ {
		w := done[i]
		if name, ok := flagName(w); ok {
			if f := flagNamed(flags, name); f != nil && takesValue(f) {
				v, inline := strings.CutPrefix(w, "--"+name+"=")
				switch {
				case inline:
				case i+1 < len(done):
					i++
					v = done[i]
				default:
					valueOf = name
				}
				if name == "store" {
					store = v
				}
			}
			continue
		}
		if c := find(cmds, w); c != nil && positional == 0 {
			cmd, cmds, flags = c, c.Subcommands, c.Flags
			continue
		}
		positional++
	}
	var out []string
	add := func(names ...string) {
		for _, n := range names {
			if strings.HasPrefix(n, cur) {
				out = append(out, n)
			}
		}
	}
	switch {
	case valueOf == "session":
		add(sessions(store)...)
	case valueOf != "":
		// a file or a value: left to the shell
	case strings.HasPrefix(cur, "-"):
		for _, f := range append(slices.Clip(flags), cli.HelpFlag) {
			for _, n := range f.Names() {
				if len(n) == 1 {
					add("-" + n)
				} else {
					add("--" + n)
				}
			}
		}
	case len(cmds) > 0 && positional == 0:
		for _, c := range cmds {
			if !c.Hidden {
				add(c.Name)
			}
		}
		if cmd == nil {
			add("help")
		}
	case cmd != nil && positional == 0 && takesSession(cmd):
		add(sessions(store)...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// takesSession says whether cmd's first argument is a session, as its
// usage says ("wagent log SESSION", "wagent chat [SESSION]").
func takesSession(cmd *cli.Command) bool {
	first, _, _ := strings.Cut(cmd.UsageText, "\n")
	for _, w := range strings.Fields(first)[min(2, len(strings.Fields(first))):] {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[-") {
			continue
		}
		return strings.Trim(w, "[]") == "SESSION"
	}
	return false
}

func flagNamed(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func takesValue(f cli.Flag) bool {
	_, isBool := f.(*cli.BoolFlag)
	return !isBool
}

// sessionIDs lists the sessions of store (the default store when ""),
// none when it cannot be read: completion says nothing rather than an
// error.
func sessionIDs(c *cli.Context, env *cliEnv, store string) []string {
	ctx := context.Background()
	quiet := *env
	quiet.Stderr = discard{}
	if store != "" { // the --store on the line, as the command would take it
		quiet.Getenv = func(k string) string {
			if k == "WAGENT_STORE" {
				return store
			}
			return env.Getenv(k)
		}
	}
	cn, err := connect(ctx, c, &quiet, session.ModeRead)
	if err != nil {
		return nil
	}
	defer cn.Close()
	list, err := cn.Client.Sessions(ctx)
	if err != nil {
		return nil
	}
	var ids []string
	for _, s := range list.Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
