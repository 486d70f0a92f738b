package mcp

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/npmtest"
)

// The real servers from npm, pinned (internal/npmtest): the reference
// "everything" server and the filesystem server, on stdio and HTTP.

func realServer(t *testing.T, name string, args ...string) *Server {
	t.Helper()
	h := NewHub()
	t.Cleanup(h.Close)
	return h.Server(Config{Name: name, Command: args, Timeout: 20 * time.Second, StartTimeout: 30 * time.Second})
}

func TestRealEverything(t *testing.T) {
	srv := realServer(t, "everything", npmtest.Bin(t, "mcp-server-everything"), "stdio")
	in, err := srv.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if in.Name != "mcp-servers/everything" || in.Protocol == "" {
		t.Errorf("info %+v", in)
	}
	op := NewOp(srv)
	if r := runCall(t, op, "everything__echo", `{"message":"hi there"}`); r.Content != "Echo: hi there" || r.IsError {
		t.Errorf("echo: %+v", r)
	}
	if r := runCall(t, op, "everything__get-tiny-image", `{}`); !strings.Contains(r.Content, "[image image/png, ") {
		t.Errorf("image: %+v", r)
	}
	if r := runCall(t, op, "everything__echo", `{}`); !r.IsError {
		t.Errorf("a call missing its required argument: %+v", r)
	}
	effs, _ := op.Handle(context.Background(), &hostabi.View{Hook: hostabi.HookContribute}, nil)
	found := false
	for _, e := range effs {
		if e.Tool.Name == "everything__echo" {
			found = e.Tool.Annotations.ReadOnly && !e.Tool.Annotations.Destructive && strings.Contains(string(e.Tool.Parameters), `"message"`)
		}
	}
	if !found {
		t.Errorf("everything__echo not offered read-only with its schema: %+v", effs)
	}
}

// The long-running tool past its timeout: an error result, the server
// told notifications/cancelled, and still serving.
func TestRealLongRunningTimeout(t *testing.T) {
	srv := realServer(t, "everything", npmtest.Bin(t, "mcp-server-everything"), "stdio")
	srv.cfg.Timeout = time.Second
	op := NewOp(srv)
	start := time.Now()
	r := runCall(t, op, "everything__trigger-long-running-operation", `{"duration":30,"steps":3}`)
	if r.Code != CodeTimeout || time.Since(start) > 10*time.Second {
		t.Errorf("long call: %+v after %s", r, time.Since(start))
	}
	if e := runCall(t, op, "everything__echo", `{"message":"alive"}`); e.Content != "Echo: alive" || srv.Restarts() != 0 {
		t.Errorf("after the timeout: %+v, restarts %d", e, srv.Restarts())
	}
}

func TestRealFilesystem(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("line one\nline two\n"), 0o644)
	srv := realServer(t, "files", npmtest.Bin(t, "mcp-server-filesystem"), dir)
	op := NewOp(srv)
	r := runCall(t, op, "files__read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "notes.txt")))
	if r.IsError || r.Content != "line one\nline two\n" {
		t.Errorf("read: %+v", r)
	}
	if r := runCall(t, op, "files__read_text_file", `{"path":"/etc/passwd"}`); !r.IsError || !strings.Contains(r.Content, "denied") {
		t.Errorf("a path outside the allowed folder: %+v", r)
	}
	effs, _ := op.Handle(context.Background(), &hostabi.View{Hook: hostabi.HookContribute}, nil)
	for _, e := range effs {
		if e.Tool.Name == "files__write_file" && !e.Tool.Annotations.Destructive {
			t.Errorf("write_file is not destructive: %+v", e.Tool.Annotations)
		}
	}
}

// The everything server over streamable HTTP, on a free port of the
// loopback (it listens on every interface, so the test picks the port).
func TestRealEverythingOverHTTP(t *testing.T) {
	bin := npmtest.Bin(t, "mcp-server-everything")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, "the HTTP server to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	h := NewHub()
	defer h.Close()
	srv := h.Server(Config{Name: "web", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Headers: map[string]string{"X-Test": "1"}, Timeout: 20 * time.Second})
	if r := runCall(t, NewOp(srv), "web__echo", `{"message":"over http"}`); r.Content != "Echo: over http" {
		t.Errorf("echo over HTTP: %+v", r)
	}
}
