package jetstream_test

import (
	"testing"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jetstream"
	"github.com/wagent/wagent/store/storetest"
)

// The conformance suite, on one server and on a three-server cluster with
// three replicas. The store is networked, so "reopen" means a new Log on
// the same stream: RunDurable's dir names the stream.

func TestConformance(t *testing.T) {
	nc := connect(t, startServer(t))
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Log {
		return openLog(t, nc, dir, jetstream.Options{})
	})
}

func TestConformanceMemoryStorage(t *testing.T) {
	nc := connect(t, startServer(t))
	storetest.Run(t, func(t *testing.T) store.Log {
		return openLog(t, nc, t.Name(), jetstream.Options{Storage: jetstream.MemoryStorage})
	})
}

func TestConformanceCluster(t *testing.T) {
	servers := startCluster(t, 3)
	// Each subtest talks to the cluster through another server, so the
	// stream leader is sometimes local and sometimes a route away.
	var n int
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Log {
		n++
		nc := connect(t, servers[n%len(servers)])
		return openLog(t, nc, dir, jetstream.Options{Replicas: 3})
	})
}
