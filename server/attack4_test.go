package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wagent/wagent/server"
)

// Attack: a handler that panics (an embedder's code run inside a request)
// served in-process must not take the whole process down, as net/http's
// server would not; the client gets an error, not a 200 with no body.
func TestAttackInProcessHandlerPanics(t *testing.T) {
	for _, after := range []bool{false, true} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if after {
				w.WriteHeader(http.StatusOK)
				w.Write([]byte("partial"))
			}
			panic("boom")
		})
		cl := &http.Client{Transport: server.InProcess(h)}
		resp, err := cl.Get("http://wagent/v1/health")
		if err != nil {
			continue // refused: fine
		}
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !after && resp.StatusCode == http.StatusOK {
			t.Errorf("a handler that panicked before answering: %d %q, want an error", resp.StatusCode, b)
		}
		if after && rerr == nil {
			t.Errorf("a handler that panicked mid-body: the body read to its end without an error (%q)", b)
		}
	}
}

// The transport closes the request's body, as a RoundTripper must.
func TestInProcessClosesTheRequestBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	body := &closeRecorder{Reader: strings.NewReader("{}")}
	req, _ := http.NewRequest("POST", "http://wagent/x", body)
	resp, err := server.InProcess(h).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if !body.closed {
		t.Error("the request body was never closed")
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }
