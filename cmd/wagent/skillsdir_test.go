package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/event"
)

// The default skills folder follows the data directory; WAGENT_SKILLS
// overrides it.
func TestSkillsFolder(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("the data directory is under Library on macOS")
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"WAGENT_SKILLS wins", map[string]string{"WAGENT_SKILLS": "/s", "WAGENT_HOME": "/h", "HOME": "/home/u"}, "/s"},
		{"beside the store in WAGENT_HOME", map[string]string{"WAGENT_HOME": "/h", "HOME": "/home/u"}, "/h/skills"},
		{"XDG_DATA_HOME", map[string]string{"XDG_DATA_HOME": "/x", "HOME": "/home/u"}, "/x/wagent/skills"},
		{"the home's data directory", map[string]string{"HOME": "/home/u"}, "/home/u/.local/share/wagent/skills"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := app.SkillsDir(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("skillsDir = %q, want %q", got, tc.want)
			}
		})
	}
}

// With no pipeline file, the skills in the data directory's skills folder
// are offered to the model.
func TestDefaultPipelineOffersTheDataDirectorysSkills(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "skills", "changelog")
	dst := filepath.Join(home, "skills", "changelog")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	r := wagIn(t, map[string]string{"WAGENT_HOME": home, "XDG_CONFIG_HOME": keyedConfigHome(t)}, "", "run", "--session", "sk", "--script", testdata("plain-replies.yaml"), "hi")
	if r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	for _, e := range events(t, home, "sk") {
		if e.Type != event.EvRequestHeader {
			continue
		}
		var h event.RequestHeader
		json.Unmarshal(e.Data, &h)
		for _, p := range h.PromptParts {
			if p.Op == "skills" && strings.Contains(p.Text, "changelog") {
				return
			}
		}
		t.Fatalf("the request's prompt parts %+v do not offer the changelog skill", h.PromptParts)
	}
	t.Fatal("no request header")
}
