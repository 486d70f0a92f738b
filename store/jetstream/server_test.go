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
	ns, err := tryServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

// tryServer starts a server with opts; the caller stops it.
func tryServer(opts *server.Options) (*server.Server, error) {
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats-server %s: %v", opts.ServerName, err)
	}
	if !opts.NoLog {
		ns.ConfigureLogger()
	}
	go ns.Start()
	// Generous: the tests share two cores with whatever else runs.
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("nats-server %s did not start within 30s (a port taken?)", opts.ServerName)
	}
	return ns, nil
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
	var err error
	// Another process may take a route port between the pick and the
	// server's bind: try again with new ports.
	for range 3 {
		var servers []*server.Server
		if servers, err = tryCluster(t, n, mod...); err == nil {
			for _, ns := range servers {
				t.Cleanup(func() {
					ns.Shutdown()
					ns.WaitForShutdown()
				})
			}
			anchor(t, servers[0], n)
			return servers
		}
	}
	t.Fatal(err)
	return nil
}

// tryCluster starts n servers routed to each other and waits for their
// JetStream meta group; on failure it stops what it started.
func tryCluster(t testing.TB, n int, mod ...func(*server.Options)) (servers []*server.Server, err error) {
	defer func() {
		if err != nil {
			for _, ns := range servers {
				ns.Shutdown()
				ns.WaitForShutdown()
			}
		}
	}()
	routes := make([]*url.URL, n)
	for i := range routes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a route port: %v", err)
		}
		routes[i] = &url.URL{Scheme: "nats", Host: ln.Addr().String()}
		ln.Close()
	}
	for i := range n {
		opts := serverOpts(t, fmt.Sprintf("n%d", i+1))
		opts.Cluster = server.ClusterOpts{Name: "wagent-test", Host: "127.0.0.1"}
		opts.Cluster.Port, _ = strconv.Atoi(routes[i].Port())
		opts.Routes = routes
		for _, m := range mod {
			m(opts)
		}
		ns, err := tryServer(opts)
		if err != nil {
			return servers, err
		}
		servers = append(servers, ns)
	}
	nc, err := nats.Connect(servers[0].ClientURL())
	if err != nil {
		return servers, err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return servers, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = js.AccountInfo(ctx)
		cancel()
		if err == nil && metaPeers(servers) == n {
			return servers, nil
		}
		if time.Now().After(deadline) {
			return servers, fmt.Errorf("the %d-server cluster did not form within 30s (last error: %v)", n, err)
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
