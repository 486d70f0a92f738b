package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/store"
)

// ReadSettings accepts what wagent records and refuses, in one line, what
// no open could use.
func TestReadSettings(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want Settings
		err  string
	}{
		{name: "none", raw: ``},
		{name: "null", raw: `null`},
		{name: "as run records them", raw: `{"pipeline":"/p/agent.yaml","provider":"openai","base_url":"http://127.0.0.1:8080/v1","model":"m","api_key_env":"MY_KEY","system":"be brief","system_source":"flag","dir":"/p"}`,
			want: Settings{Pipeline: "/p/agent.yaml", Provider: "openai", BaseURL: "http://127.0.0.1:8080/v1", Model: "m", APIKeyEnv: "MY_KEY", System: "be brief", SystemSource: "flag", Dir: "/p"}},
		{name: "with version and principal", raw: `{"v":1,"provider":"openai","model":"m","by":"remote:alice"}`,
			want: Settings{Version: 1, Provider: "openai", Model: "m", By: "remote:alice"}},
		{name: "script named, provider left out", raw: `{"script":"/p/replies.yaml"}`, want: Settings{Script: "/p/replies.yaml"}},
		{name: "anthropic", raw: `{"provider":"anthropic","base_url":"https://api.anthropic.com/v1"}`, want: Settings{Provider: "anthropic", BaseURL: "https://api.anthropic.com/v1"}},
		{name: "a field a later wagent records", raw: `{"model":"m","temperature":0.2}`, want: Settings{Model: "m"}},

		{name: "pipeline as an object", raw: `{"pipeline":{"file":"a.yaml"}}`, err: "pipeline is an object, want a string"},
		{name: "model as a number", raw: `{"model":4}`, err: "model is a number, want a string"},
		{name: "dir as a boolean", raw: `{"dir":true}`, err: "dir is a boolean, want a string"},
		{name: "by as a number", raw: `{"by":1}`, err: "by is a number, want a string"},
		{name: "a string", raw: `"agent.yaml"`, err: "the settings are a string, want an object"},
		{name: "a list", raw: `[]`, err: "the settings are an array, want an object"},
		{name: "a later version", raw: `{"v":2,"provider":"openai","model":"m"}`, err: "the settings are version 2; this wagent reads versions up to 1: upgrade wagent"},
		{name: "a negative version", raw: `{"v":-1}`, err: "the settings are version -1"},
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
			got, err := ReadSettings(json.RawMessage(c.raw))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("ReadSettings(%s) = %+v, %v; want an error with %q", c.raw, got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadSettings(%s): %v", c.raw, err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
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
		`{"v":1,"by":"local"}`, `{"v":2}`, `{"v":-1}`, `{"by":"remote:x","v":1.5}`,
	} {
		f.Add([]byte(s))
	}
	getenv := func(string) string { return "" }
	n, err := Open(context.Background(), Options{Log: store.NewMemory(), Getenv: getenv})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n.Close(context.Background()) })
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) && len(raw) > 0 {
			return // the fold refuses an event whose data is not JSON
		}
		s, err := ReadSettings(raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		again, _ := json.Marshal(s)
		s2, err := ReadSettings(again)
		if err != nil {
			t.Fatalf("%s read, but recorded again as %s it is refused: %v", raw, again, err)
		}
		if s2 != s {
			t.Fatalf("%s read as %+v, recorded again as %+v", raw, s, s2)
		}
		if s.ProviderName() == "script" {
			return
		}
		if _, err := n.buildProvider(s.WithDefaults(getenv), "", DefaultPolicy(Local)); err != nil {
			t.Fatalf("%s read, but its provider does not build: %v", raw, err)
		}
	})
}
