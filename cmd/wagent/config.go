package main

import (
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/render"
)

// The config file (app.Config) holds what a person sets once; each
// setting is taken from its flag, its environment variable, the chosen
// profile, the file's top level, then the built-in default (app.Sources).

// newResolver resolves settings for one command: its flags, the
// environment and the config file.
func newResolver(c *cli.Context, env *cliEnv) (*app.Sources, error) {
	cfg, err := env.LoadConfig()
	if err != nil {
		return nil, err
	}
	var profile string
	if c != nil && c.IsSet("profile") {
		profile = c.String("profile")
	}
	return app.NewSources(cfg, env.Getenv, commandFlags(c), profile, "--profile")
}

// commandFlags looks up a command's flags that are set.
func commandFlags(c *cli.Context) app.Flags {
	return func(name string) (string, bool) {
		if c == nil {
			return "", false
		}
		for _, f := range c.Command.Flags {
			for _, n := range f.Names() {
				if n == name && c.IsSet(name) {
					return c.String(name), true
				}
			}
		}
		return "", false
	}
}

// mask shows a secret without revealing it: whether it is set, its
// length and its last four characters when it is long enough for that to
// be safe.
func mask(secret string) string {
	switch {
	case secret == "":
		return "not set"
	case len(secret) >= 16:
		return fmt.Sprintf("set (%d characters, ends in …%s)", len(secret), secret[len(secret)-4:])
	default:
		return fmt.Sprintf("set (%d characters)", len(secret))
	}
}

// maskURL hides a password in a URL's user info.
func maskURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func configCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "show the settings a new session would run with, and where each comes from",
		Subcommands: []*cli.Command{{
			Name:  "show",
			Usage: "print the effective settings with their sources (flags, environment, profile, file), secrets masked",
			UsageText: `wagent config show [--profile NAME] [--json] [flags of run]

The defaults row says which parts of the built-in pipeline (files, shell,
agents_md, skills, system_prompt; fetch hosts) a new session with no pipeline
gets; the file's defaults: key sets them.

Precedence: flags, then environment variables (WAGENT_PROVIDER, WAGENT_MODEL,
WAGENT_BASE_URL, WAGENT_API_KEY_ENV, WAGENT_PIPELINE, WAGENT_SYSTEM, WAGENT_PROFILE),
then the chosen profile, then the file's top level, then the defaults. The file is
$WAGENT_CONFIG, or $XDG_CONFIG_HOME/wagent/config.yaml, or ~/.config/wagent/config.yaml.

Examples:
   wagent config show
   wagent config show --profile local`,
			Flags: append([]cli.Flag{storeFlag}, providerFlags...),
			Action: func(c *cli.Context) error {
				if err := needArgs(c, 0, 0, "[--profile NAME] [--json]"); err != nil {
					return err
				}
				return showConfig(c, env)
			},
		}},
	}
}

func showConfig(c *cli.Context, env *cliEnv) error {
	r, err := newResolver(c, env)
	if err != nil {
		return err
	}
	all := r.All()
	file := r.Config().Path
	if file == "" {
		p, _ := app.ConfigPath(env.Getenv)
		file = "none (" + p + " does not exist)"
		if p == "" {
			file = "none"
		}
	}
	s, err := r.NewSettings()
	if err != nil {
		return err
	}
	key, keySrc := r.APIKey(s)
	type row struct{ Key, Value, Source string }
	rows := []row{{"config", file, ""}}
	prof := r.Profile()
	if prof == "" {
		prof = "none"
	}
	rows = append(rows, row{"profile", prof, r.ProfileSource()})
	for _, k := range app.ConfigKeys() {
		v := all[k]
		val := v.Value
		switch k {
		case "base_url":
			val = maskURL(val)
		case "pipeline":
			if val == "" {
				val = "built-in"
			}
		case "system":
			if s.System != "" {
				val = fmt.Sprintf("%q (%d bytes)", clipRunes(s.System, 60), len(s.System))
				v.Source = s.SystemSource
			} else {
				val = "none"
			}
		}
		if val == "" {
			val = "-"
		}
		rows = append(rows, row{k, val, v.Source})
	}
	if s.Provider != "script" {
		rows = append(rows, row{"api_key", mask(key), keySrc})
	}
	if v, ok := r.Flag("script"); ok && v != "" {
		rows = append(rows, row{"script", app.AbsPath(v), "--script"})
	}
	if len(r.Config().Prices) > 0 {
		var ms []string
		for m := range r.Config().Prices {
			ms = append(ms, m)
		}
		sort.Strings(ms)
		for _, m := range ms {
			p := r.Config().Prices[m]
			rows = append(rows, row{"price " + m, fmt.Sprintf("$%g in, $%g out per million tokens", p.Input, p.Output), "config " + r.Config().Path})
		}
	}
	rows = append(rows, row{"defaults", defaultsLine(r.Config().Defaults), defaultsSource(r.Config())})
	// The model's price when the config has none for it: the built-in one.
	if m := all["model"].Value; m != "" {
		if _, own := r.Config().Prices[m]; !own {
			if p, ok := app.BuiltinPrice(m); ok {
				rows = append(rows, row{"price " + m, fmt.Sprintf("$%g in, $%g out per million tokens", p.Input, p.Output), "built in (taken " + app.PricesTaken + "; prices: in the config overrides it)"})
			}
		}
	}
	if c.Bool("json") {
		out := map[string]any{}
		for _, rw := range rows {
			out[rw.Key] = map[string]string{"value": rw.Value, "source": rw.Source}
		}
		term.PrintJSON(env.Stdout, out)
		return nil
	}
	for _, rw := range rows {
		if rw.Source == "" {
			render.Fprintf(env.Stdout, "%-12s %s\n", rw.Key, rw.Value)
			continue
		}
		render.Fprintf(env.Stdout, "%-12s %-40s %s\n", rw.Key, rw.Value, rw.Source)
	}
	return nil
}

func clipRunes(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// defaultsLine says which parts of the built-in pipeline a new session
// gets: "files, shell, agents_md, skills, system_prompt; fetch: off".
func defaultsLine(p builtins.Parts) string {
	var on []string
	for _, part := range []struct {
		name string
		off  bool
	}{{"files", p.NoFiles}, {"shell", p.NoShell}, {"agents_md", p.NoAgentsMD}, {"skills", p.NoSkills}, {"system_prompt", p.NoSystemPrompt}} {
		if !part.off {
			on = append(on, part.name)
		}
	}
	fetch := "off"
	if len(p.Fetch) > 0 {
		fetch = strings.Join(p.Fetch, " ")
	}
	if len(on) == 0 {
		return "none; fetch: " + fetch
	}
	return strings.Join(on, ", ") + "; fetch: " + fetch
}

func defaultsSource(cfg *app.Config) string {
	if reflect.DeepEqual(cfg.Defaults, builtins.Parts{}) {
		return "default (with no pipeline)"
	}
	return "config " + cfg.Path + " (with no pipeline)"
}
