//go:build unix

package wasmhost

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost/internal/rootfs"
)

// Issue 27, item 4: a host call a guest made through a mount (the open of a
// FIFO) blocked for good, and nothing ended the call: the deadline stops a
// guest at its next check, never inside a host call, and a signal only
// cancels the context the call ignored.

// releaseFIFOs opens both ends of every FIFO in dir without waiting, so an
// open stuck on one (the defect) can go on and the test can end.
func releaseFIFOs(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeNamedPipe != 0 {
			for _, fl := range []int{os.O_RDONLY, os.O_WRONLY} {
				if f, err := os.OpenFile(p, fl|syscall.O_NONBLOCK, 0); err == nil {
					defer f.Close()
				}
			}
		}
		return nil
	})
}

// callPromptly runs one started call of the op's tool under ctx and
// returns its effects; if it has not answered after limit (a watchdog, not
// a synchronisation), it releases the project's FIFOs and fails the test.
func callPromptly(t *testing.T, ctx context.Context, o *Op, dir, tool, args string, limit time.Duration) ([]hostabi.Effect, error) {
	t.Helper()
	v := &hostabi.View{Hook: hostabi.HookTool, Session: "s1", Op: o.Manifest().Name, Turn: 1, Step: 1, Tool: &hostabi.ToolView{
		Run:   "c1",
		Calls: []hostabi.PendingCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(args), Owner: o.Manifest().Name, Decision: "allow", Started: true}},
	}}
	type answer struct {
		eff []hostabi.Effect
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		eff, err := o.Handle(ctx, v, nil)
		ch <- answer{eff, err}
	}()
	select {
	case a := <-ch:
		return a.eff, a.err
	case <-time.After(limit):
		releaseFIFOs(dir)
		t.Fatalf("%s %s has not answered after %v", tool, args, limit)
		return nil, nil
	}
}

// A host call a guest makes through a mount obeys the call's deadline and
// its cancellation: an open that blocks (the hook stands for a hung file
// system; a FIFO can no longer block one) is left behind when the deadline
// passes, and the call ends as a timeout at once; when the caller cancels
// (SIGTERM, SIGINT), as cancelled. The op's next call gets a fresh
// instance and works.
func TestMountHostCallsObeyDeadlineAndCancel(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "stuck.txt"), []byte("never read\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("fine\n"), 0o644)
	entered := make(chan struct{}, 8)
	release := make(chan struct{})
	rootfs.SetOpenHook(func(name string) {
		if name == "stuck.txt" {
			entered <- struct{}{}
			<-release
		}
	})
	defer rootfs.SetOpenHook(nil)
	defer close(release)
	op := builtin(t, "files", Config{
		Limits: Limits{Timeout: 300 * time.Millisecond},
		Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}},
	})

	// The deadline: nothing but the deadline ends this call.
	start := time.Now()
	_, err := callPromptly(t, context.Background(), op, dir, "read_file", `{"path":"stuck.txt"}`, 20*time.Second)
	var f *hostabi.Fault
	if !errors.As(err, &f) || f.Kind != hostabi.FaultTimeout {
		t.Errorf("read_file of a file whose open blocks: %v, want a timeout fault", err)
	}
	t.Logf("timed out after %v (deadline 300ms)", time.Since(start))
	<-entered

	// Cancellation, as a signal does it: once the open is stuck.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	op2 := builtin(t, "files", Config{
		Limits: Limits{Timeout: time.Minute},
		Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}},
	})
	if _, err := callPromptly(t, ctx, op2, dir, "read_file", `{"path":"stuck.txt"}`, 20*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("read_file cancelled while its open blocks: %v, want context.Canceled", err)
	}

	// Both ops go on, on fresh instances.
	for _, o := range []*Op{op, op2} {
		eff, err := callPromptly(t, context.Background(), o, dir, "read_file", `{"path":"ok.txt"}`, 20*time.Second)
		if err != nil || len(eff) != 1 || eff[0].IsError || eff[0].Content != "     1\tfine\n" {
			t.Errorf("read_file ok.txt after a stopped call: %+v %v", eff, err)
		}
	}
}
