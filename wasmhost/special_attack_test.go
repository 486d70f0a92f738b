//go:build unix

package wasmhost

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// Issue 27, item 4: a FIFO in the project (the shell op can mkfifo one)
// hung the host for good. The files op's read_file, or a grep over the
// FIFO's folder, opened it; the open waited for a writer (718 s observed),
// the call's deadline never fired, SIGTERM and SIGINT were ignored, and as
// read_file is idempotent a resume ran it again and hung again.

// hostileProject makes a project folder holding, beside two regular
// files, what a command run in it can leave there and a guest must never
// wait on or reach through: a FIFO, a unix socket that is listened on, and
// (where the test may make one) a character device node of /dev/null's
// kind. It returns the folder and the names of those made.
func hostileProject(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("needle one\nhay\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("hay\nneedle two\n"), 0o644)
	names := []string{"x.fifo", "sub/y.fifo", "x.sock"}
	for _, p := range []string{"x.fifo", "sub/y.fifo"} {
		if err := syscall.Mkfifo(filepath.Join(dir, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("unix", filepath.Join(dir, "x.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var st syscall.Stat_t
	if err := syscall.Stat("/dev/null", &st); err == nil {
		if err := syscall.Mknod(filepath.Join(dir, "x.null"), syscall.S_IFCHR|0o666, int(st.Rdev)); err == nil {
			names = append(names, "x.null")
		} else {
			t.Logf("no device node in the project: making one is not permitted here (needs root or CAP_MKNOD): %v", err)
		}
	}
	return dir, names
}

// The files op never waits on a FIFO, a socket or a device in its mount:
// read_file, write_file and edit_file answer at once with an error result
// that names what it is; grep over their folder answers with the regular
// files' matches; list_dir and glob mark them. Each answer comes well
// before the call's deadline (60 s here), so none is a timeout.
func TestFilesOpNeverWaitsOnAFIFO(t *testing.T) {
	dir, names := hostileProject(t)
	op := builtin(t, "files", Config{
		Limits: Limits{Timeout: time.Minute},
		Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}},
	})
	result := func(tool, args string) (hostabi.Effect, []string) {
		t.Helper()
		eff, err := callPromptly(t, context.Background(), op, dir, tool, args, 20*time.Second)
		if err != nil {
			t.Fatalf("%s %s: %v", tool, args, err)
		}
		var res []hostabi.Effect
		var logs []string
		for _, e := range eff {
			if e.Kind == hostabi.KindLog {
				logs = append(logs, e.Text)
			} else {
				res = append(res, e)
			}
		}
		if len(res) != 1 {
			t.Fatalf("%s %s: effects %+v", tool, args, eff)
		}
		return res[0], logs
	}
	// Through WASI a FIFO and a socket have one type, so the op names them
	// together; the host's line for watchers names each exactly.
	kinds := map[string]struct{ op, host string }{
		"x.fifo":     {"a named pipe (FIFO) or a socket", "a named pipe (FIFO)"},
		"sub/y.fifo": {"a named pipe (FIFO) or a socket", "a named pipe (FIFO)"},
		"x.sock":     {"a named pipe (FIFO) or a socket", "a socket"},
		"x.null":     {"a character device", "a character device"},
	}
	for _, name := range names {
		k := kinds[name]
		want := name + " is " + k.op + ", not a regular file: only regular files and directories are opened"
		for _, c := range []struct{ tool, args string }{
			{"read_file", `{"path":"` + name + `"}`},
			{"write_file", `{"path":"` + name + `","content":"x"}`},
			{"edit_file", `{"path":"` + name + `","old_string":"x","new_string":"y"}`},
			{"grep", `{"pattern":"needle","path":"` + name + `"}`},
		} {
			r, _ := result(c.tool, c.args)
			if !r.IsError || r.Content != want {
				t.Errorf("%s %s = %v %q, want the error result %q", c.tool, c.args, r.IsError, r.Content, want)
			}
		}
	}
	// grep opens each file the walk finds that looks regular (through WASI
	// a FIFO or a socket does; a device does not, and is passed over); the
	// host refuses them, and names each to watchers.
	r, logs := result("grep", `{"pattern":"needle"}`)
	if r.IsError || r.Content != "a.txt:1: needle one\nsub/b.txt:2: needle two\n" {
		t.Errorf("grep over the project = %v %q, want the matches of the regular files", r.IsError, r.Content)
	}
	for _, name := range names {
		if name == "x.null" {
			continue
		}
		want := "host: did not open /work/" + name + ": it is " + kinds[name].host + ", and only regular files and directories are opened"
		found := false
		for _, l := range logs {
			found = found || l == want
		}
		if !found {
			t.Errorf("grep's lines for watchers %q lack %q", logs, want)
		}
	}
	r, _ = result("list_dir", `{}`)
	if !strings.Contains(r.Content, "a.txt (15 B)\n") || !strings.Contains(r.Content, "x.fifo (a named pipe (FIFO) or a socket, not readable)\n") {
		t.Errorf("list_dir = %q, want the FIFO marked", r.Content)
	}
	r, _ = result("glob", `{"pattern":"**/*.fifo"}`)
	if want := "sub/y.fifo (a named pipe (FIFO) or a socket, not readable)\nx.fifo (a named pipe (FIFO) or a socket, not readable)\n"; r.Content != want {
		t.Errorf("glob **/*.fifo = %q, want %q", r.Content, want)
	}
	// Nothing was written through a FIFO or replaced: they are still there.
	for _, name := range names {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || fi.Mode().IsRegular() {
			t.Errorf("%s after the calls: %v %v", name, fi.Mode(), err)
		}
	}
}
