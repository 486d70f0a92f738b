package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/hostabi"
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
//	prices:                             # USD per million tokens; overrides the built-in table
//	  gpt-4o-mini: {input: 0.15, output: 0.60}
//	store: nats://nats.internal:4222    # a DIR, badger:DIR or nats:// URL
//	defaults:                           # the built-in pipeline's parts (all on but fetch)
//	  shell: false                      # files, shell, agents_md, skills, system_prompt: true|false
//	  fetch: [pkg.go.dev, go.dev]       # hosts fetch may read (none: no fetch tool)
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

type Profile struct {
	Provider  string `yaml:"provider"`
	Model     string `yaml:"model"`
	BaseURL   string `yaml:"base_url"`
	APIKeyEnv string `yaml:"api_key_env"`
	Pipeline  string `yaml:"pipeline"`
	System    string `yaml:"system"`
}

func (p *Profile) Get(key string) string {
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

type configFile struct {
	Profile        `yaml:",inline"`
	DefaultProfile string               `yaml:"profile"`
	Profiles       map[string]Profile   `yaml:"profiles"`
	Prices         map[string]priceFile `yaml:"prices"`
	Store          string               `yaml:"store"`
	Defaults       defaultsFile         `yaml:"defaults"`
}

// defaultsFile is the defaults key: which parts of the built-in pipeline
// a new session gets (builtins.Parts).
type defaultsFile struct {
	Files        *bool    `yaml:"files"`
	Shell        *bool    `yaml:"shell"`
	Fetch        []string `yaml:"fetch"`
	AgentsMD     *bool    `yaml:"agents_md"`
	Skills       *bool    `yaml:"skills"`
	SystemPrompt *bool    `yaml:"system_prompt"`
}

func (d defaultsFile) parts() builtins.Parts {
	off := func(b *bool) bool { return b != nil && !*b }
	return builtins.Parts{NoFiles: off(d.Files), NoShell: off(d.Shell), NoAgentsMD: off(d.AgentsMD),
		NoSkills: off(d.Skills), NoSystemPrompt: off(d.SystemPrompt), Fetch: d.Fetch}
}

type priceFile struct {
	Input  *float64 `yaml:"input"`
	Output *float64 `yaml:"output"`
}

// price is what a million tokens cost, in US dollars.
type Price struct{ Input, Output float64 }

// config is a loaded config file (empty when there is none).
type Config struct {
	// Path is the file ("" when none was found).
	Path           string
	Top            Profile
	DefaultProfile string
	Profiles       map[string]Profile
	// Prices by model name; a name may end in * (a prefix).
	Prices map[string]Price
	// Store is the store every command uses when --store and
	// $WAGENT_STORE name none (a relative directory is the file's).
	Store string
	// Defaults are the parts of the built-in pipeline a new session that
	// names no pipeline runs with (the file's defaults key).
	Defaults builtins.Parts
}

var knownConfigKeys = map[string]string{
	"configFile":   "provider, model, base_url, api_key_env, pipeline, system, profile, profiles, prices, store, defaults",
	"defaultsFile": "files, shell, fetch, agents_md, skills, system_prompt",
	"Profile":      "provider, model, base_url, api_key_env, pipeline, system",
	"priceFile":    "input, output (US dollars per million tokens)",
}

var unknownConfigField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type app\.(\w+)$`)

// configPath is where the config file is: $WAGENT_CONFIG, else
// $XDG_CONFIG_HOME/wagent/config.yaml, else ~/.config/wagent/config.yaml
// (on macOS ~/Library/Application Support/wagent/config.yaml). explicit
// says the person named it, so a missing file is an error.
func ConfigPath(getenv func(string) string) (path string, explicit bool) {
	if p := getenv("WAGENT_CONFIG"); p != "" {
		return p, true
	}
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "wagent", "config.yaml"), false
	}
	home := getenv("HOME")
	if home == "" {
		return "", false
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "wagent", "config.yaml"), false
	}
	return filepath.Join(home, ".config", "wagent", "config.yaml"), false
}

// LoadConfig reads the config file ConfigPath names, refusing unknown
// keys (with the file and line) and values of the wrong kind. No file is
// an empty config.
func LoadConfig(getenv func(string) string) (*Config, error) {
	path, explicit := ConfigPath(getenv)
	cfg := &Config{}
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !explicit {
			return cfg, nil
		}
		return nil, Errorf(Failed, "config: %v", err)
	}
	cfg.Path = path
	if abs, err := filepath.Abs(path); err == nil {
		cfg.Path = abs
	}
	var f configFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, Errorf(Failed, "%s", configError(path, err))
	}
	cfg.Top, cfg.DefaultProfile, cfg.Profiles = f.Profile, f.DefaultProfile, f.Profiles
	cfg.Store = f.Store
	cfg.Defaults = f.Defaults.parts()
	for _, h := range cfg.Defaults.Fetch {
		if _, err := hostabi.ParseHostPattern(h); err != nil {
			return nil, Errorf(Failed, "config %s: defaults.fetch: %v", path, err)
		}
	}
	if st := f.Store; st != "" && !strings.Contains(st, ":") {
		// A directory: ~/ is the home, a relative one the file's.
		cfg.Store = (&Sources{getenv: getenv, cfg: cfg}).filePath(st)
	}
	if cfg.DefaultProfile != "" {
		if _, ok := cfg.Profiles[cfg.DefaultProfile]; !ok {
			return nil, Errorf(Failed, "config %s: profile: %q is not under profiles:%s", path, cfg.DefaultProfile, cfg.ProfileNames())
		}
	}
	cfg.Prices = map[string]Price{}
	for model, p := range f.Prices {
		if p.Input == nil || p.Output == nil || *p.Input < 0 || *p.Output < 0 {
			return nil, Errorf(Failed, "config %s: prices: %s needs input and output, in US dollars per million tokens (0 or more)", path, model)
		}
		cfg.Prices[model] = Price{Input: *p.Input, Output: *p.Output}
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
		first = strings.ReplaceAll(first, "app.", "")
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

func (cfg *Config) ProfileNames() string {
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

// PriceOf returns the price of a model: the config file's exact entry,
// else its longest prefix entry ("gpt-4o*"), else the built-in table's
// (BuiltinPrice, which knows the common OpenAI and Anthropic models). A
// nil config has the built-in prices only.
func (cfg *Config) PriceOf(model string) (Price, bool) {
	if model == "" {
		return Price{}, false
	}
	if cfg != nil {
		if p, ok := cfg.Prices[model]; ok {
			return p, true
		}
		best, found := -1, Price{}
		for k, p := range cfg.Prices {
			if pre, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(model, pre) && len(pre) > best {
				best, found = len(pre), p
			}
		}
		if best >= 0 {
			return found, true
		}
	}
	return BuiltinPrice(model)
}

// cost is the estimated cost of a model's usage in US dollars.
func (cfg *Config) Cost(model string, in, out int) (float64, bool) {
	p, ok := cfg.PriceOf(model)
	if !ok {
		return 0, false
	}
	return (float64(in)*p.Input + float64(out)*p.Output) / 1e6, true
}

// Setting is a setting's value and where it came from.
type Setting struct {
	Value, Source string
}

// Flags looks up a setting given explicitly (a command's flag, a field of
// a request): its value, and whether it was given at all.
type Flags func(name string) (value string, set bool)

// Sources resolves a session's settings from, in order: what was given
// explicitly (Flags), the environment, the chosen profile, the config
// file's top level; then the built-in defaults.
type Sources struct {
	flags  Flags
	getenv func(string) string
	cfg    *Config
	// profile is the chosen profile ("" for none); profileSource says how
	// it was chosen, and explicit whether it was named (rather than the
	// environment's or the file's default).
	profile, profileSource string
	explicit               bool
}

// NewSources resolves settings over cfg. profile names a profile
// explicitly ("" for none: then $WAGENT_PROFILE, then the file's
// profile:); profileSource says where that name came from (--profile).
func NewSources(cfg *Config, getenv func(string) string, flags Flags, profile, profileSource string) (*Sources, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if flags == nil {
		flags = func(string) (string, bool) { return "", false }
	}
	r := &Sources{flags: flags, getenv: getenv, cfg: cfg}
	switch {
	case profile != "":
		r.profile, r.profileSource, r.explicit = profile, profileSource, true
	case getenv("WAGENT_PROFILE") != "":
		r.profile, r.profileSource = getenv("WAGENT_PROFILE"), "$WAGENT_PROFILE"
	case cfg.DefaultProfile != "":
		r.profile, r.profileSource = cfg.DefaultProfile, "config "+cfg.Path
	}
	if r.profile != "" {
		if _, ok := cfg.Profiles[r.profile]; !ok {
			where := "no config file"
			if cfg.Path != "" {
				where = cfg.Path
			}
			return nil, Errorf(Invalid, "no profile %q in %s (%s);%s", r.profile, where, r.profileSource, cfg.ProfileNames())
		}
	}
	return r, nil
}

// Profile is the chosen profile's name ("" for none).
func (r *Sources) Profile() string { return r.profile }

func (r *Sources) flag(name string) (string, bool) {
	v, ok := r.flags(name)
	return v, ok && v != ""
}

// get resolves one setting: flag, environment, profile, file.
func (r *Sources) Get(key string) Setting {
	if v, ok := r.flag(settingFlag[key]); ok && v != "" {
		return Setting{v, "--" + settingFlag[key]}
	}
	if v := r.getenv(settingEnv[key]); v != "" {
		return Setting{v, "$" + settingEnv[key]}
	}
	if r.profile != "" {
		p := r.cfg.Profiles[r.profile]
		if v := p.Get(key); v != "" {
			return Setting{r.cfgPath(key, v), "profile " + r.profile + " (" + r.cfg.Path + ")"}
		}
	}
	if v := r.cfg.Top.Get(key); v != "" {
		return Setting{r.cfgPath(key, v), "config " + r.cfg.Path}
	}
	return Setting{}
}

// cfgPath makes a path the config file names (a pipeline, a system
// prompt's @FILE) absolute: ~/ is the home directory, a relative path is
// relative to the file.
func (r *Sources) cfgPath(key, v string) string {
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

func (r *Sources) filePath(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok && r.getenv("HOME") != "" {
		return filepath.Join(r.getenv("HOME"), rest)
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(r.cfg.Path), p)
}

// all resolves every setting with its source, defaults included: what a
// new session runs with, and what config show prints.
func (r *Sources) All() map[string]Setting {
	out := map[string]Setting{}
	for _, k := range configKeys {
		out[k] = r.Get(k)
	}
	script, _ := r.flag("script")
	_, providerFlag := r.flag(settingFlag["provider"])
	switch {
	case script != "" && !providerFlag:
		// A flag beats the config: --script means the script answers,
		// whatever provider the environment or the file names.
		src := "--script"
		if p := out["provider"]; p.Value != "" && p.Value != "script" {
			src += " (over " + p.Value + " from " + p.Source + ")"
		}
		out["provider"] = Setting{"script", src}
	case out["provider"].Value == "":
		out["provider"] = Setting{"openai", "default"}
	}
	prov := out["provider"].Value
	if out["base_url"].Value == "" {
		switch prov {
		case "anthropic":
			if v := r.getenv("ANTHROPIC_BASE_URL"); v != "" {
				out["base_url"] = Setting{v, "$ANTHROPIC_BASE_URL"}
			} else {
				out["base_url"] = Setting{"https://api.anthropic.com", "default"}
			}
		case "openai":
			if v := r.getenv("OPENAI_BASE_URL"); v != "" {
				out["base_url"] = Setting{v, "$OPENAI_BASE_URL"}
			} else {
				out["base_url"] = Setting{"https://api.openai.com/v1", "default"}
			}
		}
	}
	if out["api_key_env"].Value == "" && prov != "script" {
		out["api_key_env"] = Setting{DefaultKeyEnv(prov), "default"}
	}
	if out["pipeline"].Value == "" {
		out["pipeline"] = Setting{"", "default (the built-in pipeline)"}
	}
	if out["model"].Value == "" && prov != "script" {
		out["model"] = Setting{"", "not set"}
	}
	return out
}

func DefaultKeyEnv(provider string) string {
	if provider == "anthropic" {
		return "ANTHROPIC_API_KEY"
	}
	return "OPENAI_API_KEY"
}

// newSettings resolves the settings a new session records.
func (r *Sources) NewSettings() (Settings, error) {
	all := r.All()
	// A provider the environment or the file names is checked even where
	// a flag overrides it (--script): a broken config is said, not hidden.
	for _, p := range []Setting{r.Get("provider"), all["provider"]} {
		switch p.Value {
		case "", "openai", "anthropic", "script":
			continue
		}
		// Named with where it came from: a typo in the file is not a flag
		// (and, like the file's other mistakes, not a usage error).
		code := Invalid
		if strings.HasPrefix(p.Source, "config ") || strings.HasPrefix(p.Source, "profile ") {
			code = Failed
		}
		return Settings{}, Errorf(code, "unknown provider %q from %s: use openai, anthropic or script", p.Value, p.Source)
	}
	s := Settings{
		Provider:  all["provider"].Value,
		Model:     all["model"].Value,
		APIKeyEnv: all["api_key_env"].Value,
	}
	// A default base URL is left to the provider (it stays the default if
	// that changes); one that was set is recorded.
	if src := all["base_url"].Source; src != "default" {
		s.BaseURL = all["base_url"].Value
	}
	if s.APIKeyEnv == DefaultKeyEnv(s.Provider) {
		s.APIKeyEnv = ""
	}
	if p := all["pipeline"].Value; p != "" {
		s.Pipeline = AbsPath(p)
	}
	if v, ok := r.flag("script"); ok && v != "" {
		s.Script = AbsPath(v)
	}
	if sys := all["system"]; sys.Value != "" {
		text, src, err := SystemPrompt(sys.Value, sys.Source)
		if err != nil {
			return Settings{}, err
		}
		s.System, s.SystemSource = text, src
	}
	if wd, err := os.Getwd(); err == nil {
		s.Dir = wd
	}
	if d := r.cfg.Defaults; s.Pipeline == "" && !reflect.DeepEqual(d, builtins.Parts{}) {
		s.Defaults = &d // resume, replay and fork build the same pipeline
	}
	return s, nil
}

// override applies what this command says explicitly to an existing
// session's recorded settings: its flags, and the values of a profile it
// names with --profile.
func (r *Sources) Override(recorded Settings) (Settings, error) {
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
			s.Pipeline = AbsPath(v)
		case "system":
			text, src, err := SystemPrompt(v, source)
			if err != nil {
				return err
			}
			s.System, s.SystemSource = text, src
		}
		return nil
	}
	if r.explicit && r.profile != "" {
		p := r.cfg.Profiles[r.profile]
		for _, k := range configKeys {
			if v := p.Get(k); v != "" {
				if err := set(k, r.cfgPath(k, v), "profile "+r.profile+" ("+r.cfg.Path+")"); err != nil {
					return Settings{}, err
				}
			}
		}
	}
	for _, k := range configKeys {
		if v, ok := r.flag(settingFlag[k]); ok && v != "" {
			if err := set(k, v, "--"+settingFlag[k]); err != nil {
				return Settings{}, err
			}
		}
	}
	if v, ok := r.flag("script"); ok && v != "" {
		s.Script = AbsPath(v)
		if _, named := r.flag(settingFlag["provider"]); !named {
			s.Provider = "script" // the flag beats what the session recorded
		}
	}
	return s, nil
}

// apiKey is the key this command hands its owner: --api-key, or the
// variable the settings name (by default the provider's usual one).
func (r *Sources) APIKey(s Settings) (string, string) {
	if v, ok := r.flag("api-key"); ok && v != "" {
		return v, "--api-key"
	}
	name := s.APIKeyEnv
	if name == "" {
		name = DefaultKeyEnv(s.Provider)
	}
	return r.getenv(name), "$" + name
}

// systemPrompt reads a system prompt given as TEXT or @FILE (@@ starts a
// text with @), returning its text and its source as the request header
// records it.
func SystemPrompt(v, source string) (text, src string, err error) {
	if strings.HasPrefix(v, "@@") {
		return v[1:], source, nil
	}
	p, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, source, nil
	}
	p = AbsPath(p)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", "", Errorf(Invalid, "system prompt (%s): %v", source, err)
	}
	if len(b) > MaxSystemBytes {
		return "", "", Errorf(Invalid, "system prompt %s (%s) is %d bytes; the limit is %d", p, source, len(b), MaxSystemBytes)
	}
	return strings.TrimSpace(string(b)), source + " @" + p, nil
}

// MaxSystemBytes bounds a system prompt: it goes into every step's
// request header, which is one log event.
const MaxSystemBytes = 64 << 10

func AbsPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Config is the config file the sources read.
func (r *Sources) Config() *Config { return r.cfg }

// ProfileSource says how the profile was chosen ("--profile",
// "$WAGENT_PROFILE", "config FILE").
func (r *Sources) ProfileSource() string { return r.profileSource }

// Flag is a setting given explicitly (non-empty).
func (r *Sources) Flag(name string) (string, bool) { return r.flag(name) }

// ConfigKeys are the settings a profile (and the file's top level) sets.
func ConfigKeys() []string { return append([]string(nil), configKeys...) }
