package builtins_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// The default pipeline never mounts the home directory or / read-write,
// nor a folder no mount can name; a project folder it does.
func TestWritableProject(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	project := t.TempDir()
	file := filepath.Join(project, "f")
	os.WriteFile(file, nil, 0o644)
	colon := filepath.Join(project, "a:b")
	os.Mkdir(colon, 0o755)
	link := filepath.Join(project, "home-link")
	os.Symlink(home, link)
	for _, c := range []struct {
		dir, why string
	}{
		{project, ""},
		{home, "is your home directory"},
		{link, "is your home directory"},
		{"/", "is the root of the file system"},
		{file, "is not a directory"},
		{colon, "has a colon in its name"},
	} {
		ok, why := builtins.WritableProject(c.dir)
		if ok != (c.why == "") || !strings.HasPrefix(why, c.why) {
			t.Errorf("WritableProject(%s) = %v, %q; want %q", c.dir, ok, why, c.why)
		}
		for _, op := range builtins.DefaultPipelineIn("", c.dir).Ops {
			for _, m := range op.Mounts {
				if strings.HasSuffix(m, ":rw") && c.why != "" {
					t.Errorf("%s: %s mounts %s", c.dir, op.Use, m)
				}
			}
		}
	}
}

// The skills op is in the default pipeline with or without the skills
// folder (its mount is optional), naming the folder for /skills.
func TestDefaultPipelineKeepsSkillsWithoutTheFolder(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "skills")
	for _, op := range builtins.DefaultPipeline(missing).Ops {
		if op.Use == "builtin:skills" {
			if len(op.Mounts) != 0 || !strings.Contains(string(op.Config), missing) {
				t.Errorf("skills: mounts %v, config %s", op.Mounts, op.Config)
			}
			return
		}
	}
	t.Error("no skills op without the skills folder")
}

// The default shell's git grants take no free argument that could make
// git write a file (--output, -o) or run a program (--ext-diff, -c
// diff.external=…, a config it wrote), and its commands read no system
// config.
func TestDefaultShellGrantsNoGitWriteOrProgram(t *testing.T) {
	spec := builtins.DefaultPipelineIn("", t.TempDir())
	var grants []wasmhost.ExecGrant
	for _, op := range spec.Ops {
		if op.Use == "builtin:shell" {
			grants = op.Exec
		}
	}
	if !wasmhost.CanConfine() {
		t.Fatal("this system cannot confine commands: the default pipeline offers no shell here, nothing to test")
	}
	if len(grants) == 0 {
		t.Fatal("the default pipeline has no shell grants")
	}
	hostile := []string{"--output=.git/config", "-o", "--ext-diff", "-c", "--textconv", "--no-index"}
	for _, g := range grants {
		p, err := hostabi.ParseCommandPattern(g.Cmd)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(g.Env, "GIT_CONFIG_NOSYSTEM=1") {
			t.Errorf("%q: env %v does not turn off git's system config", g.Cmd, g.Env)
		}
		for _, base := range [][]string{{"git", "status"}, {"git", "diff"}, {"git", "diff", "--staged"}, {"git", "log"}, {"git", "log", "--oneline", "-n", "30"}, {"git", "show"}} {
			for _, h := range hostile {
				for at := 1; at <= len(base); at++ {
					argv := append(append(slices.Clone(base[:at]), h), base[at:]...)
					if p.Match(argv) {
						t.Errorf("grant %q allows %q", g.Cmd, argv)
					}
					if argv := append(slices.Clone(base), h, "x"); p.Match(argv) {
						t.Errorf("grant %q allows %q", g.Cmd, argv)
					}
				}
			}
		}
	}
}
