package jetstream_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/store/jetstream"
)

// Servers for the tests: embedded nats-server instances on loopback, on
// ports the kernel picks, with their files in the test's temporary folder.
// Nothing here reaches a server the test did not start, and a server that
// does not start fails the test.

// testMaxPayload is the max_payload of test servers: above
// jetstream.RequiredMaxPayload, as a deployment must be.
const testMaxPayload = 8 << 20

// serverOpts returns the options of a test server named name.
func serverOpts(t testing.TB, name string) *server.Options {
	return &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		MaxPayload: testMaxPayload,
		NoLog:      os.Getenv("NATSLOG") == "",
		NoSigs:     true,
	}
}

// runServer starts a server with opts and stops it when t ends.
func runServer(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server %s: %v", opts.ServerName, err)
	}
	if !opts.NoLog {
		ns.ConfigureLogger()
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		t.Fatalf("nats-server %s did not start within 10s", opts.ServerName)
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

// startServer starts one server; mod, if given, adjusts its options first.
func startServer(t testing.TB, mod ...func(*server.Options)) *server.Server {
	t.Helper()
	opts := serverOpts(t, "wagent-test")
	for _, m := range mod {
		m(opts)
	}
	ns := runServer(t, opts)
	var auth []nats.Option
	if opts.Authorization != "" {
		auth = append(auth, nats.Token(opts.Authorization))
	}
	anchor(t, ns, 1, auth...)
	return ns
}

// anchor creates a stream that lives as long as the server, so that the
// account always has one. nats-server 2.15.2 removes an account's streams
// folder in the background when its last stream is deleted (stream.go,
// "no op if not empty"); a stream created at that moment fails with "error
// creating store for stream". Tests delete their streams one after the
// other and would hit that now and then; wagent itself never deletes one.
func anchor(t testing.TB, ns *server.Server, replicas int, auth ...nats.Option) {
	t.Helper()
	nc := connect(t, ns, auth...)
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "ANCHOR", Subjects: []string{"wagent-test.anchor"}, Replicas: replicas}); err != nil {
		t.Fatalf("create the anchor stream: %v", err)
	}
}

// startCluster starts a cluster of n servers, each routed to all, and waits
// until JetStream has a meta leader that counts all of them.
//
// A JetStream cluster refuses to start without configured routes, so the
// route ports are picked before the servers start: listen on port 0, note
// the port, close. Client ports stay with the servers (Port: -1).
func startCluster(t testing.TB, n int, mod ...func(*server.Options)) []*server.Server {
	t.Helper()
	routes := make([]*url.URL, n)
	for i := range routes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("pick a route port: %v", err)
		}
		routes[i] = &url.URL{Scheme: "nats", Host: ln.Addr().String()}
		ln.Close()
	}
	var servers []*server.Server
	for i := range n {
		opts := serverOpts(t, fmt.Sprintf("n%d", i+1))
		opts.Cluster = server.ClusterOpts{Name: "wagent-test", Host: "127.0.0.1"}
		opts.Cluster.Port, _ = strconv.Atoi(routes[i].Port())
		opts.Routes = routes
		for _, m := range mod {
			m(opts)
		}
		servers = append(servers, runServer(t, opts))
	}
	nc := connect(t, servers[0])
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = js.AccountInfo(ctx)
		cancel()
		if err == nil && metaPeers(servers) == n {
			anchor(t, servers[0], n)
			return servers
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %d-server cluster did not form within 20s (last error: %v)", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metaPeers is how many servers the JetStream meta leader counts.
func metaPeers(servers []*server.Server) int {
	for _, ns := range servers {
		if ns.JetStreamIsLeader() {
			if raft := ns.JetStreamClusterPeers(); raft != nil {
				return len(raft)
			}
		}
	}
	return 0
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
