//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
)

// Issue 27, item 4, through the real binary: a FIFO in the project (the
// shell op can mkfifo one) hung `wagent run` in open(2) for good when the
// model read it or grepped its folder (718 s observed; the deadline never
// fired, SIGTERM and SIGINT were ignored, and a resume hung again, as
// read_file is idempotent). A scripted model reads the FIFO, then greps
// the project: the run finishes, and the log holds an error result naming
// the FIFO and the regular file's match.
func TestE2EReadFileOnAFIFOFinishes(t *testing.T) {
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "notes.txt"), []byte("the needle is here\n"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(project, "x.fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(project, "agent.yaml"), []byte("ops:\n  - use: builtin:files\n    grants: {mounts: [\"./:/work:rw\"]}\n"), 0o644)
	script := filepath.Join(t.TempDir(), "script.yaml")
	os.WriteFile(script, []byte(`replies:
  - content: "Let me read it."
    tool_calls: [{id: read1, name: read_file, arguments: {path: x.fifo}}]
  - content: "Then search."
    tool_calls: [{id: grep1, name: grep, arguments: {pattern: needle}}]
  - content: "x.fifo is a pipe; the needle is in notes.txt."
`), 0o644)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	const id = "e2e-fifo"
	r := exeIn(t, project, 2*time.Minute, env, "run", "--session", id, "--provider", "script", "--script", script, "--pipeline", "agent.yaml", "where is the needle?")
	if r.code != exitOK || !strings.Contains(r.stdout, "the needle is in notes.txt") {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	evs := logEvents(t, env, id)
	res := map[string]event.ToolResult{}
	for _, x := range dataOf[event.ToolResult](t, evs, event.EvToolResult) {
		res[x.CallID] = x
	}
	if x := res["1.1.1"]; !x.IsError || x.Op != "files" || x.Content != "x.fifo is a named pipe (FIFO) or a socket, not a regular file: only regular files and directories are opened" {
		t.Errorf("read_file x.fifo result %+v, want the error result naming the FIFO", x)
	}
	if x := res["1.2.1"]; x.IsError || x.Content != "notes.txt:1: the needle is here\n" {
		t.Errorf("grep result %+v, want the regular file's match", x)
	}
}
