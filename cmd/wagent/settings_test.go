package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readSettings accepts what wagent records and refuses, in one line, what
// no open could use.
func TestReadSettings(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want settings
		err  string
	}{
		{name: "none", raw: ``},
		{name: "null", raw: `null`},
		{name: "as run records them", raw: `{"pipeline":"/p/agent.yaml","provider":"openai","base_url":"http://127.0.0.1:8080/v1","model":"m","api_key_env":"MY_KEY","system":"be brief","system_source":"flag","dir":"/p"}`,
			want: settings{Pipeline: "/p/agent.yaml", Provider: "openai", BaseURL: "http://127.0.0.1:8080/v1", Model: "m", APIKeyEnv: "MY_KEY", System: "be brief", SystemSource: "flag", Dir: "/p"}},
		{name: "script named, provider left out", raw: `{"script":"/p/replies.yaml"}`, want: settings{Script: "/p/replies.yaml"}},
		{name: "anthropic", raw: `{"provider":"anthropic","base_url":"https://api.anthropic.com/v1"}`, want: settings{Provider: "anthropic", BaseURL: "https://api.anthropic.com/v1"}},
		{name: "a field a later wagent records", raw: `{"model":"m","temperature":0.2}`, want: settings{Model: "m"}},

		{name: "pipeline as an object", raw: `{"pipeline":{"file":"a.yaml"}}`, err: "pipeline is an object, want a string"},
		{name: "model as a number", raw: `{"model":4}`, err: "model is a number, want a string"},
		{name: "dir as a boolean", raw: `{"dir":true}`, err: "dir is a boolean, want a string"},
		{name: "a string", raw: `"agent.yaml"`, err: "the settings are a string, want an object"},
		{name: "a list", raw: `[]`, err: "the settings are an array, want an object"},
		{name: "unknown provider", raw: `{"provider":"antropic"}`, err: `unknown provider "antropic": wagent knows openai, anthropic and script`},
		{name: "api key variable not a name", raw: `{"api_key_env":"1KEY"}`, err: `api_key_env "1KEY" is not an environment variable name`},
		{name: "script provider without a script", raw: `{"provider":"script"}`, err: "provider script names no script file"},
		{name: "pipeline naming a folder", raw: `{"pipeline":"/p/.."}`, err: `pipeline "/p/.." names no file`},
		{name: "script naming the root", raw: `{"script":"/"}`, err: `script "/" names no file`},
		{name: "base URL not http", raw: `{"base_url":"ftp://x"}`, err: `openai: base URL "ftp://x" is not an http(s) URL`},
		{name: "anthropic base URL without a host", raw: `{"provider":"anthropic","base_url":"https://"}`, err: `anthropic: base URL "https://" is not an http(s) URL`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readSettings(json.RawMessage(c.raw))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("readSettings(%s) = %+v, %v; want an error with %q", c.raw, got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("readSettings(%s): %v", c.raw, err)
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(settings{})); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzReadSettings reads settings from an imported log (untrusted bytes):
// no input panics, every refusal is one line, and what it accepts an
// open can use: recorded again (as a create records them) it reads back
// the same, and the provider builds from it with nothing in the
// environment (a script provider's file is the machine's to have).
func FuzzReadSettings(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `7`,
		`{"pipeline":"/p/agent.yaml","provider":"openai","base_url":"http://127.0.0.1:8080/v1","model":"m","api_key_env":"MY_KEY","dir":"/p"}`,
		`{"provider":"anthropic","base_url":"https://api.anthropic.com"}`,
		`{"provider":"script","script":"/p/r.yaml"}`,
		`{"pipeline":{"file":"a"}}`, `{"provider":"x"}`, `{"api_key_env":"A B"}`, `{"base_url":"ftp://x"}`,
		`{"pipeline":"a","pipeline":7}`, `{"model":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	env := &cliEnv{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) && len(raw) > 0 {
			return // the fold refuses an event whose data is not JSON
		}
		s, err := readSettings(raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		again, _ := json.Marshal(s)
		s2, err := readSettings(again)
		if err != nil {
			t.Fatalf("%s read, but recorded again as %s it is refused: %v", raw, again, err)
		}
		if s2 != s {
			t.Fatalf("%s read as %+v, recorded again as %+v", raw, s, s2)
		}
		if s.provider() == "script" {
			return
		}
		if _, err := buildProvider(env, s.withDefaults(env), "", false); err != nil {
			t.Fatalf("%s read, but its provider does not build: %v", raw, err)
		}
	})
}
