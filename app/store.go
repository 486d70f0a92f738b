package app

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
	"github.com/wagent/wagent/store/jetstream"
	"github.com/wagent/wagent/worker"
)

// OpenStoreDir opens the badger store in dir (made if missing, mode
// 0700), read-only or for writing. A store another live process holds is
// a Locked error: that process owns it, and its socket is where to ask.
func OpenStoreDir(dir string, readOnly bool) (*badger.Store, error) {
	if !readOnly {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, Errorf(Failed, "create store directory: %v", err)
		}
	}
	s, err := badger.Open(dir, badger.Options{ReadOnly: readOnly})
	switch {
	case errors.Is(err, store.ErrLocked):
		return nil, Errorf(Locked, "the store %s is in use by another wagent process that does not answer on its socket: wait for it to finish, or use another --store", dir)
	case errors.Is(err, store.ErrCorrupt):
		// The store's own message names the directory and what to do.
		return nil, Errorf(Failed, "%s", strings.TrimPrefix(oneLine(err.Error()), store.ErrCorrupt.Error()+": "))
	case err != nil:
		return nil, Errorf(Failed, "open store: %v", err)
	}
	return s, nil
}

// OpenNATS connects to a JetStream store (store/jetstream.OpenURL) and
// its workers' bus; replicas= in the URL and leaseTTL apply to streams
// this call creates. name is the URL as errors may show it (without
// credentials).
func OpenNATS(ctx context.Context, rawURL string, leaseTTL time.Duration, name string) (*jetstream.Log, *worker.Bus, error) {
	l, err := jetstream.OpenURL(ctx, rawURL)
	if err != nil {
		return nil, nil, Errorf(Failed, "open the store %s: %v", name, err)
	}
	bus, err := worker.OpenBus(ctx, l.Conn(), worker.BusOptions{Replicas: urlReplicas(rawURL), LeaseTTL: leaseTTL})
	if err != nil {
		l.Close()
		return nil, nil, Errorf(Failed, "open the workers' queue on %s: %v", name, err)
	}
	return l, bus, nil
}

// urlReplicas reads replicas= from a store URL (the store checked it).
func urlReplicas(rawURL string) int {
	_, query, _ := strings.Cut(rawURL, "?")
	q, _ := url.ParseQuery(query)
	n, _ := strconv.Atoi(q.Get("replicas"))
	return n
}
