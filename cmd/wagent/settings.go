package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/wagent/wagent/engine/provider/anthropic"
	"github.com/wagent/wagent/engine/provider/openai"
	"github.com/wagent/wagent/event"
)

// readSettings decodes settings a session records (session/created's, or
// a later pipeline/changed's) and refuses what no open of the session
// could use, on any machine: a field of the wrong type, a provider wagent
// does not know, an API key variable that is not a variable's name, a
// script provider with no script, a pipeline or script path that names
// no file, a base URL that is not http(s). The owner reads the settings of
// every session it opens with it (owner.resolve) and checks every import
// with it (checkSettings), so an import accepts only what an open reads.
// What a machine lacks (the pipeline's file, the key's value) is the
// open's to say: another machine may have it.
func readSettings(raw json.RawMessage) (settings, error) {
	var s settings
	if len(raw) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return settings{}, settingsDecodeError(err)
	}
	if s.APIKeyEnv != "" && !envNameRe.MatchString(s.APIKeyEnv) {
		return settings{}, fmt.Errorf("api_key_env %q is not an environment variable name (letters, digits and _, not starting with a digit)", s.APIKeyEnv)
	}
	for _, f := range []struct{ what, path string }{{"pipeline", s.Pipeline}, {"script", s.Script}} {
		if f.path == "" {
			continue
		}
		if base := filepath.Base(f.path); base == "." || base == ".." || base == string(filepath.Separator) {
			return settings{}, fmt.Errorf("%s %q names no file", f.what, f.path)
		}
	}
	switch p := s.provider(); p {
	case "script":
		if s.Script == "" {
			return settings{}, errors.New("provider script names no script file")
		}
	case "openai", "anthropic":
		if s.BaseURL == "" {
			break // the environment's or the provider's default
		}
		// The check the open's client makes (buildProvider), nothing sent.
		var err error
		if p == "openai" {
			_, err = openai.New(openai.Config{BaseURL: s.BaseURL, Model: s.Model})
		} else {
			_, err = anthropic.New(anthropic.Config{BaseURL: s.BaseURL, Model: s.Model})
		}
		if err != nil {
			return settings{}, err
		}
	default:
		return settings{}, fmt.Errorf("unknown provider %q: wagent knows openai, anthropic and script", s.Provider)
	}
	return s, nil
}

// provider is the settings' provider, or the one wagent uses when they
// name none.
func (s settings) provider() string {
	switch {
	case s.Provider != "":
		return s.Provider
	case s.Script != "":
		return "script"
	}
	return "openai"
}

// checkSettings is the owner's event.SettingsCheck (server.Options): the
// settings read as every open reads them.
func checkSettings(set *event.SessionCreated) error {
	_, err := readSettings(set.Settings)
	return err
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
