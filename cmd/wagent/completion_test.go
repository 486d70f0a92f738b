package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// shell finds a shell the completion tests run, or fails saying how to
// install it: a missing shell fails the test, it does not skip it.
func shell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("the completion tests need %s, which is not on PATH: install it (Debian: apt-get install %s)", name, name)
	}
	return p
}

// Each shell's script parses in that shell (bash -n, zsh -n, fish
// --no-execute); an unknown shell is a usage error.
func TestCompletionScriptsParse(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct{ sh, flag string }{{"bash", "-n"}, {"zsh", "-n"}, {"fish", "--no-execute"}} {
		t.Run(tc.sh, func(t *testing.T) {
			sh := shell(t, tc.sh)
			r := wag(t, home, "completion", tc.sh)
			if r.code != exitOK || !strings.Contains(r.stdout, "wagent __complete") {
				t.Fatalf("completion %s: %d %q %s", tc.sh, r.code, r.stdout, r.stderr)
			}
			f := filepath.Join(t.TempDir(), "wagent."+tc.sh)
			if err := os.WriteFile(f, []byte(r.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(sh, tc.flag, f).CombinedOutput(); err != nil {
				t.Errorf("%s %s: %v\n%s\nscript:\n%s", tc.sh, tc.flag, err, out, r.stdout)
			}
		})
	}
	r := wag(t, home, "completion", "tcsh")
	if r.code != exitUsage {
		t.Errorf("completion tcsh: exit %d", r.code)
	}
	mustOneLine(t, r, `no completion for shell "tcsh": use bash, zsh or fish`)
}

// The entry point the scripts call completes commands, subcommands, flags
// and, where a command takes SESSION (or --session), the store's sessions.
func TestCompleteCandidates(t *testing.T) {
	home := t.TempDir()
	for _, id := range []string{"alpha-1", "beta-2"} {
		if r := wag(t, home, "run", "--session", id, "--script", testdata("plain-replies.yaml"), "hi"); r.code != exitOK {
			t.Fatalf("run: %d %s", r.code, r.stderr)
		}
	}
	other := filepath.Join(t.TempDir(), "store")
	if r := wag(t, home, "run", "--store", other, "--session", "other-3", "--script", testdata("plain-replies.yaml"), "hi"); r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"se"}, []string{"send", "serve", "sessions"}},
		{[]string{"comp"}, []string{"completion"}},
		{[]string{"run", "--mo"}, []string{"--mode", "--model"}},
		{[]string{"log", "-"}, []string{"--follow", "--help", "--json", "--store", "-f", "-h"}},
		{[]string{"ops", "in"}, []string{"inspect"}},
		{[]string{"log", ""}, []string{"alpha-1", "beta-2"}},
		{[]string{"approve", "b"}, []string{"beta-2"}},
		{[]string{"chat", "al"}, []string{"alpha-1"}},
		{[]string{"run", "--session", ""}, []string{"alpha-1", "beta-2"}},
		{[]string{"log", "alpha-1", ""}, nil},    // one session is all it takes
		{[]string{"run", "--pipeline", ""}, nil}, // a file: the shell's
		{[]string{"__comp"}, nil},                // hidden
		{[]string{"--store", other, "log", ""}, []string{"other-3"}},
		{[]string{"log", "--store=" + other, ""}, []string{"other-3"}},
	} {
		r := wag(t, home, append([]string{"__complete"}, tc.words...)...)
		var got []string
		if s := strings.TrimSpace(r.stdout); s != "" {
			got = strings.Split(s, "\n")
		}
		if r.code != exitOK || r.stderr != "" {
			t.Errorf("%q: exit %d, stderr %q", tc.words, r.code, r.stderr)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q: candidates mismatch (-want +got):\n%s", tc.words, diff)
		}
	}
}

// The scripts work in the real shells with the real binary: bash's
// completion function and fish's complete -C give the candidates.
func TestCompletionInTheShells(t *testing.T) {
	bin, err := filepath.Abs(wagentBin(t))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := append(os.Environ(), "WAGENT_HOME="+home, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	run := exec.Command(bin, "run", "--session", "gamma-3", "--script", testdata("plain-replies.yaml"), "hi")
	run.Env = env
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	script := func(sh string) string {
		c := exec.Command(bin, "completion", sh)
		c.Env = env
		out, err := c.Output()
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "wagent."+sh)
		os.WriteFile(f, out, 0o644)
		return f
	}
	for _, tc := range []struct {
		sh   string
		args []string
		want string
	}{
		{"bash", []string{"-c", `source "$1"; COMP_WORDS=(wagent sess); COMP_CWORD=1; _wagent; printf '%s\n' "${COMPREPLY[@]}"`, "x", script("bash")}, "sessions"},
		{"bash", []string{"-c", `source "$1"; COMP_WORDS=(wagent log ''); COMP_CWORD=2; _wagent; printf '%s\n' "${COMPREPLY[@]}"`, "x", script("bash")}, "gamma-3"},
		{"fish", []string{"-c", `source $argv[1]; complete -C 'wagent run --mode'`, script("fish")}, "--mode\n--model"},
		{"fish", []string{"-c", `source $argv[1]; complete -C 'wagent resume g'`, script("fish")}, "gamma-3"},
	} {
		c := exec.Command(shell(t, tc.sh), tc.args...)
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("%s %q: %v, output %q, want %q", tc.sh, tc.args[1], err, out, tc.want)
		}
	}
}
