// Package natstest starts NATS servers with JetStream for tests: embedded
// in the test process, on loopback ports the kernel picks, with their files
// in the test's temporary folder, stopped when the test ends. Nothing here
// reaches a server the test did not start.
package natstest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxPayload is the max_payload of test servers: above what the wagent
// store needs (jetstream.RequiredMaxPayload), as a deployment must be.
const MaxPayload = 8 << 20

// Options returns the options of a test server named name. Set NATSLOG=1
// to see the servers' logs.
func Options(t testing.TB, name string) *server.Options {
	return &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		MaxPayload: MaxPayload,
		NoLog:      os.Getenv("NATSLOG") == "",
		NoSigs:     true,
	}
}

// Start starts one server (mod, if given, adjusts its options first) and
// stops it when t ends.
func Start(t testing.TB, mod ...func(*server.Options)) *server.Server {
	t.Helper()
	opts := Options(t, "wagent-test")
	for _, m := range mod {
		m(opts)
	}
	ns, err := start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Stop(ns) })
	var auth []nats.Option
	if opts.Authorization != "" {
		auth = append(auth, nats.Token(opts.Authorization))
	}
	anchor(t, ns.ClientURL(), 1, auth...)
	return ns
}

// Stop shuts ns down and waits until it has; stopping a stopped server is
// harmless.
func Stop(ns *server.Server) {
	ns.Shutdown()
	ns.WaitForShutdown()
}

func start(opts *server.Options) (*server.Server, error) {
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

// Cluster is a cluster of servers routed to each other.
type Cluster struct {
	Servers []*server.Server
}

// URL lists every server's client URL, comma-separated, as a client that
// should survive one of them going away connects.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.Servers))
	for i, ns := range c.Servers {
		urls[i] = ns.ClientURL()
	}
	return strings.Join(urls, ",")
}

// StartCluster starts n servers, each routed to all, waits until JetStream
// has a meta leader that counts all of them, and stops them when t ends.
//
// A JetStream cluster refuses to start without configured routes, so the
// route ports are picked before the servers start (listen on port 0, note
// the port, close) and the start is tried again if another process took
// one in between.
func StartCluster(t testing.TB, n int, mod ...func(*server.Options)) *Cluster {
	t.Helper()
	var err error
	for range 3 {
		var servers []*server.Server
		if servers, err = tryCluster(t, n, mod...); err == nil {
			for _, ns := range servers {
				t.Cleanup(func() { Stop(ns) })
			}
			c := &Cluster{Servers: servers}
			anchor(t, c.URL(), n)
			return c
		}
	}
	t.Fatal(err)
	return nil
}

func tryCluster(t testing.TB, n int, mod ...func(*server.Options)) (servers []*server.Server, err error) {
	defer func() {
		if err != nil {
			for _, ns := range servers {
				Stop(ns)
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
		opts := Options(t, fmt.Sprintf("n%d", i+1))
		opts.Cluster = server.ClusterOpts{Name: "wagent-test", Host: "127.0.0.1"}
		opts.Cluster.Port, _ = strconv.Atoi(routes[i].Port())
		opts.Routes = routes
		for _, m := range mod {
			m(opts)
		}
		ns, err := start(opts)
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
	js, err := jetstream.New(nc)
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

func metaPeers(servers []*server.Server) int {
	for _, ns := range servers {
		if ns.JetStreamIsLeader() {
			if peers := ns.JetStreamClusterPeers(); peers != nil {
				return len(peers)
			}
		}
	}
	return 0
}

// anchor creates a stream that lives as long as the servers. nats-server
// 2.15.2 removes an account's streams folder in the background when its
// last stream is deleted, and a stream created at that moment fails;
// tests that delete their streams would hit that now and then.
func anchor(t testing.TB, urls string, replicas int, auth ...nats.Option) {
	t.Helper()
	nc := Connect(t, urls, auth...)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ANCHOR", Subjects: []string{"wagent-test.anchor"}, Replicas: replicas}); err != nil {
		t.Fatalf("create the anchor stream: %v", err)
	}
}

// Connect returns a connection to urls (comma-separated) that reconnects
// for ever, closed when t ends.
func Connect(t testing.TB, urls string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("connect to %s: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	return nc
}
