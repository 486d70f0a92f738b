package openai

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
)

// A 404 names the URL that was tried and, for a base URL without /v1 (the
// usual mistake with a local server), says so; the status and code stay
// what the server said.
func TestNotFoundNamesTheURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		base    string
		url     string
		mention bool
	}{
		{srv.URL, srv.URL + "/chat/completions", true},
		{srv.URL + "/v1", srv.URL + "/v1/chat/completions", false},
	} {
		c, err := New(Config{BaseURL: tc.base, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Complete(context.Background(), &provider.Request{Messages: []hostabi.Message{{Role: "user", Content: "hi"}}}, nil)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Failure.Status != 404 {
			t.Fatalf("base %s: %v, want a 404 failure", tc.base, err)
		}
		msg := pe.Failure.Message
		if !strings.Contains(msg, "POST "+tc.url) || strings.Contains(msg, "under /v1") != tc.mention {
			t.Errorf("base %s: message %q; want the URL tried, and the /v1 hint %v", tc.base, msg, tc.mention)
		}
	}
}
