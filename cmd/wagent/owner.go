package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/engine"
	driver "github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/server/console"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/wasmhost"
)

// One owner, many clients. The process that holds a store serves it on a
// Unix socket in the store's directory (server.Listen); every command
// first asks that socket, and works through the owner's API while one
// answers. When none does, a command opens the store itself:
//
//   - run, resume, step (and serve) become the owner: they serve the
//     socket while they run, drive their own session through it, and run
//     other clients' sessions too (a second shell's run --session OTHER);
//     before exiting they wait for those to be idle;
//   - approve, deny, send, steer and cancel record what they were asked
//     and exit; wagent resume drives what follows (they do not serve: an
//     owner that cannot drive must not take a run another shell starts);
//   - log and sessions open the store read-only.
//
// In every case the verbs go through the same API (package server), so
// each has one implementation.

// mode is what a command needs of the store.
type mode int

const (
	modeRead   mode = iota // reading: a read-only open is enough
	modeRecord             // recording input or decisions, not driving
	modeDrive              // driving sessions: the command becomes the owner
)

// conn is a command's connection to the store: a client of its owner,
// and the owner itself when that is this process.
type conn struct {
	client *server.Client
	own    *owner
	dir    string
	// remote: a NATS store, whose sessions workers drive (natsstore.go).
	remote bool
}

// connect finds the store's owner or becomes one, as mode needs.
func connect(ctx context.Context, c *cli.Context, env *cliEnv, m mode) (*conn, error) {
	loc, err := storeLocation(c, env)
	if err != nil {
		return nil, err
	}
	if loc.isNATS() {
		o, err := openNATSOwner(ctx, env, loc.url)
		if err != nil {
			return nil, err
		}
		return &conn{client: o.client, own: o, remote: true}, nil
	}
	dir := loc.dir
	// A held lock means a live process: the kernel drops it when one dies.
	// An owner that is busy (starting, compiling a pipeline, on a loaded
	// machine) may take seconds to answer its socket, so a command waits
	// for it rather than fail for coming at the same instant as another.
	deadline := time.Now().Add(lockPatience)
	for {
		if cl, err := server.Dial(ctx, dir); err == nil {
			return &conn{client: cl, dir: dir}, nil
		}
		o, err := openOwner(ctx, c, env, dir, m, false)
		if err == nil {
			return &conn{client: o.client, own: o, dir: dir}, nil
		}
		if app.ReasonOf(err) != app.Locked || time.Now().After(deadline) {
			return nil, err
		}
		// Another process holds the store and has not answered on its
		// socket yet (it is starting, or is a short command): a moment.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close ends the connection; an owner first waits for the sessions it
// runs for other clients.
func (cn *conn) close() {
	if cn.own != nil {
		cn.own.shutdown()
	}
}

// owner is this process holding the store: an app.Node over it, and the
// API (package server) over the node, served on the store's socket.
type owner struct {
	env    *cliEnv
	mode   mode
	node   *app.Node
	srv    *server.Server
	client *server.Client
	unlist func()
	served chan struct{}
}

// lockPatience is how long a command waits for a store another process
// holds to answer on its socket.
const lockPatience = 30 * time.Second

// nodeOptions are the app.Node options every command's node starts from:
// this process's environment, config and terminal.
func nodeOptions(env *cliEnv) app.Options {
	cfg, _ := env.LoadConfig() // a broken config was said by the command
	o := app.Options{
		Getenv:         env.Getenv,
		Warn:           func(msg string) { render.Fprintln(env.Stderr, "wagent: "+term.OneLine(msg)) },
		Progress:       func() app.Progress { return term.NewProgress(env) },
		Config:         cfg,
		Base:           engine.Config{Durability: engine.SyncAtBoundaries},
		RuntimeOptions: []wasmhost.Option{wasmhost.WithLogger(term.Warnings(env.Stderr))},
	}
	if d := env.Getenv("WAGENT_CACHE_DIR"); d != "" {
		o.RuntimeOptions = append(o.RuntimeOptions, wasmhost.WithCacheDir(d))
	}
	return o
}

// openOwner opens the store in dir as its owner. exposed says the API
// will also be served over TCP (wagent serve --listen), to remote clients.
func openOwner(ctx context.Context, c *cli.Context, env *cliEnv, dir string, m mode, exposed bool) (*owner, error) {
	o := &owner{env: env, mode: m}
	opts := nodeOptions(env)
	opts.Drive, opts.Exposed = m == modeDrive, exposed
	opts.OpenLog = func() (store.Log, error) { return app.OpenStoreDir(dir, m == modeRead) }
	if m == modeDrive {
		opts.Preload = preloadFor(c, env)
	}
	var err error
	if o.node, err = app.Open(ctx, opts); err != nil {
		return nil, err
	}
	token := randomToken()
	o.srv, err = server.New(o.node, server.Options{Token: token, Version: version, StoreName: dir, Console: console.FS()})
	if err != nil {
		o.node.Close(ctx)
		return nil, fail(exitFailure, "%v", err)
	}
	if m != modeDrive {
		// In this process only: a short command that records or reads.
		o.client = server.NewClient("http://wagent", token, &http.Client{Transport: server.InProcess(o.srv)})
		return o, nil
	}
	ln, unlist, err := server.Listen(dir)
	if err != nil {
		o.node.Close(ctx)
		return nil, fail(exitFailure, "%v", err)
	}
	o.unlist, o.served = unlist, make(chan struct{})
	go func() {
		defer close(o.served)
		o.srv.Serve(ln, true)
	}()
	o.client = server.NewUnixClient(server.SocketPath(dir))
	return o, nil
}

// shutdown waits until no session of other clients runs, then until the
// clients that follow them have been sent every event, then stops serving
// and releases the store.
//
// Leaving never cancels another client's turn (clients are not owners,
// and neither is this command's own input owner of the others'): the
// process stays until those turns end, even after a signal (which ended
// only this command's own turn). wagent cancel SESSION, or the client
// that started a turn, stops it.
func (o *owner) shutdown() {
	ctx := context.Background()
	host := o.node.Host()
	if o.mode == modeDrive {
		said := false
		// A drain that is ending (this command's own turn has just ended)
		// is not worth a line: only sessions still running after a moment.
		quiet := time.Now().Add(500 * time.Millisecond)
		for {
			var running []string
			for _, id := range host.Sessions() {
				if s, ok := host.Get(id); ok && s.Status() == string(driver.DriverRunning) {
					running = append(running, id)
				}
			}
			if len(running) == 0 {
				break
			}
			if !said && time.Now().After(quiet) {
				fmt.Fprintf(o.env.Stderr, "wagent: other clients' turns run in this process (session %s); it leaves when they end (wagent cancel SESSION stops one)\n", strings.Join(running, ", "))
				said = true
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if o.unlist != nil {
		// A client following a turn this process ran gets its end before
		// the connection goes (a few seconds at most for a slow reader).
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		o.srv.StreamsSent(wait)
		cancel()
	}
	o.srv.Close(ctx)
	if o.unlist != nil {
		o.unlist()
		<-o.served
	}
	o.node.Close(ctx)
}
