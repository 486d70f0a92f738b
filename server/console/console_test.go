package console_test

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/server/console"
	"github.com/wagent/wagent/store"
)

// The console's code never turns a string into markup: no HTML sinks, no
// eval, no inline script, style or handlers the CSP would have to allow.
func TestConsoleHasNoHTMLSinks(t *testing.T) {
	files := console.FS()
	for _, name := range []string{"index.html", "app.js", "style.css", "favicon.svg"} {
		if _, err := fs.Stat(files, name); err != nil {
			t.Fatalf("the console lacks %s: %v", name, err)
		}
	}
	js, _ := fs.ReadFile(files, "app.js")
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "createContextualFragment", "DOMParser", "srcdoc", "javascript:"} {
		if strings.Contains(string(js), sink) {
			t.Errorf("app.js uses %s: every string from the API must go in as text", sink)
		}
	}
	if m := regexp.MustCompile(`setAttribute\(\s*'on`).Find(js); m != nil {
		t.Errorf("app.js sets an event handler attribute: %s", m)
	}
	html, _ := fs.ReadFile(files, "index.html")
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAll(html, -1) {
		if !strings.Contains(string(tag), " src=") {
			t.Errorf("index.html has an inline script %s: the CSP forbids it", tag)
		}
	}
	for _, re := range []string{`<script[^>]*>\s*[^<\s]`, `\sstyle=`, `\son[a-z]+=`, `https?://`} {
		if m := regexp.MustCompile(re).Find(html); m != nil {
			t.Errorf("index.html has %q (inline code, inline style or an outside address): the CSP forbids it", m)
		}
	}
}

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv, err := server.New(server.Options{
		Log: store.NewMemory(), Token: "tok", Console: console.FS(),
		Resolve: func(ctx context.Context, id string, c *engine.SessionCreated, _ map[string]string) (engine.Config, error) {
			return engine.Config{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs
}

// The owner serves the console at / without a token (it holds no data),
// with a strict CSP and the other headers that keep the page to itself;
// the API still needs the token.
func TestConsoleIsServedWithSafeHeaders(t *testing.T) {
	hs := newServer(t)
	for path, ctype := range map[string]string{"/": "text/html", "/app.js": "text/javascript", "/style.css": "text/css", "/favicon.svg": "image/svg+xml"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Fatalf("GET %s: %d %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "require-trusted-types-for 'script'", "form-action 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q allows something unsafe", path, csp)
		}
		for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cross-Origin-Opener-Policy": "same-origin"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("GET %s: %s is %q, want %q", path, h, got, want)
			}
		}
		if resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s sets a cookie", path)
		}
	}
	resp, err := http.Post(hs.URL+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", resp.StatusCode)
	}
	resp, err = http.Get(hs.URL + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/sessions without a token: %d, want 401", resp.StatusCode)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("API answers lack nosniff")
	}
}
