package main

import (
	"context"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/worker"
)

// A NATS store (--store nats://…) has no owner process: workers (wagent
// worker) drive its sessions, from any number of machines. Every other
// command opens the store itself and serves the same API as an owner does
// (package server, with Options.Wake; session.OpenNATSOwner), on a
// private socket for the command's own client: it records what it was asked, publishes the
// wake-up, and reads what the workers append. No command here runs a
// session, a tool or a model request.

// openNATS connects to a JetStream store and its workers' bus.
func openNATS(ctx context.Context, rawURL string, leaseTTL time.Duration) (store.Log, *worker.Bus, error) {
	return app.OpenNATS(ctx, rawURL, leaseTTL, redactURL(rawURL))
}
