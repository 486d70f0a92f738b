package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/internal/natstest"
)

// TestHintStripsCredentials: a follow-up command names the store it was
// given, never its user, password or token.
func TestHintStripsCredentials(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "wagent log -f X"},
		{"/tmp/s", "wagent log -f X --store /tmp/s"},
		{"/tmp/a b", "wagent log -f X --store '/tmp/a b'"},
		{"nats://h:4222", "wagent log -f X --store nats://h:4222"},
		{"nats://u:pw@h:4222,nats://tok@h2:4222?stream=S", "wagent log -f X --store 'nats://h:4222,nats://h2:4222?stream=S' (with the store's credentials again)"},
		{"nats://h:4222?token=sekrit&stream=S", "wagent log -f X --store 'nats://h:4222?stream=S' (with the store's credentials again)"},
	}
	for _, c := range cases {
		env := &term.Env{Hints: &term.Hints{}}
		env.Hints.SetStore(c.in)
		if got := env.Hint("log", "-f", "X"); got != c.want {
			t.Errorf("store %q: hint %q, want %q", c.in, got, c.want)
		}
	}
}

// TestHintsCarryTheStore: a run given --store DIR (not the default) prints
// follow-ups that name it: the approvals it waits for, the resume after a
// detach.
func TestHintsCarryTheStore(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "elsewhere")
	r := wag(t, home, "run", "--store", dir, "--session", "h1", "--script", testdata("approval-replies.yaml"), "--pipeline", testdata("approval.yaml"), "add 40")
	if r.code != exitWaiting {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"wagent approve h1 ", "wagent deny h1 ", "then: wagent resume h1 --store " + dir} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("waiting hints lack %q:\n%s", want, r.stderr)
		}
	}
	if strings.Count(r.stderr, "--store "+dir) != 3 {
		t.Errorf("want --store %s in each of the 3 hints:\n%s", dir, r.stderr)
	}
	r = wag(t, home, "approve", "--store", dir, "h1", "--all")
	if r.code != exitOK || !strings.Contains(r.stdout, "continue with: wagent resume h1 --store "+dir) {
		t.Errorf("approve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = wag(t, home, "rm", "--store", dir, "h1", "--yes")
	if r.code != exitFailure || !strings.Contains(r.stderr, "(wagent cancel h1 --store "+dir+")") {
		t.Errorf("rm of a waiting session: exit %d\n%s", r.code, r.stderr)
	}
	r = wag(t, home, "fork", "--store", dir, "h1", "--at", "1", "--as", "h1b")
	if r.code != exitOK || !strings.Contains(r.stdout, `continue it with: wagent run --session h1b "…" --store `+dir) {
		t.Errorf("fork: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = wag(t, home, "run", "--store", dir, "--detach", "--session", "h2", "--script", testdata("plain-replies.yaml"), "hi")
	if r.code != exitOK || !strings.Contains(r.stderr, "wagent resume h2 --store "+dir+" runs it") {
		t.Errorf("run --detach: exit %d\n%s", r.code, r.stderr)
	}
}

// TestHintsCarryTheNATSStore: run --detach on a NATS store says how to
// follow the session on that store, without the URL's credentials.
func TestHintsCarryTheNATSStore(t *testing.T) {
	opts := natstest.Options(t, "hints")
	opts.Username, opts.Password = "ops", "s3cret"
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { natstest.Stop(ns) })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	url := ns.ClientURL()
	withCreds := strings.Replace(url, "nats://", "nats://ops:s3cret@", 1)
	home := t.TempDir()
	r := wag(t, home, "run", "--store", withCreds, "--detach", "--script", testdata("plain-replies.yaml"), "hi")
	if r.code != exitOK {
		t.Fatalf("run --detach: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	want := "follow it with: wagent log -f " + id + " --store " + url + " (with the store's credentials again)"
	if !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("run --detach printed\n%s\nwant %q and no password", r.stderr, want)
	}
}
