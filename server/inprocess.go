package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// InProcess is an http.RoundTripper that serves each request with h in
// this process, without a socket: for a command that opened the store
// itself and is its own only client. Responses stream (the body is read
// as the handler writes it); the request's context ends the handler.
// Requests are as the local user's (the owner's socket's).
func InProcess(h http.Handler) http.RoundTripper { return inProcess{h} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	r = r.WithContext(contextLocal(r.Context()))
	go func() {
		defer func() {
			if r.Body != nil {
				r.Body.Close() // a RoundTripper closes the request's body
			}
			if v := recover(); v != nil {
				// As net/http's server does, a panic ends this request
				// only (not the process): the client gets an error, or a
				// body cut short if the answer had begun.
				err := fmt.Errorf("server: the in-process handler panicked: %v", v)
				w.fail(err)
				pw.CloseWithError(err)
				return
			}
			w.writeHeader(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
		if w.err != nil {
			return nil, w.err
		}
	case <-r.Context().Done():
		pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	resp := &http.Response{
		Status: strconv.Itoa(w.status) + " " + http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: r,
	}
	return resp, nil
}

// pipeWriter is the handler's side of an in-process response.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header
	// err is why the handler gave no answer (it panicked before one).
	err error
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) writeHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) WriteHeader(status int) { w.writeHeader(status) }

// fail ends a response that has not begun with err.
func (w *pipeWriter) fail(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush is a no-op: every write reaches the reader as it is made.
func (w *pipeWriter) Flush() {}

// contextLocal marks a request's context as the owner's socket's.
func contextLocal(ctx context.Context) context.Context {
	return context.WithValue(ctx, localKey, true)
}
