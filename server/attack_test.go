package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jsonl"
)

// An import longer than one append is written in several; a client that
// sends to the new session meanwhile must not see it half written. Every
// input the owner acknowledged is in the log afterwards, and the import
// either makes the whole session or nothing.
func TestInputDuringALongImportIsNotLost(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.client.Create(ctx, &server.CreateRequest{ID: "s"})
	for i := range 40 {
		f.client.Input(ctx, "s", "send", fmt.Sprintf("message %d", i))
	}
	untilIdle(t, f.client, "s", 1)
	evs, err := f.log.Read(ctx, "s", 1, 0)
	if err != nil || len(evs) <= store.MaxAppendEvents {
		t.Fatalf("%d events (%v): the test needs more than one append's worth", len(evs), err)
	}
	var file bytes.Buffer
	jsonl.Write(&file, jsonl.Header{Session: "s"}, evs)
	for round := range 5 {
		id := fmt.Sprintf("big%d", round)
		var acked sync.Map
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					text := fmt.Sprintf("racer %d-%d", w, i)
					if q, err := f.client.Input(ctx, id, "send", text); err == nil {
						acked.Store(q.MessageID, text)
					} else if !server.IsCode(err, server.CodeNotFound) && !server.IsCode(err, server.CodeBusy) {
						t.Errorf("send during the import: %v", err)
					}
				}
			}()
		}
		_, ierr := f.client.Import(ctx, id, file.Bytes())
		time.Sleep(20 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		if ierr != nil {
			t.Errorf("import %s: %v", id, ierr)
		}
		got, err := f.log.Read(ctx, id, 1, 0)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		if len(got) < len(evs) || got[len(evs)-1].Type != evs[len(evs)-1].Type {
			t.Fatalf("%s: the imported log is not there whole (%d events of %d)", id, len(got), len(evs))
		}
		if _, err := event.Fold(id, got); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		logged := map[string]bool{}
		for _, e := range got[len(evs):] {
			if e.Type == event.EvInboxSpliced {
				for _, m := range decodeSplice(t, e).Inserted {
					logged[m.ID] = true
				}
			}
		}
		acked.Range(func(k, v any) bool {
			if !logged[k.(string)] {
				t.Errorf("%s: input %s (%q) was acknowledged but is not in the log", id, k, v)
			}
			return true
		})
	}
}

func decodeSplice(t *testing.T, e store.Event) event.InboxSpliced {
	t.Helper()
	var d event.InboxSpliced
	if err := jsonUnmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// "." and ".." are dot segments: a client's URL for such a session is
// cleaned to another route, so no command could name the session again.
// Creating, forking to or importing as one is refused, and nothing is
// made.
func TestDotSegmentSessionIDsAreRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "hi"})
	untilIdle(t, f.client, "s", 1)
	evs, _ := f.log.Read(ctx, "s", 1, 0)
	var file bytes.Buffer
	jsonl.Write(&file, jsonl.Header{Session: "s"}, evs)
	for _, id := range []string{".", ".."} {
		_, err := f.client.Create(ctx, &server.CreateRequest{ID: id})
		if !server.IsCode(err, server.CodeBadRequest) {
			t.Errorf("create %q: %v, want bad_request", id, err)
		}
		_, err = f.client.Fork(ctx, "s", server.ForkRequest{At: uint64(len(evs)), As: id})
		if !server.IsCode(err, server.CodeBadRequest) {
			t.Errorf("fork as %q: %v, want bad_request", id, err)
		}
	}
	ids, _ := f.log.Sessions(ctx)
	if len(ids) != 1 {
		t.Fatalf("sessions %v, want only s", ids)
	}
}

// A store whose path is too long for a socket address has its socket in
// a directory under the temporary directory, which every user can write.
// Another user who made that directory first could swap the owner's
// socket for one of their own and read what clients send (API keys among
// it). An owner refuses a directory it does not own alone, and a client
// does not dial into one.
func TestSocketDirectoryPlantedByAnotherUser(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := server.SocketPath(long)
	if !strings.HasPrefix(sock, tmp) {
		t.Fatalf("socket %s is not under the temporary directory %s", sock, tmp)
	}
	plant := func(t *testing.T, mode os.FileMode, uid int) {
		os.RemoveAll(filepath.Dir(sock))
		if err := os.Mkdir(filepath.Dir(sock), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Dir(sock), mode)
		if uid >= 0 {
			if err := os.Chown(filepath.Dir(sock), uid, uid); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(t *testing.T) {
		ln, closeFn, err := server.Listen(long)
		if err == nil {
			closeFn()
			ln.Close()
			t.Fatal("the owner listened in a directory others control")
		}
		if !strings.Contains(err.Error(), filepath.Dir(sock)) || strings.Contains(err.Error(), "\n") {
			t.Errorf("the refusal does not name the directory on one line: %v", err)
		}
		// Someone else's socket there is not dialled.
		other, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		f := newFixture(t)
		go f.srv.Serve(other, true)
		if _, err := server.Dial(context.Background(), long); !errors.Is(err, server.ErrNoOwner) {
			t.Errorf("a client dialled a socket in a directory others control: %v", err)
		}
	}
	t.Run("world-writable", func(t *testing.T) {
		plant(t, 0o777, -1)
		check(t)
	})
	if os.Getuid() == 0 {
		t.Run("another user's", func(t *testing.T) {
			plant(t, 0o700, 65534)
			check(t)
		})
	}
	// Our own private directory is used as before.
	os.RemoveAll(filepath.Dir(sock))
	ln, closeFn, err := server.Listen(long)
	if err != nil {
		t.Fatal(err)
	}
	closeFn()
	ln.Close()
}

// A follower that stops reading altogether (its socket's buffers full)
// is cut off once a write has waited StreamStall: the stream does not sit
// blocked in a write forever, holding its connection and buffers.
func TestStalledFollowerIsCutOff(t *testing.T) {
	f := newFixture(t, func(o *fixtureOptions) { o.StreamBuffer = 4; o.StreamStall = 100 * time.Millisecond })
	ctx := context.Background()
	f.client.Create(ctx, &server.CreateRequest{ID: "s"})
	w := &deadlined{stalled: stalled{h: http.Header{}, release: make(chan struct{})}}
	defer close(w.release)
	req := httptest.NewRequest(http.MethodGet, "/v1/sessions/s/stream", nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	served := make(chan struct{})
	go func() {
		defer close(served)
		f.srv.ServeHTTP(w, req)
	}()
	for i := range 10 {
		f.client.Input(ctx, "s", "send", fmt.Sprintf("message %d", i))
	}
	untilIdle(t, f.client, "s", 1)
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a client that reads nothing is still blocked in a write")
	}
}

// deadlined is a stalled connection that honours write deadlines, as a
// network connection does (http.ResponseController finds the method).
type deadlined struct {
	stalled
	mu       sync.Mutex
	deadline time.Time
}

func (w *deadlined) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = t
	return nil
}

func (w *deadlined) Write(b []byte) (int, error) {
	w.mu.Lock()
	d := w.deadline
	w.mu.Unlock()
	if d.IsZero() {
		return w.stalled.Write(b)
	}
	select {
	case <-w.release:
		return len(b), nil
	case <-time.After(time.Until(d)):
		return 0, os.ErrDeadlineExceeded
	}
}

// Health answers anyone on TCP, so a page in a browser (through DNS
// rebinding, say) can read it: without the token it says the owner is
// alive and its version, not where the store is or the owner's process.
func TestHealthWithoutTokenSaysNothingOfTheMachine(t *testing.T) {
	f := newFixture(t, func(o *fixtureOptions) { o.StoreName = "/home/alice/secret-project/.wagent" })
	get := func(token string) server.Health {
		req, _ := http.NewRequest(http.MethodGet, f.http.URL+"/v1/health", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("health: %v %v", resp, err)
		}
		defer resp.Body.Close()
		var h server.Health
		json.NewDecoder(resp.Body).Decode(&h)
		return h
	}
	if h := get(""); h.Status != "ok" || h.Version != "test" || h.Store != "" || h.PID != 0 {
		t.Errorf("health without a token: %+v, want status and version only", h)
	}
	if h := get("wrong"); h.Store != "" || h.PID != 0 {
		t.Errorf("health with a wrong token: %+v", h)
	}
	if h := get(f.token); h.Store == "" || h.PID == 0 {
		t.Errorf("health with the token: %+v, want the store and pid", h)
	}
}

// One request that decides a call twice (allow and deny) is refused as
// what it is, and decides nothing; the call still waits.
func TestOneRequestDecidingACallTwice(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "add two"})
	if _, status := untilIdle(t, f.client, "s", 1); status != "waiting" {
		t.Fatalf("status %q, want waiting", status)
	}
	before, _ := f.log.Head(ctx, "s")
	_, err := f.client.Decide(ctx, "s", server.DecideRequest{Decisions: []server.Decision{{CallID: "c1", Allow: true}, {CallID: "c1"}}})
	if !server.IsCode(err, server.CodeBadRequest) || !strings.Contains(err.Error(), "c1") || !strings.Contains(err.Error(), "twice") {
		t.Errorf("deciding c1 twice in one request: %v, want bad_request saying so", err)
	}
	if h, _ := f.log.Head(ctx, "s"); h != before {
		t.Errorf("the log moved from %d to %d", before, h)
	}
	if ap, _ := f.client.Approvals(ctx); len(ap.Approvals) != 1 {
		t.Errorf("approvals %+v, want c1 still waiting", ap)
	}
}

// Anyone who can reach the TCP port may ask for /v1/health and keep the
// connection open: with no idle timeout, thousands of such connections
// hold the owner's file descriptors (which its store needs too) for ever.
// An idle connection is closed after Options.IdleTimeout.
func TestIdleConnectionOfAStrangerIsClosed(t *testing.T) {
	srv, err := newServer(app.Options{Drive: true, Log: store.NewMemory(), Resolve: func(context.Context, string, *event.SessionCreated) (engine.Config, error) {
		return engine.Config{}, nil
	}}, server.Options{Token: "s3cret", IdleTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go srv.Serve(ln, false)
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the idle connection is still open: %v", err)
	}
}
