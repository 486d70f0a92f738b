package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/natstest"
)

// TestNATSFollowStopsOnSignal: a run following a NATS session that no
// worker drives ends at once on SIGTERM or SIGINT, with the exit code of
// an interrupted run, and leaves the session as it is (a follower never
// cancels by leaving): the prompt stays queued for a worker.
func TestNATSFollowStopsOnSignal(t *testing.T) {
	ns := natstest.Start(t)
	url := ns.ClientURL()
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		p := startBG(t, env, "run", "--store", url, "--script", testdata("plain-replies.yaml"), "please add 2 and 3")
		waitUntil(t, 60*time.Second, "the run to follow its session", func() bool {
			return strings.Contains(p.errb.String(), "following it")
		})
		start := time.Now()
		p.cmd.Process.Signal(sig)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("run did not exit 10s after %v\nstderr: %s", sig, p.errb.String())
		}
		t.Logf("%v: exited in %v", sig, time.Since(start))
		if code := p.cmd.ProcessState.ExitCode(); code != exitFailure {
			t.Errorf("%v: exit %d, want %d\n%s", sig, code, exitFailure, p.errb.String())
		}
		stderr := p.errb.String()
		id := sessionOf(t, stderr)
		if !strings.Contains(stderr, "which the workers go on with as it is (wagent log -f "+id+" --store "+url) {
			t.Errorf("%v: stderr does not say the session is left as it is:\n%s", sig, stderr)
		}
		for _, e := range natsEvents(t, home, url, id) {
			if e.Type == event.EvTurnEnd || strings.Contains(e.Type, "cancel") {
				t.Errorf("%v: the follower changed the session: %s", sig, e.Type)
			}
		}
	}
	// The server gone mid-follow: SIGTERM still ends the run at once.
	p := startBG(t, env, "run", "--store", url, "--script", testdata("plain-replies.yaml"), "please add 2 and 3")
	waitUntil(t, 60*time.Second, "the run to follow its session", func() bool {
		return strings.Contains(p.errb.String(), "following it")
	})
	natstest.Stop(ns)
	p.cmd.Process.Signal(syscall.SIGTERM)
	// At once: not after a request to the gone server times out.
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		t.Fatalf("run did not exit 3s after SIGTERM with the server gone\nstderr: %s", p.errb.String())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != exitFailure {
		t.Errorf("server gone: exit %d, want %d\n%s", code, exitFailure, p.errb.String())
	}
}

// TestNATSFollowNoWorker: a run following a session no worker claims says
// so after the wait --worker-wait sets and exits non-zero, leaving the
// session queued.
func TestNATSFollowNoWorker(t *testing.T) {
	ns := natstest.Start(t)
	url := ns.ClientURL()
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	p := startBG(t, env, "run", "--store", url, "--worker-wait", "2s", "--script", testdata("plain-replies.yaml"), "please add 2 and 3")
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("run did not give up waiting for a worker\nstderr: %s", p.errb.String())
	}
	stderr := p.errb.String()
	id := sessionOf(t, stderr)
	want := "no worker has claimed session " + id + " after 2s; is a worker running? (wagent worker --store " + url + ")"
	if code := p.cmd.ProcessState.ExitCode(); code != exitFailure || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr:\n%s\nwant %q", code, stderr, want)
	}
	for _, e := range natsEvents(t, home, url, id) {
		if e.Type == event.EvTurnEnd || strings.Contains(e.Type, "cancel") {
			t.Errorf("the follower changed the session: %s", e.Type)
		}
	}
}

// sessionOf is the session id in "workers run session ID; following it".
func sessionOf(t *testing.T, stderr string) string {
	t.Helper()
	_, rest, ok := strings.Cut(stderr, "workers run session ")
	if !ok {
		t.Fatalf("no session id in %q", stderr)
	}
	id, _, _ := strings.Cut(rest, ";")
	return id
}
