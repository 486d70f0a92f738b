package wasmhost

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wagent/wagent/hostabi"
)

// callResult runs a started call of a built-in op's tool and returns its
// result, or the error the call faulted with.
func callResult(t *testing.T, o *Op, tool, args string) (hostabi.Effect, []string, error) {
	t.Helper()
	v := &hostabi.View{Hook: hostabi.HookTool, Session: "s1", Op: o.Manifest().Name, Turn: 1, Step: 1, Tool: &hostabi.ToolView{
		Run:   "c1",
		Calls: []hostabi.PendingCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(args), Owner: o.Manifest().Name, Decision: "allow", Started: true}},
	}}
	eff, err := o.Handle(context.Background(), v, nil)
	var res hostabi.Effect
	var logs []string
	for _, e := range eff {
		switch e.Kind {
		case hostabi.KindResult:
			res = e
		case hostabi.KindLog:
			logs = append(logs, e.Text)
		}
	}
	return res, logs, err
}

// rawServer answers every request with the given header block and body,
// whatever its length (Go's own server refuses a request line over 1 MB).
func rawServer(t *testing.T, header, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReaderSize(c, 64<<10)
				for {
					l, err := r.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				c.Write([]byte(header + "Content-Length: " + itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body))
			}(c)
		}
	}()
	return ln.Addr().String()
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// ATTACK: built-in ops quote their own inputs (or a server's headers) in
// results the host does not clip: the fetch op names the URL it fetched
// (a 2 MiB URL to a granted host that answers), the media type a server
// sent, and the files op the path the model gave. Each result over the
// effect size limit faults the op instead of answering the model.
func TestBuiltinOpsLongInputsInResults(t *testing.T) {
	long := strings.Repeat("a", 2<<20)
	ok := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n", "hello")
	notFound := rawServer(t, "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n", "nope")
	png := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n", "\x89PNG")
	hugeType := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Type: application/x-"+long+"\r\n", "x")
	fetch := func(addr string) *Op {
		return builtin(t, "fetch", Config{Grants: Grants{HTTP: []string{addr}}})
	}
	dir := t.TempDir()
	files := builtin(t, "files", Config{Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}}})
	for _, c := range []struct {
		name       string
		op         *Op
		tool, args string
	}{
		{"fetch: a long URL answered 200", fetch(ok), "fetch", `{"url":"http://` + ok + `/` + long + `"}`},
		{"fetch: a long URL answered 404", fetch(notFound), "fetch", `{"url":"http://` + notFound + `/` + long + `"}`},
		{"fetch: a long URL answered with an image", fetch(png), "fetch", `{"url":"http://` + png + `/` + long + `"}`},
		{"fetch: a server's long media type", fetch(hugeType), "fetch", `{"url":"http://` + hugeType + `/"}`},
		{"files: a long path outside the project", files, "read_file", `{"path":"/` + long + `"}`},
		{"files: a long path that does not exist", files, "read_file", `{"path":"` + long + `"}`},
		{"files: a long glob pattern", files, "glob", `{"pattern":"[` + long + `"}`},
		{"files: a long grep pattern", files, "grep", `{"pattern":"(` + long + `"}`},
		{"files: a 600 KB grep pattern (quoted twice)", files, "grep", `{"pattern":"(` + long[:600<<10] + `"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, logs, err := callResult(t, c.op, c.tool, c.args)
			if err != nil {
				t.Fatalf("the op faulted instead of answering: %.300v", err)
			}
			if len(r.Content) > 64<<10 {
				t.Errorf("a result of %d bytes", len(r.Content))
			}
			for _, l := range logs {
				if len(l) > 4<<10 {
					t.Errorf("a line for watchers of %d bytes", len(l))
				}
			}
		})
	}
}

// ATTACK: clip cuts at a byte count and drops a cut rune, but what it
// quotes may hold invalid UTF-8 of the guest's own; and the host's
// success line quotes the URL unclipped before tell clips the whole line.
func TestClipKeepsUTF8(t *testing.T) {
	for _, s := range []string{strings.Repeat("é", 600), "\xff\xfe" + strings.Repeat("a", 2000), strings.Repeat("a", 255) + "€€"} {
		got := clip(s, quotedBytes)
		if !utf8.ValidString(got) && utf8.ValidString(s) {
			t.Errorf("clip of valid text is not UTF-8: %q", got)
		}
		if len(got) > quotedBytes+40 {
			t.Errorf("clip gave %d bytes", len(got))
		}
	}
}
