package badger_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

// The test binary doubles as the child process of the crash tests: with
// childEnv set, TestMain runs the child's job instead of the tests.
const (
	childEnv     = "WAGENT_STORE_CRASH_CHILD" // "append" or "hold"
	childDirEnv  = "WAGENT_STORE_CRASH_DIR"
	childSyncEnv = "WAGENT_STORE_CRASH_SYNC" // "1": SyncWrites
)

const crashSession = "crash"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "append":
		os.Exit(crashChildAppend(os.Getenv(childDirEnv), os.Getenv(childSyncEnv) == "1"))
	case "hold":
		os.Exit(crashChildHold(os.Getenv(childDirEnv)))
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, os.Getenv(childEnv))
		os.Exit(2)
	}
}

// crashChildAppend appends to crashSession until it is killed, writing
// "acked <head>" to stdout after each Append returns.
func crashChildAppend(dir string, synced bool) int {
	ctx := context.Background()
	l, err := badger.Open(dir, badger.Options{SyncWrites: synced})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := l.Create(ctx, crashSession); err != nil && !errors.Is(err, store.ErrExists) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	head, err := l.Head(ctx, crashSession)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stdout, "ready %d\n", head)
	for {
		h, err := l.Append(ctx, crashSession, head, crashAppend(head+1)...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		head = h
		fmt.Fprintf(os.Stdout, "acked %d\n", head) // unbuffered: one write per ack
	}
}

// crashChildHold opens the store and holds it until stdin closes.
func crashChildHold(dir string) int {
	l, err := badger.Open(dir, badger.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stdout, "ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	l.Close()
	return 0
}

// mix is a fixed hash, so the parent can recompute what the child wrote.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}

// crashAppend is the append a child makes when the head is first-1: 1 to 8
// events whose content follows from their seq. Turn holds the append's first
// seq and Step the event's place in it, so the parent can tell where each
// append starts and whether one is cut short. Every 11th event is larger
// than the backend's value threshold, to exercise the value log too.
func crashAppend(first uint64) []store.Event {
	n := 1 + int(mix(first)%8)
	out := make([]store.Event, n)
	for i := range out {
		seq := first + uint64(i)
		pad := int(mix(seq^0x5bd1e995) % 700)
		if seq%11 == 0 {
			pad = 6000
		}
		out[i] = store.Event{
			Seq:  seq,
			Type: "crash/event",
			Turn: int(first),
			Step: i + 1,
			Time: time.Unix(1_700_000_000, int64(seq)).UTC(),
			Data: json.RawMessage(fmt.Sprintf(`{"seq":%d,"of":%d,"pad":%q}`, seq, n, strings.Repeat("p", pad))),
		}
	}
	return out
}

var rawJSON = cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })

// verifyCrashLog checks that the session's events from seq from (an append
// boundary) to the head are whole appends with the content the child meant.
func verifyCrashLog(t *testing.T, l store.Log, from, head uint64) {
	t.Helper()
	got, err := l.Read(t.Context(), crashSession, from, 0)
	if err != nil {
		t.Fatalf("Read from %d: %v", from, err)
	}
	if want := head - from + 1; uint64(len(got)) != want {
		t.Fatalf("Read from %d returned %d events, want %d (head %d)", from, len(got), want, head)
	}
	for seq := from; seq <= head; {
		want := crashAppend(seq)
		end := seq + uint64(len(want)) - 1
		if end > head {
			t.Fatalf("the append at seq %d has %d events but the log ends at %d: half an append is stored", seq, len(want), head)
		}
		if diff := cmp.Diff(want, got[seq-from:end-from+1], rawJSON); diff != "" {
			t.Fatalf("the append at seq %d: mismatch (-want +got):\n%s", seq, diff)
		}
		seq = end + 1
	}
}

// child is a running child process of the crash tests.
type child struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	lines  chan string // stdout, closed at EOF
}

func startChild(t *testing.T, mode, dir string, synced bool) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{lines: make(chan string, 1<<16)}
	c.cmd = exec.Command(exe, "-test.run=^$")
	syncEnv := "0"
	if synced {
		syncEnv = "1"
	}
	c.cmd.Env = append(os.Environ(), childEnv+"="+mode, childDirEnv+"="+dir, childSyncEnv+"="+syncEnv)
	c.cmd.Stderr = &c.stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if mode == "hold" {
		if _, err := c.cmd.StdinPipe(); err != nil { // held open until the child is killed
			t.Fatal(err)
		}
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

// waitLine waits for the child's next stdout line; ok is false at EOF.
func (c *child) waitLine(t *testing.T) (string, bool) {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		return line, ok
	case <-time.After(20 * time.Second):
		c.kill(t)
		t.Fatalf("child wrote nothing for 20s; stderr:\n%s", c.stderr.String())
		return "", false
	}
}

// kill sends SIGKILL, reaps the child and checks that the kill ended it.
func (c *child) kill(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Kill()
	err := c.cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v; stderr:\n%s", err, c.stderr.String())
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended by itself (%v) before the kill; stderr:\n%s", err, c.stderr.String())
	}
}

// lastAck drains the child's stdout (it is dead) and returns the highest
// head it acknowledged, or 0.
func (c *child) lastAck(t *testing.T) uint64 {
	t.Helper()
	var acked uint64
	for line := range c.lines {
		rest, ok := strings.CutPrefix(line, "acked ")
		if !ok {
			continue
		}
		h, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			t.Fatalf("child wrote %q", line)
		}
		acked = max(acked, h)
	}
	return acked
}

func TestCrashSafety(t *testing.T) {
	// A child appends in a loop and is SIGKILLed at random moments. After
	// each kill the store must reopen holding a gap-free prefix of what the
	// child attempted, made of whole appends, including every append the
	// child acknowledged. The next child goes on from there in the same
	// directory. Most children write without SyncWrites: an unsynced append
	// must survive the process being killed (not a power cut). Before each
	// writer reopens the store, a reader opens it as the kill left it.
	kills := 36
	if testing.Short() {
		kills = 8
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	dir := t.TempDir()
	var head uint64 // verified up to here
	totalAcked := 0
	for round := range kills {
		synced := round%4 == 3
		c := startChild(t, "append", dir, synced)
		if round%6 == 5 {
			// Kill early, perhaps while the child opens and replays the log.
			time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		} else {
			if line, ok := c.waitLine(t); !ok || !strings.HasPrefix(line, "ready ") {
				c.kill(t)
				t.Fatalf("round %d: child said %q; stderr:\n%s", round, line, c.stderr.String())
			}
			time.Sleep(time.Duration(rng.IntN(25)) * time.Millisecond)
		}
		c.kill(t)
		acked := c.lastAck(t)
		if acked > 0 {
			totalAcked++
		}

		// A reader first: what the kill left is a crash tail, not damage,
		// it reads every acknowledged append, and it changes nothing.
		var before map[string]string
		if round%4 == 0 {
			before = fileHashes(t, dir)
		}
		r, err := badger.Open(dir, badger.Options{ReadOnly: true, Logger: quietLogger})
		if err != nil {
			t.Fatalf("round %d: read-only open after the kill: %v", round, err)
		}
		if got, err := r.Head(t.Context(), crashSession); err == nil && got < acked {
			t.Fatalf("round %d: a reader sees head %d after the kill, but the child acknowledged %d", round, got, acked)
		} else if err == nil {
			verifyCrashLog(t, r, head+1, got)
		} else if !errors.Is(err, store.ErrNotFound) || acked > 0 {
			t.Fatalf("round %d: reader Head: %v", round, err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("round %d: reader Close: %v", round, err)
		}
		if before != nil {
			if diff := cmp.Diff(before, fileHashes(t, dir)); diff != "" {
				t.Fatalf("round %d: the reader changed the store (-before +after):\n%s", round, diff)
			}
		}

		l, err := badger.Open(dir, badger.Options{Logger: quietLogger})
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v", round, err)
		}
		got, err := l.Head(t.Context(), crashSession)
		switch {
		case errors.Is(err, store.ErrNotFound) && head == 0 && acked == 0:
			// killed before it created the session
		case err != nil:
			t.Fatalf("round %d: Head: %v", round, err)
		case got < acked:
			t.Fatalf("round %d: head %d after the kill, but the child acknowledged %d: an acknowledged append was lost", round, got, acked)
		case got < head:
			t.Fatalf("round %d: head %d after the kill, but %d was already there after the previous round", round, got, head)
		default:
			verifyCrashLog(t, l, head+1, got)
			head = got
		}
		if err := l.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
	}
	if totalAcked < kills/2 {
		t.Errorf("only %d of %d children acknowledged an append before the kill: the test barely ran", totalAcked, kills)
	}
	l, err := badger.Open(dir, badger.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	verifyCrashLog(t, l, 1, head)
	t.Logf("%d kills, %d children acknowledged appends, %d events in the log", kills, totalAcked, head)
}

func TestLockedByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	c := startChild(t, "hold", dir, false)
	if line, ok := c.waitLine(t); !ok || line != "ready" {
		c.kill(t)
		t.Fatalf("child said %q; stderr:\n%s", line, c.stderr.String())
	}
	start := time.Now()
	l, err := badger.Open(dir, badger.Options{Logger: quietLogger})
	took := time.Since(start)
	if err == nil {
		l.Close()
		c.kill(t)
		t.Fatal("Open of a directory another process holds succeeded")
	}
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Errorf("got %v, want an error wrapping ErrLocked that names %s", err, dir)
	}
	if want := "process " + strconv.Itoa(c.cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the holder (%s)", err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is several lines: %q", err)
	}
	if took > time.Second {
		t.Errorf("Open took %v to fail, want it at once", took)
	}
	t.Logf("error: %v", err)

	// The kernel drops the lock of a dead process.
	c.kill(t)
	l, err = badger.Open(dir, badger.Options{Logger: quietLogger})
	if err != nil {
		t.Fatalf("Open after the holder died: %v", err)
	}
	l.Close()
}
