package main

import (
	"strings"
	"testing"
)

// A mistyped command or flag is a usage error (exit 2) on one line that
// names the nearest real one; a word near nothing gets no guess.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sesions"}, `wagent: no command "sesions"; did you mean "sessions"? (see wagent --help)`},
		{[]string{"run", "--modle", "x", "hi"}, `wagent: flag provided but not defined: -modle; did you mean --model? (see wagent run --help)`},
		{[]string{"ops", "chek"}, `wagent: no command "ops chek"; did you mean "check"? (see wagent ops --help)`},
		{[]string{"log", "--jsn", "s"}, `did you mean --json?`},
		{[]string{"xyzzy"}, `wagent: no command "xyzzy" (see wagent --help)`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			home := t.TempDir()
			r := wag(t, home, tc.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d", r.code, exitUsage)
			}
			mustOneLine(t, r, tc.want)
			if strings.HasPrefix(tc.args[0], "xyzzy") && strings.Contains(r.stderr, "did you mean") {
				t.Errorf("a guess for a word near nothing: %q", r.stderr)
			}
			if sessions(t, home) != nil {
				t.Error("a mistyped command created a session")
			}
		})
	}
}

func TestNearest(t *testing.T) {
	names := []string{"sessions", "send", "steer", "serve", "resume", "run"}
	for typed, want := range map[string]string{
		"sesions": "sessions", "sessoins": "sessions", "sned": "send", "rn": "run", "sess": "sessions",
		"stere": "steer", "zzz": "", "reboot": "",
	} {
		if got := nearest(typed, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", typed, got, want)
		}
	}
}
