package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"
)

// The config file holds what a person sets once: the provider, model,
// base URL, the name of the API key's environment variable, the pipeline,
// the system prompt, named profiles of those, and a price table.
//
//	# ~/.config/wagent/config.yaml ($XDG_CONFIG_HOME/wagent, or $WAGENT_CONFIG)
//	model: gpt-4o-mini
//	system: "@prompts/system.md"        # text, or @FILE relative to this file
//	profile: local                      # the profile used when none is named
//	profiles:
//	  local: {base_url: "http://localhost:11434/v1", model: "qwen3:8b"}
//	  prod:  {model: gpt-4.1, api_key_env: PROD_OPENAI_KEY, pipeline: ~/agents/prod.yaml}
//	prices:                             # USD per million tokens
//	  gpt-4o-mini: {input: 0.15, output: 0.60}
//	store: nats://nats.internal:4222    # a DIR, badger:DIR or nats:// URL
//
// Each setting is taken from, in order: its flag, its environment
// variable, the chosen profile, the file's top level; then the built-in
// default. A new session records the result (never a key), so resume and
// later runs of it need none of this; on an existing session only flags
// (and an explicit --profile) change what it runs with.

// configKeys are the settings a profile (and the file's top level) sets.
var configKeys = []string{"provider", "model", "base_url", "api_key_env", "pipeline", "system"}

// settingEnv is the environment variable of each setting.
var settingEnv = map[string]string{
	"provider": "WAGENT_PROVIDER", "model": "WAGENT_MODEL", "base_url": "WAGENT_BASE_URL",
	"api_key_env": "WAGENT_API_KEY_ENV", "pipeline": "WAGENT_PIPELINE", "system": "WAGENT_SYSTEM",
}

// settingFlag is the flag of each setting.
var settingFlag = map[string]string{
	"provider": "provider", "model": "model", "base_url": "base-url",
	"api_key_env": "api-key-env", "pipeline": "pipeline", "system": "system",
}

type profileYAML struct {
	Provider  string `yaml:"provider"`
	Model     string `yaml:"model"`
	BaseURL   string `yaml:"base_url"`
	APIKeyEnv string `yaml:"api_key_env"`
	Pipeline  string `yaml:"pipeline"`
	System    string `yaml:"system"`
}

func (p *profileYAML) get(key string) string {
	switch key {
	case "provider":
		return p.Provider
	case "model":
		return p.Model
	case "base_url":
		return p.BaseURL
	case "api_key_env":
		return p.APIKeyEnv
	case "pipeline":
		return p.Pipeline
	case "system":
		return p.System
	}
	return ""
}

type configYAML struct {
	profileYAML `yaml:",inline"`
	Profile     string                 `yaml:"profile"`
	Profiles    map[string]profileYAML `yaml:"profiles"`
	Prices      map[string]priceYAML   `yaml:"prices"`
	Store       string                 `yaml:"store"`
}

type priceYAML struct {
	Input  *float64 `yaml:"input"`
	Output *float64 `yaml:"output"`
}

// price is what a million tokens cost, in US dollars.
type price struct{ Input, Output float64 }

// config is a loaded config file (empty when there is none).
type config struct {
	// Path is the file ("" when none was found).
	Path     string
	Top      profileYAML
	Profile  string
	Profiles map[string]profileYAML
	// Prices by model name; a name may end in * (a prefix).
	Prices map[string]price
	// Store is the store every command uses when --store and
	// $WAGENT_STORE name none (a relative directory is the file's).
	Store string
}

var knownConfigKeys = map[string]string{
	"configYAML":  "provider, model, base_url, api_key_env, pipeline, system, profile, profiles, prices, store",
	"profileYAML": "provider, model, base_url, api_key_env, pipeline, system",
	"priceYAML":   "input, output (US dollars per million tokens)",
}

var unknownConfigField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type main\.(\w+)$`)

// configPath is where the config file is: $WAGENT_CONFIG, else
// $XDG_CONFIG_HOME/wagent/config.yaml, else ~/.config/wagent/config.yaml
// (on macOS ~/Library/Application Support/wagent/config.yaml). explicit
// says the person named it, so a missing file is an error.
func configPath(env *cliEnv) (path string, explicit bool) {
	if p := env.getenv("WAGENT_CONFIG"); p != "" {
		return p, true
	}
	if x := env.getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "wagent", "config.yaml"), false
	}
	home := env.getenv("HOME")
	if home == "" {
		return "", false
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "wagent", "config.yaml"), false
	}
	return filepath.Join(home, ".config", "wagent", "config.yaml"), false
}

// loadConfig reads the config file, refusing unknown keys (with the file
// and line) and values of the wrong kind. No file is an empty config. The
// file is read once per command: the store, the settings and the prices
// all come from the same reading.
func loadConfig(env *cliEnv) (*config, error) {
	if env.config == nil {
		cfg, err := readConfig(env)
		env.config = &loadedConfig{cfg, err}
	}
	return env.config.cfg, env.config.err
}

type loadedConfig struct {
	cfg *config
	err error
}

func readConfig(env *cliEnv) (*config, error) {
	path, explicit := configPath(env)
	cfg := &config{}
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !explicit {
			return cfg, nil
		}
		return nil, fail(exitFailure, "config: %v", err)
	}
	cfg.Path = path
	if abs, err := filepath.Abs(path); err == nil {
		cfg.Path = abs
	}
	var f configYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fail(exitFailure, "%s", configError(path, err))
	}
	cfg.Top, cfg.Profile, cfg.Profiles = f.profileYAML, f.Profile, f.Profiles
	cfg.Store = f.Store
	if st := f.Store; st != "" && !strings.Contains(st, ":") {
		// A directory: ~/ is the home, a relative one the file's.
		cfg.Store = (&resolver{env: env, cfg: cfg}).filePath(st)
	}
	if cfg.Profile != "" {
		if _, ok := cfg.Profiles[cfg.Profile]; !ok {
			return nil, fail(exitFailure, "config %s: profile: %q is not under profiles:%s", path, cfg.Profile, profileNames(cfg))
		}
	}
	cfg.Prices = map[string]price{}
	for model, p := range f.Prices {
		if p.Input == nil || p.Output == nil || *p.Input < 0 || *p.Output < 0 {
			return nil, fail(exitFailure, "config %s: prices: %s needs input and output, in US dollars per million tokens (0 or more)", path, model)
		}
		cfg.Prices[model] = price{Input: *p.Input, Output: *p.Output}
	}
	return cfg, nil
}

// configError is one line naming the file and line of a decoding error,
// and for an unknown key the keys known there.
func configError(path string, err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		first := te.Errors[0]
		if m := unknownConfigField.FindStringSubmatch(first); m != nil {
			return fmt.Sprintf("config %s:%s: unknown key %q; known keys here: %s", path, m[1], m[2], knownConfigKeys[m[3]])
		}
		first = strings.ReplaceAll(first, "main.", "")
		if l, rest, ok := strings.Cut(strings.TrimPrefix(first, "line "), ": "); ok {
			return fmt.Sprintf("config %s:%s: %s", path, l, rest)
		}
		return fmt.Sprintf("config %s: %s", path, first)
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if l, rest, ok := strings.Cut(strings.TrimPrefix(msg, "line "), ": "); ok && strings.HasPrefix(msg, "line ") {
		return fmt.Sprintf("config %s:%s: %s", path, l, rest)
	}
	return fmt.Sprintf("config %s: %s", path, oneLine(msg))
}

func profileNames(cfg *config) string {
	if len(cfg.Profiles) == 0 {
		return " there are none"
	}
	var names []string
	for n := range cfg.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return " the profiles are " + strings.Join(names, ", ")
}

// priceOf returns the price of a model: an exact entry, else the longest
// prefix entry ("gpt-4o*").
func (cfg *config) priceOf(model string) (price, bool) {
	if cfg == nil || model == "" {
		return price{}, false
	}
	if p, ok := cfg.Prices[model]; ok {
		return p, true
	}
	best, found := -1, price{}
	for k, p := range cfg.Prices {
		if pre, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(model, pre) && len(pre) > best {
			best, found = len(pre), p
		}
	}
	return found, best >= 0
}

// cost is the estimated cost of a model's usage in US dollars.
func (cfg *config) cost(model string, in, out int) (float64, bool) {
	p, ok := cfg.priceOf(model)
	if !ok {
		return 0, false
	}
	return (float64(in)*p.Input + float64(out)*p.Output) / 1e6, true
}

// resolved is a setting's value and where it came from.
type resolved struct {
	value, source string
}

// resolver resolves settings for one command: its flags, the environment
// and the config file.
type resolver struct {
	c       *cli.Context
	env     *cliEnv
	cfg     *config
	profile string // the chosen profile ("" for none)
	// profileSource says how it was chosen.
	profileSource string
}

func newResolver(c *cli.Context, env *cliEnv) (*resolver, error) {
	cfg, err := loadConfig(env)
	if err != nil {
		return nil, err
	}
	r := &resolver{c: c, env: env, cfg: cfg}
	switch {
	case c.IsSet("profile"):
		r.profile, r.profileSource = c.String("profile"), "--profile"
	case env.getenv("WAGENT_PROFILE") != "":
		r.profile, r.profileSource = env.getenv("WAGENT_PROFILE"), "$WAGENT_PROFILE"
	case cfg.Profile != "":
		r.profile, r.profileSource = cfg.Profile, "config "+cfg.Path
	}
	if r.profile != "" {
		if _, ok := cfg.Profiles[r.profile]; !ok {
			where := "no config file"
			if cfg.Path != "" {
				where = cfg.Path
			}
			return nil, fail(exitUsage, "no profile %q in %s (%s);%s", r.profile, where, r.profileSource, profileNames(cfg))
		}
	}
	return r, nil
}

// flag returns a flag's value when the command has the flag and it is set.
func (r *resolver) flag(name string) (string, bool) {
	if r.c == nil {
		return "", false
	}
	for _, f := range r.c.Command.Flags {
		for _, n := range f.Names() {
			if n == name && r.c.IsSet(name) {
				return r.c.String(name), true
			}
		}
	}
	return "", false
}

// get resolves one setting: flag, environment, profile, file.
func (r *resolver) get(key string) resolved {
	if v, ok := r.flag(settingFlag[key]); ok && v != "" {
		return resolved{v, "--" + settingFlag[key]}
	}
	if v := r.env.getenv(settingEnv[key]); v != "" {
		return resolved{v, "$" + settingEnv[key]}
	}
	if r.profile != "" {
		p := r.cfg.Profiles[r.profile]
		if v := p.get(key); v != "" {
			return resolved{r.cfgPath(key, v), "profile " + r.profile + " (" + r.cfg.Path + ")"}
		}
	}
	if v := r.cfg.Top.get(key); v != "" {
		return resolved{r.cfgPath(key, v), "config " + r.cfg.Path}
	}
	return resolved{}
}

// cfgPath makes a path the config file names (a pipeline, a system
// prompt's @FILE) absolute: ~/ is the home directory, a relative path is
// relative to the file.
func (r *resolver) cfgPath(key, v string) string {
	switch key {
	case "pipeline":
		return r.filePath(v)
	case "system":
		if p, ok := strings.CutPrefix(v, "@"); ok && !strings.HasPrefix(p, "@") {
			return "@" + r.filePath(p)
		}
	}
	return v
}

func (r *resolver) filePath(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok && r.env.getenv("HOME") != "" {
		return filepath.Join(r.env.getenv("HOME"), rest)
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(r.cfg.Path), p)
}

// all resolves every setting with its source, defaults included: what a
// new session runs with, and what config show prints.
func (r *resolver) all() map[string]resolved {
	out := map[string]resolved{}
	for _, k := range configKeys {
		out[k] = r.get(k)
	}
	script, _ := r.flag("script")
	if out["provider"].value == "" {
		if script != "" {
			out["provider"] = resolved{"script", "default (--script is given)"}
		} else {
			out["provider"] = resolved{"openai", "default"}
		}
	}
	prov := out["provider"].value
	if out["base_url"].value == "" {
		switch prov {
		case "anthropic":
			if v := r.env.getenv("ANTHROPIC_BASE_URL"); v != "" {
				out["base_url"] = resolved{v, "$ANTHROPIC_BASE_URL"}
			} else {
				out["base_url"] = resolved{"https://api.anthropic.com", "default"}
			}
		case "openai":
			if v := r.env.getenv("OPENAI_BASE_URL"); v != "" {
				out["base_url"] = resolved{v, "$OPENAI_BASE_URL"}
			} else {
				out["base_url"] = resolved{"https://api.openai.com/v1", "default"}
			}
		}
	}
	if out["api_key_env"].value == "" && prov != "script" {
		out["api_key_env"] = resolved{defaultKeyEnv(prov), "default"}
	}
	if out["pipeline"].value == "" {
		out["pipeline"] = resolved{"", "default (the built-in pipeline)"}
	}
	if out["model"].value == "" && prov != "script" {
		out["model"] = resolved{"", "not set"}
	}
	return out
}

func defaultKeyEnv(provider string) string {
	if provider == "anthropic" {
		return "ANTHROPIC_API_KEY"
	}
	return "OPENAI_API_KEY"
}

// newSettings resolves the settings a new session records.
func (r *resolver) newSettings() (settings, error) {
	all := r.all()
	switch p := all["provider"]; p.value {
	case "openai", "anthropic", "script":
	default:
		// Named with where it came from: a typo in the file is not a flag
		// (and, like the file's other mistakes, not a usage error).
		code := exitUsage
		if strings.HasPrefix(p.source, "config ") || strings.HasPrefix(p.source, "profile ") {
			code = exitFailure
		}
		return settings{}, fail(code, "unknown provider %q from %s: use openai, anthropic or script", p.value, p.source)
	}
	s := settings{
		Provider:  all["provider"].value,
		Model:     all["model"].value,
		APIKeyEnv: all["api_key_env"].value,
	}
	// A default base URL is left to the provider (it stays the default if
	// that changes); one that was set is recorded.
	if src := all["base_url"].source; src != "default" {
		s.BaseURL = all["base_url"].value
	}
	if s.APIKeyEnv == defaultKeyEnv(s.Provider) {
		s.APIKeyEnv = ""
	}
	if p := all["pipeline"].value; p != "" {
		s.Pipeline = absPath(p)
	}
	if v, ok := r.flag("script"); ok && v != "" {
		s.Script = absPath(v)
	}
	if sys := all["system"]; sys.value != "" {
		text, src, err := systemPrompt(sys.value, sys.source)
		if err != nil {
			return settings{}, err
		}
		s.System, s.SystemSource = text, src
	}
	if wd, err := os.Getwd(); err == nil {
		s.Dir = wd
	}
	return s, nil
}

// override applies what this command says explicitly to an existing
// session's recorded settings: its flags, and the values of a profile it
// names with --profile.
func (r *resolver) override(recorded settings) (settings, error) {
	s := recorded
	set := func(key, v, source string) error {
		switch key {
		case "provider":
			s.Provider = v
		case "model":
			s.Model = v
		case "base_url":
			s.BaseURL = v
		case "api_key_env":
			s.APIKeyEnv = v
		case "pipeline":
			s.Pipeline = absPath(v)
		case "system":
			text, src, err := systemPrompt(v, source)
			if err != nil {
				return err
			}
			s.System, s.SystemSource = text, src
		}
		return nil
	}
	if r.c.IsSet("profile") && r.profile != "" {
		p := r.cfg.Profiles[r.profile]
		for _, k := range configKeys {
			if v := p.get(k); v != "" {
				if err := set(k, r.cfgPath(k, v), "profile "+r.profile+" ("+r.cfg.Path+")"); err != nil {
					return settings{}, err
				}
			}
		}
	}
	for _, k := range configKeys {
		if v, ok := r.flag(settingFlag[k]); ok && v != "" {
			if err := set(k, v, "--"+settingFlag[k]); err != nil {
				return settings{}, err
			}
		}
	}
	if v, ok := r.flag("script"); ok && v != "" {
		s.Script = absPath(v)
	}
	return s, nil
}

// apiKey is the key this command hands its owner: --api-key, or the
// variable the settings name (by default the provider's usual one).
func (r *resolver) apiKey(s settings) (string, string) {
	if v, ok := r.flag("api-key"); ok && v != "" {
		return v, "--api-key"
	}
	name := s.APIKeyEnv
	if name == "" {
		name = defaultKeyEnv(s.Provider)
	}
	return r.env.getenv(name), "$" + name
}

// systemPrompt reads a system prompt given as TEXT or @FILE (@@ starts a
// text with @), returning its text and its source as the request header
// records it.
func systemPrompt(v, source string) (text, src string, err error) {
	if strings.HasPrefix(v, "@@") {
		return v[1:], source, nil
	}
	p, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, source, nil
	}
	p = absPath(p)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", "", fail(exitUsage, "system prompt (%s): %v", source, err)
	}
	if len(b) > maxSystemBytes {
		return "", "", fail(exitUsage, "system prompt %s (%s) is %d bytes; the limit is %d", p, source, len(b), maxSystemBytes)
	}
	return strings.TrimSpace(string(b)), source + " @" + p, nil
}

// maxSystemBytes bounds a system prompt: it goes into every step's
// request header, which is one log event.
const maxSystemBytes = 64 << 10

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
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
	all := r.all()
	file := r.cfg.Path
	if file == "" {
		p, _ := configPath(env)
		file = "none (" + p + " does not exist)"
		if p == "" {
			file = "none"
		}
	}
	s, err := r.newSettings()
	if err != nil {
		return err
	}
	key, keySrc := r.apiKey(s)
	type row struct{ Key, Value, Source string }
	rows := []row{{"config", file, ""}}
	prof := r.profile
	if prof == "" {
		prof = "none"
	}
	rows = append(rows, row{"profile", prof, r.profileSource})
	for _, k := range configKeys {
		v := all[k]
		val := v.value
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
				v.source = s.SystemSource
			} else {
				val = "none"
			}
		}
		if val == "" {
			val = "-"
		}
		rows = append(rows, row{k, val, v.source})
	}
	if s.Provider != "script" {
		rows = append(rows, row{"api_key", mask(key), keySrc})
	}
	if v, ok := r.flag("script"); ok && v != "" {
		rows = append(rows, row{"script", absPath(v), "--script"})
	}
	if len(r.cfg.Prices) > 0 {
		var ms []string
		for m := range r.cfg.Prices {
			ms = append(ms, m)
		}
		sort.Strings(ms)
		for _, m := range ms {
			p := r.cfg.Prices[m]
			rows = append(rows, row{"price " + m, fmt.Sprintf("$%g in, $%g out per million tokens", p.Input, p.Output), "config " + r.cfg.Path})
		}
	}
	if c.Bool("json") {
		out := map[string]any{}
		for _, rw := range rows {
			out[rw.Key] = map[string]string{"value": rw.Value, "source": rw.Source}
		}
		printJSON(env.stdout, out)
		return nil
	}
	for _, rw := range rows {
		if rw.Source == "" {
			tprintf(env.stdout, "%-12s %s\n", rw.Key, rw.Value)
			continue
		}
		tprintf(env.stdout, "%-12s %-40s %s\n", rw.Key, rw.Value, rw.Source)
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
