package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wagent/wagent/internal/fakeopenai"
)

// countingTransport refuses every request and counts it: a test that
// swaps it in for http.DefaultTransport sees whether anything was sent
// to a vendor's real API.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return nil, errors.New("this test sends nothing to " + r.URL.Host)
}

// wagEnv runs the CLI in-process with env (WAGENT_HOME=home added).
func wagEnv(t *testing.T, home string, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	all := map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": cacheDir}
	for k, v := range env {
		all[k] = v
	}
	code := runWith(append([]string{"wagent"}, args...), strings.NewReader(""), &out, &errb, func(k string) string { return all[k] })
	return result{code, out.String(), errb.String()}
}

// A provider whose key is missing fails before any request, naming the
// variable to set; nothing is sent to the vendor's API and no session is
// created.
func TestMissingKeyFailsBeforeAnyRequest(t *testing.T) {
	ct := &countingTransport{}
	saved := http.DefaultTransport
	http.DefaultTransport = ct
	t.Cleanup(func() { http.DefaultTransport = saved })

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"openai default", nil, []string{"--provider", "openai", "--model", "gpt-4o"}, "set OPENAI_API_KEY (the provider's default variable"},
		{"anthropic default", nil, []string{"--provider", "anthropic", "--model", "claude-sonnet-4-5"}, "set ANTHROPIC_API_KEY (the provider's default variable"},
		{"api-key-env", nil, []string{"--provider", "openai", "--model", "gpt-4o", "--api-key-env", "PROD_KEY"}, "set PROD_KEY (named by api_key_env"},
		{"anthropic with OPENAI set", map[string]string{"OPENAI_API_KEY": "sk-1"}, []string{"--provider", "anthropic", "--model", "claude-x"}, "set ANTHROPIC_API_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			r := wagEnv(t, home, tc.env, append([]string{"run", "--session", "k"}, append(tc.args, "hi")...)...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d", r.code, exitUsage)
			}
			mustOneLine(t, r, tc.want)
			if !strings.Contains(r.stderr, "looked for in this process's environment") {
				t.Errorf("stderr %q does not say where the key was looked for", r.stderr)
			}
			if got := sessions(t, home); len(got) != 0 {
				t.Errorf("sessions %v, want none", got)
			}
		})
	}
	if n := ct.n.Load(); n != 0 {
		t.Errorf("%d requests were sent without a key", n)
	}
}

// A local server (a base URL that is not the vendor's) needs no key: the
// request goes without any Authorization header, never an empty Bearer.
func TestLocalServerNeedsNoKey(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "local answer"}})
	for _, env := range []map[string]string{nil, {"OPENAI_BASE_URL": srv.URL}} {
		home := t.TempDir()
		args := []string{"run", "--provider", "openai", "--model", "llama", "hi"}
		if env == nil {
			args = []string{"run", "--provider", "openai", "--base-url", srv.URL, "--model", "llama", "hi"}
		}
		if r := wagEnv(t, home, env, args...); r.code != exitOK || !strings.Contains(r.stdout, "local answer") {
			t.Fatalf("run: %d %q %s", r.code, r.stdout, r.stderr)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if v, ok := r.Header["Authorization"]; ok {
			t.Errorf("Authorization header %q sent without a key", v)
		}
	}
}

// An HTTP error names the method and URL in what the CLI prints and in the
// recorded attempt, and 404, 401 and 403 are not retried (another attempt
// would fail the same way).
func TestHTTPErrorNamesTheURL(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		words  string
	}{
		{404, `{"error":"not found"}`, "not found"},
		{401, `{"error":{"message":"bad key"}}`, "bad key"},
		{403, `{"error":{"message":"forbidden here"}}`, "forbidden here"},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv := fakeopenai.New(t, fakeopenai.Rule{Reply: fakeopenai.Reply{Status: tc.status, Body: tc.body}})
			home := t.TempDir()
			r := wag(t, home, "run", "--session", "e", "--provider", "openai", "--base-url", srv.URL, "--model", "m", "--api-key", "k", "hi")
			want := "POST " + srv.URL + "/chat/completions: " + tc.words
			if r.code == exitOK || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, stderr %q; want it to contain %q", r.code, r.stderr, want)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1 (HTTP %d is not retried)", n, tc.status)
			}
			evs := events(t, home, "e")
			if n := count(evs, "assistant/attempt", func(d json.RawMessage) bool { return strings.Contains(string(d), want) }); n != 1 {
				t.Errorf("%d recorded attempts name the URL, want 1", n)
			}
			if n := count(evs, "turn/end", func(d json.RawMessage) bool { return strings.Contains(string(d), want) }); n != 1 {
				t.Errorf("%d turn/end events name the URL, want 1", n)
			}
		})
	}
}
