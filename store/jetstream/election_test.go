package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/internal/natstest"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jetstream"
)

// TestReadsRideOutLeaderLoss shuts down the server that leads a
// three-replica log stream and reads at once: Head and Read must wait for
// the new leader (elected seconds later, longer than one request's
// Timeout) and answer, not fail with a request's timeout. With a second
// server gone the stream has no quorum, and a read gives up after
// ElectionWait, or sooner when its context ends.
func TestReadsRideOutLeaderLoss(t *testing.T) {
	servers := startCluster(t, 3)
	const key = "election"
	stream, _ := names(key)
	leader := func() int {
		for i, ns := range servers {
			if ns != nil && ns.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				return i
			}
		}
		return -1
	}

	// Open through one server, find the leader, then talk through a
	// server that is not it, so the connection outlives the kill.
	opts := jetstream.Options{Replicas: 3, Timeout: 500 * time.Millisecond, ElectionWait: 20 * time.Second}
	openLog(t, connect(t, servers[0]), key, opts).Close()
	var lead int
	for deadline := time.Now().Add(10 * time.Second); ; {
		if lead = leader(); lead >= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s has no leader", stream)
		}
		time.Sleep(10 * time.Millisecond) // no event marks an election's end: the servers' state is polled
	}
	// lw, on each of the other two servers, gives up sooner: for the end.
	var l *jetstream.Log
	lw := map[int]*jetstream.Log{}
	for _, i := range []int{(lead + 1) % 3, (lead + 2) % 3} {
		nc := connect(t, servers[i])
		if l == nil {
			l = openLog(t, nc, key, opts)
			t.Cleanup(func() { _ = l.Close() })
		}
		lw[i] = openLog(t, nc, key, jetstream.Options{Replicas: 3, Timeout: 300 * time.Millisecond, ElectionWait: time.Second})
		t.Cleanup(func() { _ = lw[i].Close() })
	}
	ctx := context.Background()
	if err := l.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	head, err := l.Append(ctx, "s", 0, evs("msg", 1, 5)...)
	if err != nil {
		t.Fatal(err)
	}

	natstest.Stop(servers[lead])
	servers[lead] = nil
	var wg sync.WaitGroup
	var gotHead uint64
	var got []store.Event
	var headErr, readErr error
	wg.Add(2)
	go func() { defer wg.Done(); gotHead, headErr = l.Head(ctx, "s") }()
	go func() { defer wg.Done(); got, readErr = l.Read(ctx, "s", 1, 0) }()
	wg.Wait()
	if headErr != nil || gotHead != head {
		t.Fatalf("Head after the leader's loss: %d, %v; want %d", gotHead, headErr, head)
	}
	if readErr != nil || len(got) != int(head) {
		t.Fatalf("Read after the leader's loss: %d events, %v; want %d", len(got), readErr, head)
	}
	if leader() < 0 {
		t.Fatal("the reads answered, but no server says it leads the stream")
	}
	if _, err := l.Append(ctx, "s", head, evs("msg", 6, 1)...); err != nil {
		t.Fatalf("Append after the election: %v", err)
	}

	// No quorum: with the new leader gone too, nobody will lead (a leader
	// that is left alone would go on answering reads for a while). A read
	// through the survivor stops at its context's end...
	second := leader()
	if second < 0 {
		t.Fatal("no server leads the stream after the election")
	}
	natstest.Stop(servers[second])
	servers[second] = nil
	survivor := lw[(lead+1)%3]
	if servers[(lead+1)%3] == nil {
		survivor = lw[(lead+2)%3]
	}
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := survivor.Head(short, "s"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Head without a quorum, under a 1.5s context: %v; want the context's deadline", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Head without a quorum took %v under a 1.5s context", d)
	}
	// ... or after ElectionWait.
	start = time.Now()
	_, err = survivor.Head(ctx, "s")
	if err == nil || !strings.Contains(err.Error(), "ElectionWait") {
		t.Fatalf("Head without a quorum: %v; want it to give up after ElectionWait", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Head without a quorum took %v with a 1s ElectionWait", d)
	}
}

// TestPublishWaitsForListener deletes the log's stream, so that a Create's
// publish reaches nobody, and creates the stream again only once the
// server has seen the publish sent more often than the client library
// sends one by itself (three times): the Create must go on sending until
// the stream hears it, since a message nobody heard cannot have been
// stored.
func TestPublishWaitsForListener(t *testing.T) {
	ns := startServer(t)
	nc := connect(t, ns)
	l := openLog(t, nc, "unheard", jetstream.Options{Timeout: 10 * time.Second})
	t.Cleanup(func() { _ = l.Close() })
	stream, _ := names("unheard")
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if err := js.DeleteStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	inMsgs := func() int64 {
		v, err := ns.Varz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.InMsgs
	}
	before := inMsgs()
	done := make(chan error, 1)
	go func() { done <- l.Create(ctx, "s") }()
	for inMsgs() < before+4 {
		select {
		case err := <-done:
			t.Fatalf("Create on a stream nobody hears: %v; want it to wait", err)
		default:
			time.Sleep(5 * time.Millisecond) // polling the server's counter
		}
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Create once the stream is back: %v", err)
	}
	if head, err := l.Head(ctx, "s"); err != nil || head != 0 {
		t.Fatalf("Head: %d, %v; want 0", head, err)
	}
}
