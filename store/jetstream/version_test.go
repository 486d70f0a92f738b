package jetstream_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jetstream"
)

// fakeServer is just enough of a NATS server for a client to connect: it
// sends INFO with version, answers PING, and answers a JetStream account
// info request with API level apiLevel. Everything else it ignores. It
// returns the client URL.
func fakeServer(t *testing.T, version string, apiLevel int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				go func() { <-t.Context().Done(); c.Close() }()
				fakeConn(c, version, apiLevel)
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}

func fakeConn(c net.Conn, version string, apiLevel int) {
	fmt.Fprintf(c, "INFO {\"server_id\":\"FAKE\",\"server_name\":\"fake\",\"version\":%q,\"proto\":1,\"headers\":true,\"max_payload\":%d,\"jetstream\":true}\r\n", version, 8<<20)
	r := bufio.NewReader(c)
	subs := map[string]string{} // subject (wildcards as sent) -> sid
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "PING":
			io.WriteString(c, "PONG\r\n")
		case "SUB":
			subs[f[1]] = f[len(f)-1]
		case "PUB", "HPUB":
			if len(f) < 4 {
				return
			}
			n, _ := strconv.Atoi(f[len(f)-1])
			if _, err := io.CopyN(io.Discard, r, int64(n)+2); err != nil {
				return
			}
			if f[1] != "$JS.API.INFO" {
				continue
			}
			reply := f[2]
			body := fmt.Sprintf(`{"type":"io.nats.jetstream.api.v1.account_info_response","memory":0,"storage":0,"streams":0,"consumers":0,"limits":{},"api":{"level":%d,"total":0,"errors":0}}`, apiLevel)
			for subj, sid := range subs {
				if subj == reply || (strings.HasSuffix(subj, ".*") && strings.HasPrefix(reply, strings.TrimSuffix(subj, "*"))) {
					fmt.Fprintf(c, "MSG %s %s %d\r\n%s\r\n", reply, sid, len(body), body)
				}
			}
		}
	}
}

// An old server is refused on Open, before anything is created, with one
// line naming the server, its version, the feature and the release that
// has it.
func TestOpenRefusesOldServer(t *testing.T) {
	url := fakeServer(t, "2.9.10", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := jetstream.OpenURL(ctx, url)
	want := "nats-server at " + url + " is 2.9.10; the store needs message schedules (allow_msg_schedules) on the wake-up stream (nats-server 2.12.0 or later): upgrade it ("
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("OpenURL on a 2.9.10 server: %v\nwant it to say %q", err, want)
	}
	if !errors.Is(err, store.ErrInvalid) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line wrapping store.ErrInvalid, got %q", err)
	}
	for _, hint := range []string{"docker run", "nats:2.12 -js", "go install github.com/nats-io/nats-server/v2@v2.15.2"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("the error does not say %q: %v", hint, err)
		}
	}
}

// A server whose version says nothing usable is judged by the JetStream
// API level its account info reports.
func TestOpenRefusesOldAPILevel(t *testing.T) {
	url := fakeServer(t, "custom-build", 1)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = jetstream.Open(ctx, nc, jetstream.Options{})
	want := `is "custom-build" (JetStream API level 1); the store needs message schedules (allow_msg_schedules) on the wake-up stream (nats-server 2.12.0 or later)`
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open on an API level 1 server: %v\nwant it to say %q", err, want)
	}
}

// The embedded server of the tests (the module's nats-server) has
// everything the store needs.
func TestOpenAcceptsCurrentServer(t *testing.T) {
	ns := startServer(t)
	nc := connect(t, ns)
	if v := nc.ConnectedServerVersion(); !strings.HasPrefix(v, "2.") {
		t.Fatalf("embedded server version %q", v)
	}
	l := openLog(t, nc, t.Name(), jetstream.Options{})
	if err := l.Create(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	if jetstream.MinServerVersion != "2.12.0" {
		t.Fatalf("MinServerVersion %s", jetstream.MinServerVersion)
	}
}
