package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine/provider/anthropic"
	"github.com/wagent/wagent/engine/provider/openai"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/pipeline"
)

// SettingsVersion is the version of the settings schema this build
// writes. A log whose settings name a later version is refused with a
// line saying to upgrade, never half read.
const SettingsVersion = 1

// Settings are what a session records in session/created (and a later
// pipeline/changed), so that every later open of it, by any process, runs
// the same pipeline, provider and model. They never hold a key.
type Settings struct {
	// Version is the schema's version (SettingsVersion; 0 in logs
	// written before it was recorded, which read as 1).
	Version int `json:"v,omitempty"`

	// Pipeline is an absolute path, the name of a pipeline registered
	// with the node (Node.AddPipeline), or "" for the built-in default.
	Pipeline string `json:"pipeline,omitempty"`
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	Model    string `json:"model,omitempty"`
	Script   string `json:"script,omitempty"` // absolute path
	// APIKeyEnv names the environment variable holding the API key (""
	// for the provider's usual one); never the key.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// System is the system prompt (--system, or the config's), recorded
	// as text so that the session does not depend on a file; SystemSource
	// says where it came from, as the request header records it.
	System       string `json:"system,omitempty"`
	SystemSource string `json:"system_source,omitempty"`
	// Dir is the working directory the session was created in: the
	// built-in agents-md op reads AGENTS.md and CLAUDE.md there.
	Dir string `json:"dir,omitempty"`
	// Defaults are the parts of the built-in pipeline the session runs
	// with when Pipeline is "" (the config's defaults key; nil for all of
	// them).
	Defaults *builtins.Parts `json:"defaults,omitempty"`

	// By is the principal that chose these settings (Principal.String),
	// written by the node from who asked, never taken from a request: it
	// decides which files the session's open may read and where the
	// process's own API keys may go. "" (logs written before it was
	// recorded) is trusted only by a node no remote client can reach.
	By string `json:"by,omitempty"`
}

// DefaultPipeline is the built-in pipeline a session with these settings
// runs when they name none: on its folder, with the parts it recorded,
// and the skills folder getenv says (SkillsDir).
func (s Settings) DefaultPipeline(getenv func(string) string) *pipeline.Spec {
	var p builtins.Parts
	if s.Defaults != nil {
		p = *s.Defaults
	}
	return builtins.DefaultPipelineWith(SkillsDir(getenv), s.Dir, p)
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReadSettings decodes settings a session records and refuses what no
// open of the session could use, on any machine: a field of the wrong
// type, a later schema version, a provider wagent does not know, an API
// key variable that is not a variable's name, a script provider with no
// script, a pipeline or script path that names no file, a base URL that
// is not http(s). Every open reads settings with it and every import is
// checked with it (CheckSettings), so an import accepts only what an open
// reads. What a machine lacks (the pipeline's file, the key's value) is
// the open's to say: another machine may have it.
func ReadSettings(raw json.RawMessage) (Settings, error) {
	return readSettings(raw, nil)
}

// readSettings is ReadSettings knowing, beside the built-in providers,
// those known says it knows (a node's registered ones).
func readSettings(raw json.RawMessage, known func(string) bool) (Settings, error) {
	var s Settings
	if len(raw) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return Settings{}, settingsDecodeError(err)
	}
	if s.Version > SettingsVersion || s.Version < 0 {
		return Settings{}, fmt.Errorf("the settings are version %d; this wagent reads versions up to %d: upgrade wagent", s.Version, SettingsVersion)
	}
	if s.Defaults != nil {
		for _, h := range s.Defaults.Fetch {
			if _, err := hostabi.ParseHostPattern(h); err != nil {
				return Settings{}, fmt.Errorf("the settings' defaults.fetch: %v", err)
			}
		}
	}
	if s.APIKeyEnv != "" && !envNameRe.MatchString(s.APIKeyEnv) {
		return Settings{}, fmt.Errorf("api_key_env %q is not an environment variable name (letters, digits and _, not starting with a digit)", s.APIKeyEnv)
	}
	for _, f := range []struct{ what, path string }{{"pipeline", s.Pipeline}, {"script", s.Script}} {
		if f.path == "" {
			continue
		}
		if base := filepath.Base(f.path); base == "." || base == ".." || base == string(filepath.Separator) {
			return Settings{}, fmt.Errorf("%s %q names no file", f.what, f.path)
		}
	}
	switch p := s.ProviderName(); p {
	case "script":
		if s.Script == "" {
			return Settings{}, errors.New("provider script names no script file")
		}
	case "openai", "anthropic":
		if s.BaseURL == "" {
			break // the environment's or the provider's default
		}
		// The check the open's client makes (BuildProvider), nothing sent.
		var err error
		if p == "openai" {
			_, err = openai.New(openai.Config{BaseURL: s.BaseURL, Model: s.Model})
		} else {
			_, err = anthropic.New(anthropic.Config{BaseURL: s.BaseURL, Model: s.Model})
		}
		if err != nil {
			return Settings{}, err
		}
	default:
		if known == nil || !known(p) {
			return Settings{}, fmt.Errorf("unknown provider %q: wagent knows openai, anthropic and script", s.Provider)
		}
	}
	return s, nil
}

// JSON is the settings as a request carries them.
func (s Settings) JSON() json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// ProviderName is the settings' provider, or the one wagent uses when
// they name none.
func (s Settings) ProviderName() string {
	switch {
	case s.Provider != "":
		return s.Provider
	case s.Script != "":
		return "script"
	}
	return "openai"
}

// CheckSettings is an event.SettingsCheck: the settings read as every
// open reads them.
func CheckSettings(set *event.SessionCreated) error {
	_, err := ReadSettings(set.Settings)
	return err
}

// WithDefaults fills in what the settings leave to the environment.
func (s Settings) WithDefaults(getenv func(string) string) Settings {
	s.Provider = s.ProviderName()
	if s.Model == "" {
		s.Model = getenv("WAGENT_MODEL")
	}
	return s
}

// Check says what the settings lack, as an Invalid error.
func (s Settings) Check() error { return s.check(nil) }

func (s Settings) check(known func(string) bool) error {
	if s.APIKeyEnv != "" && !envNameRe.MatchString(s.APIKeyEnv) {
		return Errorf(Invalid, "--api-key-env %q is not an environment variable name (letters, digits and _, not starting with a digit)", s.APIKeyEnv)
	}
	switch s.Provider {
	case "script":
		if s.Script == "" {
			return Errorf(Invalid, "--provider script needs --script FILE")
		}
	case "openai", "anthropic":
		if s.Model == "" {
			return Errorf(Invalid, "--provider %s needs a model: pass --model NAME, set WAGENT_MODEL, or put model: in the config file (wagent config show says where it is)", s.Provider)
		}
	default:
		if known == nil || !known(s.Provider) {
			return Errorf(Invalid, "unknown --provider %q: use openai, anthropic or script", s.Provider)
		}
	}
	return nil
}

// KeyEnv names the variable the settings take the API key from.
func (s Settings) KeyEnv() string {
	if s.APIKeyEnv != "" {
		return s.APIKeyEnv
	}
	return DefaultKeyEnv(s.Provider)
}

// settingsDecodeError says in one line which field of recorded settings
// has the wrong type.
func settingsDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("the settings are not JSON: %v", err)
	}
	got, _, _ := strings.Cut(te.Value, " ") // "number 7" for some numbers
	got = withArticle(got)
	if te.Field == "" {
		return fmt.Errorf("the settings are %s, want an object", got)
	}
	want := "a value of type " + te.Type.String()
	switch te.Type.Kind() {
	case reflect.String:
		want = "a string"
	case reflect.Struct, reflect.Map:
		want = "an object"
	}
	return fmt.Errorf("%s is %s, want %s", te.Field, got, want)
}

func withArticle(kind string) string {
	switch kind {
	case "object", "array":
		return "an " + kind
	case "bool":
		return "a boolean"
	}
	return "a " + kind
}
