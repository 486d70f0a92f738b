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

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/procbox"
)

// The hostile matrix of issue 15: each attempt to use a capability beyond
// its grant, with the exact outcome the host gives it. Writes go through
// a Go guest (testdata/hostile/go/caps) that makes the raw WASI calls Go's
// os package would clean up first; HTTP and commands through the built-in
// fetch and shell ops, as a session runs them. Every server is on
// loopback: nothing leaves the machine.

// testHelper is what the test binary does when an exec test runs it:
// "connect ADDR" dials ADDR and says whether it could.
func testHelper(what string) int {
	verb, arg, _ := strings.Cut(what, " ")
	switch verb {
	case "connect":
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err != nil {
			fmt.Println("refused:", err)
			return 0
		}
		c.Close()
		fmt.Println("connected")
	}
	return 0
}

// writeTree is a read-write mount beside a folder that must stay out of
// reach, with links out of the mount in it:
//
//	outside/secret.txt            "SECRET"
//	mount/a.txt                   "a"
//	mount/link_out -> ../outside  (a directory link out)
//	mount/file_out -> ../outside/secret.txt
//	other/                        (a second read-write mount)
//	ro/r.txt                      (a read-only mount)
func writeTree(t *testing.T) (base string, fs *Op) {
	t.Helper()
	base = t.TempDir()
	for _, d := range []string{"outside", "mount", "other", "ro"} {
		os.MkdirAll(filepath.Join(base, d), 0o755)
	}
	os.WriteFile(filepath.Join(base, "outside", "secret.txt"), []byte("SECRET"), 0o644)
	os.WriteFile(filepath.Join(base, "mount", "a.txt"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(base, "ro", "r.txt"), []byte("r"), 0o644)
	os.Symlink("../outside", filepath.Join(base, "mount", "link_out"))
	os.Symlink("../outside/secret.txt", filepath.Join(base, "mount", "file_out"))
	fs = newOp(t, capsModule(t), Config{Op: "caps-fs", Limits: Limits{MemoryPages: 256, Timeout: 5 * time.Second}, Grants: Grants{Mounts: []Mount{
		{HostDir: filepath.Join(base, "mount"), GuestPath: "/work", Write: true},
		{HostDir: filepath.Join(base, "other"), GuestPath: "/other", Write: true},
		{HostDir: filepath.Join(base, "ro"), GuestPath: "/ro"},
	}}})
	return base, fs
}

// What a read-write mount allows stays inside it.
func TestHostileWrites(t *testing.T) {
	base, op := writeTree(t)
	for _, tc := range []struct{ name, cmd, want string }{
		// Granted: create, change, rename, link and remove inside.
		{"write inside", "write /work/new.txt hello", "ok"},
		{"read it back", "read /work/new.txt", "ok: hello"},
		{"mkdir inside", "mkdir /work/sub", "ok"},
		{"rename inside", "rename /work/new.txt /work/sub/moved.txt", "ok"},
		{"hard link inside", "link /work/a.txt /work/sub/a_link.txt", "ok"},
		{"symlink inside", "symlink a.txt /work/in_link", "ok"},
		{"remove inside", "remove /work/sub/a_link.txt", "ok"},
		{"write in the other mount", "write /other/o.txt o", "ok"},

		// A symbolic link out of the mount: not followed to write.
		{"write through a directory link", "write /work/link_out/escaped.txt X", "error: open /work/link_out/escaped.txt: Operation not permitted"},
		{"write through a file link", "write /work/file_out X", "error: open /work/file_out: Operation not permitted"},
		{"make a link out (absolute)", "symlink " + filepath.Join(base, "outside", "secret.txt") + " /work/abs_link", "error: symlink " + filepath.Join(base, "outside", "secret.txt") + " /work/abs_link: Operation not permitted"},
		{"make a link out (relative)", "symlink ../outside/secret.txt /work/rel_link", "error: symlink ../outside/secret.txt /work/rel_link: Operation not permitted"},
		// .. out of the mount: Go's os package finds no mount for the
		// cleaned path; the raw call is refused before it reaches one.
		{"write to ..", "write /work/../outside/escaped.txt X", "error: open /work/../outside/escaped.txt: Bad file number"},
		{"raw create at ..", "rawcreate /work ../outside/escaped.txt", "error: errno 63"}, // EPERM
		{"raw create at sub/../..", "rawcreate /work sub/../../outside/escaped.txt", "error: errno 63"},
		{"raw create through a link", "rawcreate /work link_out/escaped.txt", "error: errno 63"},
		// A hard link to a file outside.
		{"hard link through a file link", "link /work/file_out /work/hard", "ok"}, // links the link itself, see below
		{"raw hard link through a directory link", "rawlink /work link_out/secret.txt hard2", "error: errno 63"},
		{"raw hard link to ..", "rawlink /work ../outside/secret.txt hard3", "error: errno 63"},
		// A rename across the mount's boundary.
		{"rename to another mount", "rename /work/a.txt /other/a.txt", "error: rename /work/a.txt /other/a.txt: Not implemented on wasip1"},
		{"rename out through a link", "rename /work/a.txt /work/link_out/a.txt", "error: rename /work/a.txt /work/link_out/a.txt: Operation not permitted"},
		{"raw rename to ..", "rawrename /work a.txt ../outside/a.txt", "error: errno 63"},
		{"rename to a path outside every mount", "rename /work/a.txt /tmp/a.txt", "error: rename /work/a.txt /tmp/a.txt: Bad file number"},
		// A read-only mount takes no change at all.
		{"write in a read-only mount", "write /ro/x.txt x", "error: open /ro/x.txt: Read-only file system"},
		{"remove in a read-only mount", "remove /ro/r.txt", "error: remove /ro/r.txt: Read-only file system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := command(t, op, "fs", tc.cmd); got != tc.want {
				t.Errorf("/fs %s\n got %q\nwant %q", tc.cmd, got, tc.want)
			}
		})
	}
	// Nothing outside changed, nothing reached through the links.
	entries, _ := os.ReadDir(filepath.Join(base, "outside"))
	if b, _ := os.ReadFile(filepath.Join(base, "outside", "secret.txt")); len(entries) != 1 || string(b) != "SECRET" {
		t.Errorf("outside holds %d entries, secret.txt %q", len(entries), b)
	}
	if _, err := os.Stat(filepath.Join(base, "mount", "a.txt")); err != nil {
		t.Errorf("a.txt moved: %v", err)
	}
	// The hard link to file_out is a second link to the symbolic link,
	// not to the secret: reading through it is refused like the first.
	if got := command(t, op, "fs", "read /work/hard"); !strings.HasPrefix(got, "error:") {
		t.Errorf("read through the hard-linked symbolic link: %q", got)
	}
	if got := command(t, op, "fs", "write /work/hard X"); !strings.HasPrefix(got, "error:") {
		t.Errorf("write through the hard-linked symbolic link: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "outside", "secret.txt")); string(b) != "SECRET" {
		t.Errorf("secret.txt is now %q", b)
	}
}

// fetchOp is the fetch built-in granted hosts.
func fetchOp(t *testing.T, limits Limits, hosts ...string) *Op {
	return builtin(t, "fetch", Config{Limits: limits, Grants: Grants{HTTP: hosts}})
}

func hostOf(u string) string { return strings.TrimPrefix(u, "http://") }

// HTTP reaches the hosts granted, and nothing else.
func TestHostileHTTP(t *testing.T) {
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "the other server")
	}))
	defer other.Close()
	big := strings.Repeat("0123456789", 1<<20) // 10 MB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<h1>Hello</h1><p>from the granted server</p>")
		case "/redirect-away":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusFound)
		case "/redirect-home":
			http.Redirect(w, r, "/page", http.StatusFound)
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, big)
		}
	}))
	defer srv.Close()
	// A server that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	granted := hostOf(srv.URL)
	_, port, _ := net.SplitHostPort(granted)
	op := fetchOp(t, Limits{Timeout: 5 * time.Second}, granted)

	r, logs := runCall(t, op, "fetch", `{"url":"`+srv.URL+`/page"}`)
	if r.IsError || r.Content != srv.URL+"/page (HTTP 200, text/html)\n\n# Hello\n\nfrom the granted server" {
		t.Errorf("granted: %+v", r)
	}
	if len(logs) != 1 || !strings.HasPrefix(logs[0], "host: http GET "+srv.URL+"/page → 200 (") {
		t.Errorf("live lines %q", logs)
	}
	if r, _ := runCall(t, op, "fetch", `{"url":"`+srv.URL+`/redirect-home"}`); r.IsError || !strings.HasPrefix(r.Content, srv.URL+"/page (HTTP 200") {
		t.Errorf("a redirect to the same host: %+v", r)
	}

	for _, tc := range []struct {
		name string
		op   *Op
		url  string
		want string
	}{
		{"a host not granted", op, "http://example.com/", "example.com:80 is not granted (granted: " + granted + ")"},
		{"the same host on another port", op, other.URL + "/", hostOf(other.URL) + " is not granted (granted: " + granted + ")"},
		{"a granted host that redirects elsewhere", op, srv.URL + "/redirect-away",
			"the server redirected to " + other.URL + "/stolen, and " + hostOf(other.URL) + " is not granted (granted: " + granted + "); the redirect was not followed"},
		{"127.0.0.1 through a wildcard", fetchOp(t, Limits{}, "*:"+port), srv.URL + "/page",
			"127.0.0.1 resolves to 127.0.0.1, a loopback or private address, which only a grant naming 127.0.0.1 itself opens"},
		{"localhost through a wildcard", fetchOp(t, Limits{}, "*:"+port), "http://localhost:" + port + "/page",
			"localhost resolves to"},
		{"a scheme that is not http", op, "file:///etc/passwd", `scheme "file" is not http or https`},
		{"a server that never answers", fetchOp(t, Limits{Timeout: 600 * time.Millisecond}, hostOf("http://"+ln.Addr().String())), "http://" + ln.Addr().String() + "/",
			"no complete response within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r, logs := runCall(t, tc.op, "fetch", `{"url":"`+tc.url+`"}`)
			if !r.IsError || !strings.Contains(r.Content, tc.want) {
				t.Errorf("result %+v\nwant an error containing %q", r, tc.want)
			}
			if len(logs) != 1 || !strings.Contains(logs[0], tc.want) {
				t.Errorf("live lines %q", logs)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server nobody granted got %d requests", n)
	}

	// A response larger than the limit: the body read stops at it.
	small := fetchOp(t, Limits{HTTPBytes: 64 << 10}, granted)
	r, _ = runCall(t, small, "fetch", `{"url":"`+srv.URL+`/big"}`)
	if r.IsError || !strings.HasSuffix(r.Content, "… (the response was longer than the host reads: it kept its first 65536 bytes; this is its beginning)") || len(r.Content) > 70<<10 {
		t.Errorf("big response: %d bytes, ends %q", len(r.Content), r.Content[max(0, len(r.Content)-80):])
	}
	// Raw, through the caps guest: truncated says so, and the request's
	// own max_bytes lowers the limit.
	raw := newOp(t, capsModule(t), Config{Op: "caps-net", Limits: Limits{MemoryPages: 256, Timeout: 5 * time.Second, HTTPBytes: 1 << 20}, Grants: Grants{HTTP: []string{granted}}})
	var resp hostabi.HTTPResponse
	hostabi.ParseHTTPResponse([]byte(command(t, raw, "http", `{"url":"`+srv.URL+`/big","max_bytes":1000}`)), &resp)
	if resp.Status != 200 || !resp.Truncated || len(resp.Body) != 1000 {
		t.Errorf("raw big: status %d truncated %v body %d", resp.Status, resp.Truncated, len(resp.Body))
	}
	hostabi.ParseHTTPResponse([]byte(command(t, raw, "http", `{"url":"`+srv.URL+`/page","headers":{"Host":"evil"}}`)), &resp)
	if resp.Code != hostabi.CapBadRequest || resp.Error != "http_request: header Host is the host's to set" {
		t.Errorf("a Host header: %+v", resp)
	}
	hostabi.ParseHTTPResponse([]byte(command(t, raw, "http", `{"url":"`+srv.URL+`/page","surprise":1}`)), &resp)
	if resp.Code != hostabi.CapBadRequest || !strings.Contains(resp.Error, `unknown key "surprise"`) {
		t.Errorf("an unknown key: %+v", resp)
	}
}

// shellOp is the shell built-in on a fresh project folder.
func shellOp(t testing.TB, limits Limits, grants ...ExecGrant) (*Op, string) {
	t.Helper()
	dir := t.TempDir()
	return builtin(t, "shell", Config{Limits: limits, Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}, Exec: grants}}), dir
}

// Commands run as granted, and nothing else runs.
func TestHostileExec(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "canary")
	os.WriteFile(canary, []byte("alive"), 0o644)
	op, dir := shellOp(t, Limits{Timeout: 10 * time.Second},
		ExecGrant{Cmd: "echo **"}, ExecGrant{Cmd: "ls *"}, ExecGrant{Cmd: "sleep *", Timeout: 300 * time.Millisecond},
		ExecGrant{Cmd: "yes"}, ExecGrant{Cmd: "sh -c *", OutputBytes: 4096}, ExecGrant{Cmd: "pwd"})
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)

	r, logs := runCall(t, op, "shell", `{"command":"echo hello world"}`)
	if r.IsError || !strings.HasPrefix(r.Content, "exit code 0 (") || !strings.HasSuffix(r.Content, "--- stdout ---\nhello world\n") {
		t.Errorf("granted: %+v", r)
	}
	if len(logs) != 1 || !strings.HasPrefix(logs[0], "host: exec echo hello world in /work → exit 0 (") {
		t.Errorf("live lines %q", logs)
	}
	if r, _ := runCall(t, op, "shell", `{"command":"pwd","cwd":"src"}`); !strings.Contains(r.Content, "--- stdout ---\n"+evalDir(t, filepath.Join(dir, "src"))+"\n") {
		t.Errorf("cwd: %+v", r)
	}

	for _, tc := range []struct {
		name, command, want string
		maxTime             time.Duration
	}{
		{"a command not granted", "rm -rf " + canary, "rm -rf " + canary + " matches no exec grant of op shell (granted: echo **; ls *; sleep *; yes; sh -c *; pwd)", time.Second},
		{"shell injection against an argv grant", "ls src; rm -rf " + canary, "ls 'src;' rm -rf " + canary + " matches no exec grant", time.Second},
		{"a directory outside the mount", "pwd", "/etc is not inside a mount of the op (its mounts: /work)", time.Second},
		{"a command that never ends", "sleep 1000", "killed after its timeout of 300ms (after ", 3 * time.Second},
		{"a command that prints gigabytes", "yes", "killed after writing more than 67108864 bytes (after ", 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]string{"command": tc.command}
			if tc.name == "a directory outside the mount" {
				args["cwd"] = "/etc"
			}
			b, _ := json.Marshal(args)
			start := time.Now()
			r, logs := runCall(t, op, "shell", string(b))
			if !r.IsError || !strings.Contains(r.Content, tc.want) {
				t.Errorf("result %q\nwant an error containing %q", r.Content, tc.want)
			}
			if len(logs) != 1 {
				t.Errorf("live lines %q", logs)
			}
			if d := time.Since(start); d > tc.maxTime {
				t.Errorf("took %v", d)
			}
		})
	}
	// The injection as an argument, under a grant that takes any: one
	// argument for echo, nothing run.
	r, _ = runCall(t, op, "shell", `{"command":"echo \"hi; rm -rf `+canary+`\" $(rm -rf `+canary+`)"}`)
	if r.IsError || !strings.Contains(r.Content, "--- stdout ---\nhi; rm -rf "+canary+" $(rm -rf "+canary+")\n") {
		t.Errorf("echo of an injection: %+v", r)
	}
	if b, err := os.ReadFile(canary); err != nil || string(b) != "alive" {
		t.Fatalf("the canary is gone: %v", err)
	}
	// The gigabytes were not kept: the result holds the beginning and end.
	r, _ = runCall(t, op, "shell", `{"command":"yes"}`)
	if len(r.Content) > 40<<10 || !strings.Contains(r.Content, "--- stdout (") {
		t.Errorf("yes result is %d bytes: %.200q", len(r.Content), r.Content)
	}
	// A command that leaves a child behind holding its output: the whole
	// group goes, at once.
	start := time.Now()
	r, _ = runCall(t, op, "shell", `{"command":"sh -c 'sleep 30 & echo started'"}`)
	if r.IsError || !strings.Contains(r.Content, "started") || time.Since(start) > 3*time.Second {
		t.Errorf("a background child: %+v after %v", r, time.Since(start))
	}
	// stderr is cut to the grant's output bytes, beginning and end kept.
	r, _ = runCall(t, op, "shell", `{"command":"sh -c 'head -c 100000 /dev/zero | tr \\\\0 e >&2'"}`)
	if !strings.Contains(r.Content, "--- stderr (100000 bytes; the middle is cut: about 95904 bytes left out) ---\neeee") {
		t.Errorf("stderr cut: %.300q", r.Content)
	}
}

// The call's deadline bounds a command too: killed (its process group)
// before the deadline, with a result that says so.
func TestExecDeadline(t *testing.T) {
	op, _ := shellOp(t, Limits{Timeout: 800 * time.Millisecond}, ExecGrant{Cmd: "sleep *", Unconfined: true})
	start := time.Now()
	r, logs := runCall(t, op, "shell", `{"command":"sleep 60"}`)
	if !r.IsError || !strings.HasPrefix(r.Content, "killed at the call's deadline (after ") || time.Since(start) > 2*time.Second {
		t.Errorf("result %+v after %v", r, time.Since(start))
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "killed (deadline)") {
		t.Errorf("live lines %q", logs)
	}
}

func evalDir(t *testing.T, d string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(d)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Confined with Landlock, a command reaches its mount and the system's
// programs, and nothing else: no file outside, no TCP connection, no
// signal to the host. Unconfined (the grant says so), it has the user's
// rights over files and the network; in either case it runs in a process
// box, where the host's process does not exist.
func TestExecConfinement(t *testing.T) {
	needLandlock(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("SECRET"), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	self, _ := os.Executable()
	script := fmt.Sprintf(`echo in > inside.txt && cat inside.txt; cat %[1]s/secret.txt; echo x > %[1]s/written.txt; kill -0 %[2]d && echo signalled; true`, outside, os.Getpid())
	for _, unconfined := range []bool{false, true} {
		t.Run(fmt.Sprintf("unconfined=%v", unconfined), func(t *testing.T) {
			os.Remove(filepath.Join(outside, "written.txt"))
			op, dir := shellOp(t, Limits{Timeout: 10 * time.Second},
				ExecGrant{Cmd: "sh -c *", Unconfined: unconfined},
				ExecGrant{Cmd: self, Env: []string{"WAGENT_TEST_HELPER=connect " + ln.Addr().String()}, Read: []string{filepath.Dir(self)}, Unconfined: unconfined})
			b, _ := json.Marshal(map[string]string{"command": "sh -c '" + script + "'"})
			r, logs := runCall(t, op, "shell", string(b))
			out := r.Content
			if b, _ := os.ReadFile(filepath.Join(dir, "inside.txt")); string(b) != "in\n" || !strings.Contains(out, "in\n") {
				t.Errorf("the mount is not writable: %q", out)
			}
			_, werr := os.Stat(filepath.Join(outside, "written.txt"))
			dial, _ := runCall(t, op, "shell", `{"command":"`+self+`"}`)
			if unconfined {
				if !strings.Contains(out, "SECRET") || werr != nil || !strings.Contains(dial.Content, "connected") {
					t.Errorf("unconfined, the command lacks the user's rights:\n%s\n%s", out, dial.Content)
				}
				if strings.Contains(out, "signalled") {
					t.Errorf("unconfined, the command reached the host's process from its box:\n%s", out)
				}
				if !strings.Contains(logs[0], "confinement: none") {
					t.Errorf("live line %q", logs[0])
				}
				return
			}
			if strings.Contains(out, "SECRET") || werr == nil {
				t.Errorf("confined, the command read or wrote outside its mount:\n%s", out)
			}
			if !strings.Contains(out, "Permission denied") {
				t.Errorf("confined: no permission error in\n%s", out)
			}
			if strings.Contains(out, "signalled") {
				t.Errorf("confined, the command signalled the host:\n%s", out)
			}
			if !strings.Contains(dial.Content, "refused: ") || !strings.Contains(dial.Content, "permission denied") {
				t.Errorf("confined, the command connected: %s", dial.Content)
			}
			if !strings.Contains(logs[0], "confinement: landlock v") {
				t.Errorf("live line %q", logs[0])
			}
		})
	}
}

// The caps guest asks for exec directly: bad requests are error
// responses, and a response larger than the guest's buffer is read again
// with response, without running the command twice.
func TestExecRaw(t *testing.T) {
	dir := t.TempDir()
	op := newOp(t, capsModule(t), Config{Op: "caps-exec", Limits: Limits{MemoryPages: 256, Timeout: 10 * time.Second},
		Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}, Exec: []ExecGrant{{Cmd: "sh -c *", Unconfined: true}, {Cmd: "echo **", Unconfined: true}}}})
	var g hostabi.Granted
	hostabi.ParseGranted([]byte(command(t, op, "granted", "")), &g)
	if len(g.Mounts) != 1 || !g.Mounts[0].Write || len(g.Exec) != 2 || g.Exec[0].Cmd != "sh -c *" || g.Exec[0].Confinement != "none" || g.Exec[0].Enforcement != procbox.For(false).String() {
		t.Errorf("granted %+v", g)
	}
	for _, tc := range []struct{ req, code, want string }{
		{`{"argv":[]}`, hostabi.CapBadRequest, "exec: give argv (a command and its arguments) or shell (a command line), not both or neither"},
		{`{"argv":["echo"],"shell":"echo"}`, hostabi.CapBadRequest, "not both or neither"},
		{`{"shell":"echo hi"}`, hostabi.CapNotGranted, "exec: sh -c 'echo hi' matches no exec grant"},
		{`{"argv":["echo","a\u0000b"]}`, hostabi.CapBadRequest, "exec: an argument holds a NUL byte"},
		{`{"argv":["echo"],"dir":"/work/../etc"}`, hostabi.CapBadDir, "/etc is not inside a mount"},
		{`{"argv":["echo"],"dir":"/work/nope"}`, hostabi.CapBadDir, "/work/nope is not a directory inside mount /work"},
		{`{"argv":"echo"}`, hostabi.CapBadRequest, "want an array"},
	} {
		var resp hostabi.ExecResponse
		hostabi.ParseExecResponse([]byte(command(t, op, "exec", tc.req)), &resp)
		if resp.Code != tc.code || !strings.Contains(resp.Error, tc.want) || resp.ExitCode != -1 {
			t.Errorf("exec %s = %+v, want %s %q", tc.req, resp, tc.code, tc.want)
		}
	}
	// 200 KB of output is more than the kit's first buffer.
	os.WriteFile(filepath.Join(dir, "count"), nil, 0o644)
	var resp hostabi.ExecResponse
	hostabi.ParseExecResponse([]byte(command(t, op, "exec", `{"argv":["sh","-c","echo x >> count; head -c 200000 /dev/zero | tr \\\\0 a"]}`)), &resp)
	if resp.ExitCode != 0 || len(resp.Stdout) != 200000 {
		t.Errorf("big output: exit %d, %d bytes (%s)", resp.ExitCode, len(resp.Stdout), resp.Error)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "count")); string(b) != "x\n" {
		t.Errorf("the command ran %d times", strings.Count(string(b), "x"))
	}
	hostabi.ParseExecResponse([]byte(command(t, op, "exec", `{"argv":["sh","-c","cat"],"stdin":"from stdin"}`)), &resp)
	if resp.Stdout != "from stdin" {
		t.Errorf("stdin: %+v", resp)
	}
	hostabi.ParseExecResponse([]byte(command(t, op, "exec", `{"argv":["sh","-c","env | sort"]}`)), &resp)
	env := strings.Split(strings.TrimSpace(resp.Stdout), "\n")
	if len(env) != 6 || !strings.HasPrefix(env[0], "HOME=") || env[1] != "LANG=C.UTF-8" || !strings.HasPrefix(env[2], "PATH=/usr/local/sbin") || env[4] != "TERM=dumb" {
		t.Errorf("the command's environment is %q; want HOME, LANG, PATH, PWD, TERM and TMPDIR only", env)
	}
}

// Where the system gives no whole process box (pretended here), commands
// still run, the grant records partial and what is missing, and the op's
// watcher is told so once, at its first command, not at every one.
func TestExecPartialEnforcementToldOnce(t *testing.T) {
	defer procbox.Pretend("no PID namespace (pretended by the test)")()
	op, _ := shellOp(t, Limits{Timeout: 10 * time.Second}, ExecGrant{Cmd: "echo *", Unconfined: true})
	// (As root an unconfined command is partial for that reason too.)
	recorded := procbox.For(false).String()
	if e := op.Exec()[0].Enforcement; e != recorded || !strings.HasPrefix(e, "partial: no PID namespace (pretended by the test)") {
		t.Fatalf("the grant records %q", e)
	}
	want := "exec grant 'echo *' of op shell is not fully enforced on this system: " + strings.TrimPrefix(recorded, "partial: ")
	for i, n := range []int{1, 0} {
		r, logs := runCallAll(t, op, "shell", `{"command":"echo hi"}`)
		if !strings.Contains(r.Content, "hi") {
			t.Fatalf("call %d: %+v", i+1, r)
		}
		got := 0
		for _, l := range logs {
			if strings.Contains(l, want) {
				got++
			}
		}
		if got != n {
			t.Errorf("call %d: %d lines saying %q, want %d: %q", i+1, got, want, n, logs)
		}
	}
}
