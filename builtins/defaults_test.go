package builtins_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/builtins"
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
