package wasmhost

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// An outsider's second pass over the capabilities (issue 15): the ways
// to spell a loopback address that a wildcard grant must not reach, a
// redirect from a host granted by name to loopback reached only through a
// wildcard, a command's directory through a link out of its mount, and
// an option that makes a granted command write where the grant does not
// reach. Every attempt is an error result, and the target sees nothing.

// A wildcard grant never reaches loopback, however the address is
// spelled: the check is on the address dialled, after resolution, so a
// name that resolves (or is rebound) to 127.0.0.1 is refused the same
// way as the literal.
func TestHostileHTTPLoopbackSpellings(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "loopback")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(hostOf(srv.URL))
	wild := fetchOp(t, Limits{Timeout: 5 * time.Second}, "*:"+port)
	for _, host := range []string{
		"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.0.0.1.",
		"0.0.0.0", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]",
		"localhost", "LOCALHOST", "localhost.",
	} {
		t.Run(host, func(t *testing.T) {
			r, logs := runCall(t, wild, "fetch", `{"url":"http://`+host+`:`+port+`/"}`)
			if !r.IsError || strings.Contains(r.Content, "loopback\n") || strings.Count(r.Content, "\n") > 0 {
				t.Errorf("result %q, want a one-line error", r.Content)
			}
			if len(logs) != 1 || !strings.Contains(logs[0], "failed: ") && !strings.Contains(logs[0], "refused: ") {
				t.Errorf("live lines %q", logs)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server got %d requests through a wildcard grant", n)
	}
	// Granted by name, the same server answers.
	if r, _ := runCall(t, fetchOp(t, Limits{Timeout: 5 * time.Second}, "127.0.0.1:"+port), "fetch", `{"url":"`+srv.URL+`/"}`); r.IsError || !strings.HasSuffix(r.Content, "loopback") {
		t.Errorf("granted by name: %q", r.Content)
	}
}

// A host granted by name that redirects to loopback on a port granted
// only through a wildcard: the redirect passes the grant check, and the
// dial refuses the address.
func TestHostileHTTPRedirectToLoopback(t *testing.T) {
	var hits atomic.Int32
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "inner secret")
	}))
	defer inner.Close()
	_, innerPort, _ := net.SplitHostPort(hostOf(inner.URL))
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+innerPort+"/secret", http.StatusFound)
	}))
	defer front.Close()
	op := fetchOp(t, Limits{Timeout: 5 * time.Second}, hostOf(front.URL), "*:"+innerPort)
	r, logs := runCall(t, op, "fetch", `{"url":"`+front.URL+`/"}`)
	if want := "localhost resolves to"; !r.IsError || !strings.Contains(r.Content, want) || strings.Contains(r.Content, "secret\n") {
		t.Errorf("result %q, want an error containing %q", r.Content, want)
	}
	if len(logs) != 1 {
		t.Errorf("live lines %q", logs)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server got %d requests", n)
	}
}

// A command's directory through a link inside the mount that leads out
// of it is refused before anything runs: the mount's os.Root does not
// follow the link out.
func TestHostileExecDirThroughLink(t *testing.T) {
	op, dir := shellOp(t, Limits{Timeout: 10 * time.Second}, ExecGrant{Cmd: "pwd", Unconfined: true})
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink("../"+filepath.Base(dir), filepath.Join(dir, "self")) // stays inside after all
	for _, cwd := range []string{"out", "/work/out", "out/.", "/work/self/out"} {
		t.Run(cwd, func(t *testing.T) {
			b, _ := json.Marshal(map[string]string{"command": "pwd", "cwd": cwd})
			r, logs := runCall(t, op, "shell", string(b))
			if !r.IsError || !strings.Contains(r.Content, "is not a directory inside mount /work") || strings.Contains(r.Content, outside) {
				t.Errorf("result %q", r.Content)
			}
			if len(logs) != 1 || !strings.Contains(logs[0], "refused: ") {
				t.Errorf("live lines %q", logs)
			}
		})
	}
}

// Argument injection: a grant with ** lets options through (issue 15
// defines * and ** as any argument), so an option that writes a file
// (sort -o, like git diff --output) is a way out of the grant's intent.
// Confined, the write outside the mount is refused by the kernel and the
// file is not made; the same option inside the mount works.
func TestHostileExecOptionInjection(t *testing.T) {
	needLandlock(t)
	outside := t.TempDir()
	op, dir := shellOp(t, Limits{Timeout: 10 * time.Second}, ExecGrant{Cmd: "sort **"})
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("b\na\n"), 0o644)
	target := filepath.Join(outside, "pwned")
	r, _ := runCall(t, op, "shell", `{"command":"sort -o `+target+` in.txt"}`)
	if _, err := os.Stat(target); err == nil {
		t.Fatalf("sort -o wrote outside the mount: %q", r.Content)
	}
	if !strings.HasPrefix(r.Content, "exit code 2 (") || !strings.Contains(r.Content, target+": Permission denied") {
		t.Errorf("result %q, want sort's exit 2 with a permission error", r.Content)
	}
	r, _ = runCall(t, op, "shell", `{"command":"sort -o sorted.txt in.txt"}`)
	if b, _ := os.ReadFile(filepath.Join(dir, "sorted.txt")); r.IsError || string(b) != "a\nb\n" {
		t.Errorf("sort -o inside the mount: %q, file %q", r.Content, b)
	}
}
