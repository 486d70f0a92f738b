package jetstream_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/internal/natstest"
	"github.com/wagent/wagent/store/jetstream"
)

// Servers for the tests come from internal/natstest: embedded nats-server
// instances on loopback, on ports the kernel picks, with their files in the
// test's temporary folder, each given a stream that outlives the tests'
// own (see natstest's anchor). Nothing here reaches a server the test did
// not start, and a server that does not start fails the test.

// startServer starts one server; mod, if given, adjusts its options first.
func startServer(t testing.TB, mod ...func(*server.Options)) *server.Server {
	t.Helper()
	return natstest.Start(t, mod...)
}

// startCluster starts a cluster of n servers, each routed to all, once
// JetStream has a meta leader that counts all of them.
func startCluster(t testing.TB, n int, mod ...func(*server.Options)) []*server.Server {
	t.Helper()
	return natstest.StartCluster(t, n, mod...).Servers
}

// connect returns a client connection to ns, closed when t ends.
func connect(t testing.TB, ns *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL(), append([]nats.Option{nats.MaxReconnects(-1)}, opts...)...)
	if err != nil {
		t.Fatalf("connect to %s: %v", ns.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// names returns a stream name and subject prefix unique to key, so that
// every subtest gets its own stream and reopening the same key finds it.
func names(key string) (stream, subject string) {
	h := fnv.New64a()
	h.Write([]byte(key))
	id := fmt.Sprintf("%016x", h.Sum64())
	return "T" + id, "t" + id + ".log"
}

// openLog opens a Log on nc with opts and the stream of key, and deletes
// that stream when t ends.
func openLog(t testing.TB, nc *nats.Conn, key string, opts jetstream.Options) *jetstream.Log {
	t.Helper()
	opts.Stream, opts.Subject = names(key)
	l, err := jetstream.Open(context.Background(), nc, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		js, err := natsjs.New(nc)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, opts.Stream) // once per stream; a second time finds none
	})
	return l
}
