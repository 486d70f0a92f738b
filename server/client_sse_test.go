package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// TestClientReadsMultiLineEvents: the client reads a session's stream as
// the server-sent events standard says, not only in the one shape this
// owner writes: a proxy, or another implementation of the API, may split
// an event's data over several lines (joined with LF), write "data:"
// without the space, end lines in CR or CRLF, start with a byte order
// mark and send comments.
func TestClientReadsMultiLineEvents(t *testing.T) {
	stream := "\xEF\xBB\xBF: hello\r\n" +
		"id: 1\r\nevent: event\r\n" +
		"data:{\"kind\":\"event\",\r\n" +
		"data:  \"event\":{\"seq\":1,\"type\":\"note\",\"time\":\"2025-01-02T03:04:05Z\",\r\n" +
		": a comment inside the event\r\n" +
		"data: \"data\":{\"a\":\r\n" +
		"data:1}}}\r\n\r\n" +
		"event: status\r" +
		"data:{\"kind\":\"status\",\"status\":\"idle\",\r" +
		"data:\"head\":1}\r\r"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream)
	})
	hs := httptest.NewServer(h)
	defer hs.Close()
	c := server.NewClient(hs.URL, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var got []server.StreamEvent
	err := c.Stream(ctx, "s", 1, func(ev server.StreamEvent) error {
		got = append(got, ev)
		if ev.Kind == "status" {
			return server.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []server.StreamEvent{
		{Kind: "event", Event: &store.Event{Seq: 1, Type: "note", Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
			Data: json.RawMessage("{\"a\":\n1}")}},
		{Kind: "status", Status: "idle", Head: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
