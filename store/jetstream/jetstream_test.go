package jetstream_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jetstream"
)

// soak makes the hammer long: go test ./store/jetstream -run Hammer -soak.
var soak = flag.Bool("soak", false, "run the long version of the hammer tests")

var when = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func ev(typ string, n int) store.Event {
	return store.Event{Type: typ, Turn: 1, Time: when, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
}

func evs(typ string, from, n int) []store.Event {
	out := make([]store.Event, n)
	for i := range out {
		out[i] = ev(typ, from+i)
	}
	return out
}

// backends are the deployments the behaviour tests run against: one
// server, and three servers with an R3 stream.
func backends(t *testing.T) []struct {
	name string
	// conn returns a new connection to the deployment: a second process,
	// as far as the Log can tell.
	conn func(t *testing.T) *nats.Conn
	opts jetstream.Options
} {
	one := startServer(t)
	three := startCluster(t, 3)
	var n int
	return []struct {
		name string
		conn func(t *testing.T) *nats.Conn
		opts jetstream.Options
	}{
		{"one server", func(t *testing.T) *nats.Conn { return connect(t, one) }, jetstream.Options{}},
		{"three servers R3", func(t *testing.T) *nats.Conn { n++; return connect(t, three[n%3]) }, jetstream.Options{Replicas: 3}},
	}
}

func mustOpen(t *testing.T, nc *nats.Conn, key string, opts jetstream.Options) *jetstream.Log {
	t.Helper()
	l := openLog(t, nc, key, opts)
	t.Cleanup(func() { l.Close() })
	return l
}

func mustHead(t *testing.T, l store.Log, session string) uint64 {
	t.Helper()
	h, err := l.Head(t.Context(), session)
	if err != nil {
		t.Fatalf("Head(%s): %v", session, err)
	}
	return h
}

func mustRead(t *testing.T, l store.Log, session string, from uint64, limit int) []store.Event {
	t.Helper()
	got, err := l.Read(t.Context(), session, from, limit)
	if err != nil {
		t.Fatalf("Read(%s, %d, %d): %v", session, from, limit, err)
	}
	return got
}

// TestHeadRaceLoserGetsConflict: two processes that both saw head h append
// at h; the second one is refused with ErrConflict, and the log holds the
// first one's events only. Both Logs have the head in memory, so the loser
// is refused by the server, not by a look it took first.
func TestHeadRaceLoserGetsConflict(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			a := mustOpen(t, b.conn(t), t.Name(), b.opts)
			c := mustOpen(t, b.conn(t), t.Name(), b.opts)
			if err := a.Create(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Append(ctx, "s", 0, evs("a", 1, 2)...); err != nil {
				t.Fatal(err)
			}
			if h := mustHead(t, c, "s"); h != 2 {
				t.Fatalf("second process sees head %d, want 2", h)
			}
			if _, err := a.Append(ctx, "s", 2, evs("winner", 3, 3)...); err != nil {
				t.Fatalf("winner: %v", err)
			}
			_, err := c.Append(ctx, "s", 2, evs("loser", 3, 1)...)
			if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "s") || !strings.Contains(err.Error(), "head is 5, expected 2") {
				t.Fatalf("loser: got %v, want ErrConflict saying the head is 5", err)
			}
			got := mustRead(t, c, "s", 1, 0)
			if len(got) != 5 || got[4].Type != "winner" {
				t.Fatalf("log after the race: %d events, last %q; want 5 ending with the winner's", len(got), got[len(got)-1].Type)
			}
			// The loser goes on from what it reads.
			if _, err := c.Append(ctx, "s", 5, ev("loser", 6)); err != nil {
				t.Fatalf("loser at the new head: %v", err)
			}
		})
	}
}

// TestHammer: writers in several processes append to one session, each
// retrying at the head it reads after a conflict, under -race. No event is
// lost or doubled, each writer's events keep their order, and seqs stay
// dense.
func TestHammer(t *testing.T) {
	writers, each := 4, 40
	if *soak {
		writers, each = 8, 500
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			logs := make([]*jetstream.Log, writers)
			for w := range logs {
				logs[w] = mustOpen(t, b.conn(t), t.Name(), b.opts)
			}
			if err := logs[0].Create(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, writers)
			conflicts := make([]int, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := logs[w]
					var head uint64
					for i := 0; i < each; {
						n := min(1+i%3, each-i)
						batch := make([]store.Event, n)
						for k := range batch {
							batch[k] = store.Event{Type: fmt.Sprintf("w%d", w), Time: when, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i+k))}
						}
						h, err := l.Append(ctx, "s", head, batch...)
						if errors.Is(err, store.ErrConflict) {
							conflicts[w]++
							if head, err = l.Head(ctx, "s"); err != nil {
								errs[w] = err
								return
							}
							continue
						}
						if err != nil {
							errs[w] = fmt.Errorf("append %d: %w", i, err)
							return
						}
						head = h
						i += n
					}
				}()
			}
			wg.Wait()
			for w, err := range errs {
				if err != nil {
					t.Fatalf("writer %d: %v", w, err)
				}
			}
			got := mustRead(t, logs[0], "s", 1, 0)
			if len(got) != writers*each {
				t.Fatalf("the log holds %d events, want %d", len(got), writers*each)
			}
			next := make(map[string]int)
			for i, e := range got {
				if e.Seq != uint64(i+1) {
					t.Fatalf("event %d has seq %d", i, e.Seq)
				}
				var d struct{ I int }
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Fatal(err)
				}
				if d.I != next[e.Type] {
					t.Fatalf("seq %d: writer %s's event %d, want its event %d", e.Seq, e.Type, d.I, next[e.Type])
				}
				next[e.Type]++
			}
			total := 0
			for _, c := range conflicts {
				total += c
			}
			t.Logf("%d writers, %d events each: %d conflicts retried", writers, each, total)
		})
	}
}

// TestOversizedAppendRefused: on a server with the default max_payload
// (1 MiB), Open refuses the default options, which would admit appends the
// server cannot carry; with MaxAppendBytes lowered to fit, an append over
// it is refused with ErrInvalid and writes nothing, and one at the limit
// goes through.
func TestOversizedAppendRefused(t *testing.T) {
	ns := startServer(t, func(o *server.Options) { o.MaxPayload = 0 }) // the server's default
	nc := connect(t, ns)
	if mp := nc.MaxPayload(); mp != 1<<20 {
		t.Fatalf("the server's max_payload is %d, want the default 1 MiB", mp)
	}
	_, err := jetstream.Open(t.Context(), nc, jetstream.Options{Stream: "BIG", Subject: "big"})
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "max_payload") || !strings.Contains(err.Error(), fmt.Sprint(jetstream.RequiredMaxPayload)) {
		t.Fatalf("Open with the default options on a 1 MiB max_payload: got %v, want ErrInvalid naming max_payload and %d", err, jetstream.RequiredMaxPayload)
	}

	const limit = 512 << 10
	ctx := t.Context()
	l := mustOpen(t, nc, t.Name(), jetstream.Options{MaxAppendBytes: limit})
	if err := l.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, "s", 0, ev("t", 1)); err != nil {
		t.Fatal(err)
	}
	before := mustRead(t, l, "s", 1, 0)
	pad := func(n int) store.Event {
		return store.Event{Type: "t", Time: when, Data: json.RawMessage(`"` + strings.Repeat("x", n) + `"`)}
	}
	for _, tc := range []struct {
		name   string
		events []store.Event
	}{
		{"one event over the limit", []store.Event{pad(limit)}},
		{"several events over the limit together", []store.Event{pad(limit / 3), pad(limit / 3), pad(limit / 3)}},
		{"an event at the store's own limit", []store.Event{pad(store.MaxEventBytes - 100)}},
	} {
		_, err := l.Append(ctx, "s", 1, tc.events...)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "append to s") || !strings.Contains(err.Error(), "at most 524288") {
			t.Errorf("%s: got %v, want ErrInvalid naming the session and the limit", tc.name, err)
		}
		if diff := cmp.Diff(before, mustRead(t, l, "s", 1, 0)); diff != "" {
			t.Errorf("%s: the log changed (-before +after):\n%s", tc.name, diff)
		}
	}
	// Just under the limit, counted as CheckAppend counts: accepted whole.
	enc, _ := json.Marshal(store.Event{Seq: 2, Type: "t", Time: when, Data: json.RawMessage(`""`)})
	fit := pad(limit - len(enc))
	if _, err := l.Append(ctx, "s", 1, fit); err != nil {
		t.Fatalf("an append of exactly %d bytes: %v", limit, err)
	}
	if h := mustHead(t, l, "s"); h != 2 {
		t.Fatalf("head after the largest append = %d, want 2", h)
	}
}

// TestCorruptRecords publishes to a session's subject behind the Log's
// back, the way a stray publisher could: Head, Read and Append report
// ErrCorrupt naming the session and the seq (or, where no seq can be
// known, the stream message), and Delete still removes the session.
func TestCorruptRecords(t *testing.T) {
	ctx := t.Context()
	nc := connect(t, startServer(t))
	l := mustOpen(t, nc, t.Name(), jetstream.Options{})
	stream, prefix := names(t.Name())
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(session string, h nats.Header, data string) uint64 {
		t.Helper()
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: prefix + "." + session, Header: h, Data: []byte(data)}, natsjs.WithExpectStream(stream))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	check := func(what string, err error, want ...string) {
		t.Helper()
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", what, err)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", what, err, w)
			}
		}
	}

	// Garbage after a valid record: nothing says which seq it would be.
	if err := l.Create(ctx, "garbage"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, "garbage", 0, evs("t", 1, 3)...); err != nil {
		t.Fatal(err)
	}
	seq := raw("garbage", nil, "not a record")
	where := fmt.Sprintf("session garbage stream message %d", seq)
	_, err = l.Head(ctx, "garbage")
	check("Head", err, where, "not a wagent record")
	_, err = l.Read(ctx, "garbage", 1, 0)
	check("Read", err, where)
	_, err = l.Append(ctx, "garbage", 3, ev("t", 4))
	check("Append", err, where)
	if err := l.Delete(ctx, "garbage"); err != nil {
		t.Fatalf("Delete of a session with a corrupt record: %v", err)
	}

	// A record whose headers hold but whose events do not: the event seq is
	// known.
	if err := l.Create(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, "events", 0, evs("t", 1, 3)...); err != nil {
		t.Fatal(err)
	}
	m, err := l.Read(ctx, "events", 1, 0)
	if err != nil || len(m) != 3 {
		t.Fatalf("Read: %v", err)
	}
	last, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	lastMsg, err := last.GetLastMsgForSubject(ctx, prefix+".events")
	if err != nil {
		t.Fatal(err)
	}
	h := nats.Header{"Wagent-Log": {"1"}, "Wagent-Head": {"5"}, "Wagent-Count": {"2"},
		"Wagent-Prev": {fmt.Sprint(lastMsg.Sequence)}, "Wagent-Base": {lastMsg.Header.Get("Wagent-Base")}}
	raw("events", h, `{"seq":4,"type":"t","time":"2026-01-02T03:04:05Z"}`+"\n"+`{"seq":5,"type":"t","time":`)
	if hd := mustHead(t, l, "events"); hd != 5 {
		t.Errorf("Head = %d, want 5: the headers are sound", hd)
	}
	_, err = l.Read(ctx, "events", 1, 0)
	check("Read of broken events", err, "session events seq 5")
	if got := mustRead(t, l, "events", 1, 3); len(got) != 3 {
		t.Errorf("Read below the broken record returned %d events, want 3", len(got))
	}

	// A subject under the prefix that no session id encodes to.
	raw("a%41", markerHeader(), "")
	_, err = l.Sessions(ctx)
	check("Sessions with a foreign subject", err, prefix+".a%41")
}

func markerHeader() nats.Header {
	return nats.Header{"Wagent-Log": {"1"}, "Wagent-Head": {"0"}, "Wagent-Count": {"0"}}
}

// TestWatchSeesOtherWriters: a watch follows appends made through another
// connection (another process), including after that process deletes the
// session and creates it again, and is quiet about refused appends.
func TestWatchSeesOtherWriters(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			watcher := mustOpen(t, b.conn(t), t.Name(), b.opts)
			writer := mustOpen(t, b.conn(t), t.Name(), b.opts)
			if err := writer.Create(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			heads, stop := watcher.Watch("s")
			defer stop()
			await := func(want uint64) {
				t.Helper()
				deadline := time.After(5 * time.Second)
				for {
					select {
					case h, ok := <-heads:
						if !ok {
							t.Fatal("watch closed")
						}
						if h == want {
							return
						}
					case <-deadline:
						t.Fatalf("no head %d from the other process within 5s", want)
					}
				}
			}
			if _, err := writer.Append(ctx, "s", 0, evs("t", 1, 2)...); err != nil {
				t.Fatal(err)
			}
			await(2)
			if _, err := writer.Append(ctx, "s", 2, ev("t", 3)); err != nil {
				t.Fatal(err)
			}
			await(3)
			if _, err := writer.Append(ctx, "s", 0, ev("t", 1)); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("stale append: %v", err)
			}
			if err := writer.Delete(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			if err := writer.Create(ctx, "s"); err != nil {
				t.Fatal(err)
			}
			if _, err := writer.Append(ctx, "s", 0, ev("t", 1)); err != nil {
				t.Fatal(err)
			}
			await(1)
			select {
			case h := <-heads:
				t.Errorf("a head %d arrived after the last append", h)
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}

// TestOpenRefusesUnfitStreams: a stream someone else configured is
// checked, not changed: each setting that would break a log is named.
func TestOpenRefusesUnfitStreams(t *testing.T) {
	ctx := t.Context()
	servers := startCluster(t, 3)
	nc := connect(t, servers[0])
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name string
		cfg  func(*natsjs.StreamConfig)
		opts jetstream.Options
		want string
	}{
		{"max age", func(c *natsjs.StreamConfig) { c.MaxAge = time.Hour }, jetstream.Options{}, "would drop events"},
		{"max msgs per subject", func(c *natsjs.StreamConfig) { c.MaxMsgsPerSubject = 10 }, jetstream.Options{}, "would drop events"},
		{"work queue", func(c *natsjs.StreamConfig) { c.Retention = natsjs.WorkQueuePolicy }, jetstream.Options{}, "retention"},
		{"small messages", func(c *natsjs.StreamConfig) { c.MaxMsgSize = 1 << 20 }, jetstream.Options{}, "max_msg_size"},
		{"other subjects", func(c *natsjs.StreamConfig) { c.Subjects = []string{"elsewhere.*"} }, jetstream.Options{}, "do not include"},
		{"deny purge", func(c *natsjs.StreamConfig) { c.DenyPurge = true }, jetstream.Options{}, "purge"},
		{"direct gets on R3", func(c *natsjs.StreamConfig) { c.Replicas, c.AllowDirect = 3, true }, jetstream.Options{}, "stale heads"},
		{"other replicas", func(c *natsjs.StreamConfig) {}, jetstream.Options{Replicas: 3}, "1 replicas, the options ask for 3"},
		{"other storage", func(c *natsjs.StreamConfig) {}, jetstream.Options{Storage: jetstream.MemoryStorage}, "storage is file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, subject := fmt.Sprintf("UNFIT%d", i), fmt.Sprintf("unfit%d", i)
			cfg := natsjs.StreamConfig{Name: name, Subjects: []string{subject + ".*"}}
			tc.cfg(&cfg)
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			opts := tc.opts
			opts.Stream, opts.Subject = name, subject
			_, err := jetstream.Open(ctx, nc, opts)
			if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), name) {
				t.Errorf("Open: got %v, want ErrInvalid naming the stream and saying %q", err, tc.want)
			}
		})
	}
	// A stream this package created opens again, with or without options.
	for _, opts := range []jetstream.Options{{Replicas: 3}, {}, {Replicas: 3, Storage: jetstream.FileStorage}} {
		opts.Stream, opts.Subject = "FIT", "fit"
		l, err := jetstream.Open(ctx, nc, opts)
		if err != nil {
			t.Fatalf("Open(%+v) of a fit stream: %v", opts, err)
		}
		l.Close()
	}
}

func TestOptionsChecked(t *testing.T) {
	nc := connect(t, startServer(t))
	for _, tc := range []struct {
		name string
		opts jetstream.Options
		want string
	}{
		{"stream with a dot", jetstream.Options{Stream: "a.b"}, "stream name"},
		{"subject with a wildcard", jetstream.Options{Subject: "a.*"}, "subject prefix"},
		{"subject with an empty token", jetstream.Options{Subject: "a..b"}, "subject prefix"},
		{"replicas", jetstream.Options{Replicas: 7}, "replicas 7"},
		{"storage", jetstream.Options{Storage: "disk"}, `storage "disk"`},
		{"negative max append", jetstream.Options{MaxAppendBytes: -1}, "max append bytes"},
		{"max append over the store's", jetstream.Options{MaxAppendBytes: store.MaxAppendBytes + 1}, "max append bytes"},
		{"negative timeout", jetstream.Options{Timeout: -time.Second}, "timeout"},
		{"negative election wait", jetstream.Options{ElectionWait: -time.Second}, "election wait"},
	} {
		_, err := jetstream.Open(t.Context(), nc, tc.opts)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrInvalid saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := jetstream.Open(t.Context(), nil, jetstream.Options{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("nil connection: got %v, want ErrInvalid", err)
	}
}

// TestOpenURL connects with a token from the environment, as a worker
// started with --nats URL does, and owns the connection it made.
func TestOpenURL(t *testing.T) {
	ns := startServer(t, func(o *server.Options) { o.Authorization = "s3cret" })
	url := ns.ClientURL() + "?stream=URLT&subject=urlt&replicas=1&storage=file&timeout=2s"

	t.Setenv("NATS_USER", "")
	if _, err := jetstream.OpenURL(t.Context(), url); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("OpenURL without credentials: got %v, want a connection error", err)
	}
	t.Setenv("NATS_USER", "s3cret") // the nats CLI's "Username or Token"
	l, err := jetstream.OpenURL(t.Context(), url)
	if err != nil {
		t.Fatalf("OpenURL: %v", err)
	}
	ctx := t.Context()
	if err := l.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, "s", 0, ev("t", 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A second Log on the same URL finds what the first wrote.
	l, err = jetstream.OpenURL(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if h := mustHead(t, l, "s"); h != 1 {
		t.Errorf("Head after reopening = %d, want 1", h)
	}

	for _, bad := range []string{
		ns.ClientURL() + "?replicas=three",
		ns.ClientURL() + "?stream=a.b",
		ns.ClientURL() + "?strem=X",
		"http://localhost:4222",
	} {
		if _, err := jetstream.OpenURL(t.Context(), bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("OpenURL(%q): got %v, want ErrInvalid", bad, err)
		}
	}
}
