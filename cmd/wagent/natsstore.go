package main

import (
	"context"
	"os"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/server/console"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/worker"
)

// A NATS store (--store nats://…) has no owner process: workers (wagent
// worker) drive its sessions, from any number of machines. Every other
// command opens the store itself and serves the same API as an owner does
// (package server, with Options.Wake), on a private socket for the
// command's own client: it records what it was asked, publishes the
// wake-up, and reads what the workers append. No command here runs a
// session, a tool or a model request.

// openNATS connects to a JetStream store and its workers' bus.
func openNATS(ctx context.Context, rawURL string, leaseTTL time.Duration) (store.Log, *worker.Bus, error) {
	return app.OpenNATS(ctx, rawURL, leaseTTL, redactURL(rawURL))
}

// openNATSOwner opens a NATS store for a command: the API over it, for
// sessions that workers drive, served on a private socket.
func openNATSOwner(ctx context.Context, env *cliEnv, rawURL string) (*owner, error) {
	l, bus, err := openNATS(ctx, rawURL, 0)
	if err != nil {
		return nil, err
	}
	opts := nodeOptions(env)
	opts.Log, opts.CloseLog, opts.Wake, opts.Interrupt, opts.SharedLog = l, true, bus.Wake, bus.Interrupt, true
	node, err := app.Open(ctx, opts)
	if err != nil {
		l.Close()
		return nil, err
	}
	o := &owner{env: env, mode: modeRecord, node: node}
	o.srv, err = server.New(node, server.Options{Token: randomToken(), Version: version, StoreName: redactURL(rawURL), Console: console.FS()})
	if err != nil {
		node.Close(ctx)
		return nil, fail(exitFailure, "%v", err)
	}
	// A socket for this process's own client, so streams work as they do
	// with an owner (the whole command talks through the same API).
	sockDir, err := os.MkdirTemp("", "wagent-nats-")
	if err != nil {
		node.Close(ctx)
		return nil, fail(exitFailure, "%v", err)
	}
	ln, unlist, err := server.Listen(sockDir)
	if err != nil {
		os.RemoveAll(sockDir)
		node.Close(ctx)
		return nil, fail(exitFailure, "%v", err)
	}
	o.unlist = func() { unlist(); os.RemoveAll(sockDir) }
	o.served = make(chan struct{})
	go func() {
		defer close(o.served)
		o.srv.Serve(ln, true)
	}()
	o.client = server.NewUnixClient(server.SocketPath(sockDir))
	return o, nil
}
