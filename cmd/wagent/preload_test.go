package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/builtins"
)

// The bundle loaded while the store opens is the one the session's
// pipeline will load: the core bundle for the default pipeline (in a
// project, with files and shell, or not) and for a file of core ops, the
// whole one for a file that names fetch.
func TestPreloadIsThePipelinesBundle(t *testing.T) {
	dir := t.TempDir()
	write := func(name, yaml string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	coreFile := write("core.yaml", "ops:\n  - use: builtin:approval\n  - use: builtin:max-turns\n")
	allFile := write("all.yaml", "ops:\n  - use: builtin:approval\n  - use: builtin:fetch\n")
	env := &cliEnv{Getenv: func(k string) string {
		if k == "WAGENT_HOME" || k == "HOME" || k == "XDG_CONFIG_HOME" {
			return dir
		}
		return ""
	}}
	for _, c := range []struct {
		name, pipeline string
		want           []byte
	}{
		{"default pipeline, in a project", "", builtins.CoreModule()},
		{"core ops", coreFile, builtins.CoreModule()},
		{"a capabilities op", allFile, builtins.Module()},
		{"a file that does not read", filepath.Join(dir, "missing.yaml"), builtins.CoreModule()},
		{"default pipeline, in the home directory", "", builtins.CoreModule()},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasSuffix(c.name, "home directory") {
				home := t.TempDir()
				t.Setenv("HOME", home)
				t.Chdir(home)
			}
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			fs.String("pipeline", "", "")
			fs.String("profile", "", "")
			if c.pipeline != "" {
				fs.Set("pipeline", c.pipeline)
			}
			c2 := cli.NewContext(cli.NewApp(), fs, nil)
			c2.Command = &cli.Command{Name: "run", Flags: []cli.Flag{&cli.StringFlag{Name: "pipeline"}, &cli.StringFlag{Name: "profile"}}}
			got := preloadFor(c2, env)
			if &got[0] != &c.want[0] {
				t.Errorf("preloaded the %d-byte bundle, want the %d-byte one", len(got), len(c.want))
			}
		})
	}
}
