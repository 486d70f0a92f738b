package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

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

// Mode is what a command needs of the store.
type Mode int

const (
	ModeRead   Mode = iota // reading: a read-only open is enough
	ModeRecord             // recording input or decisions, not driving
	ModeDrive              // driving sessions: the command becomes the owner
)

// Store is where a command's store lives, and what its owner needs.
type Store struct {
	// Dir is a badger store's directory; URL a NATS store's, Name the
	// URL as messages show it (redacted).
	Dir, URL, Name string
	// Preload, when the command drives sessions, is the built-ins bundle
	// their pipelines will load.
	Preload func() []byte
	// Version is wagent's, as the API reports it.
	Version string
}

// Conn is a command's connection to the store: a client of its owner,
// and the owner itself when that is this process.
type Conn struct {
	Client *server.Client
	// Own is this process as the store's owner (nil: another process).
	Own *Owner
	// Remote: a NATS store, whose sessions workers drive.
	Remote bool
}

// Connect finds the store's owner or becomes one, as m needs.
func Connect(ctx context.Context, env *term.Env, st Store, m Mode) (*Conn, error) {
	if st.URL != "" {
		o, err := OpenNATSOwner(ctx, env, st)
		if err != nil {
			return nil, err
		}
		return &Conn{Client: o.Client, Own: o, Remote: true}, nil
	}
	dir := st.Dir
	// A held lock means a live process: the kernel drops it when one dies.
	// An owner that is busy (starting, compiling a pipeline, on a loaded
	// machine) may take seconds to answer its socket, so a command waits
	// for it rather than fail for coming at the same instant as another.
	deadline := time.Now().Add(lockPatience)
	for {
		if cl, err := server.Dial(ctx, dir); err == nil {
			return &Conn{Client: cl}, nil
		}
		o, err := OpenOwner(ctx, env, st, m, false)
		if err == nil {
			return &Conn{Client: o.Client, Own: o}, nil
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

// Close ends the connection; an owner first waits for the sessions it
// runs for other clients.
func (cn *Conn) Close() {
	if cn.Own != nil {
		cn.Own.Shutdown()
	}
}

// Owner is this process holding the store: an app.Node over it, and the
// API (package server) over the node, served on the store's socket.
type Owner struct {
	env    *term.Env
	mode   Mode
	node   *app.Node
	Server *server.Server
	Client *server.Client
	unlist func()
	served chan struct{}
	// left: the command stopped following (a signal): Shutdown does not
	// wait for its streams to be sent.
	left bool
}

// Left says the command stopped following its session on a signal: its
// streams need not be sent to their end (a NATS store whose server is gone
// would hold the exit for seconds).
func (cn *Conn) Left() {
	if cn.Own != nil {
		cn.Own.left = true
	}
}

// lockPatience is how long a command waits for a store another process
// holds to answer on its socket.
const lockPatience = 30 * time.Second

// NodeOptions are the app.Node options every command's node starts from:
// this process's environment, config and terminal.
func NodeOptions(env *term.Env) app.Options {
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

// OpenOwner opens the store in st.Dir as its owner. exposed says the API
// will also be served over TCP (wagent serve --listen), to remote clients.
func OpenOwner(ctx context.Context, env *term.Env, st Store, m Mode, exposed bool) (*Owner, error) {
	dir := st.Dir
	o := &Owner{env: env, mode: m}
	opts := NodeOptions(env)
	opts.Drive, opts.Exposed = m == ModeDrive, exposed
	opts.OpenLog = func() (store.Log, error) { return app.OpenStoreDir(dir, m == ModeRead) }
	if m == ModeDrive {
		opts.Preload = st.Preload()
	}
	var err error
	if o.node, err = app.Open(ctx, opts); err != nil {
		return nil, err
	}
	token := RandomToken()
	o.Server, err = server.New(o.node, server.Options{Token: token, Version: st.Version, StoreName: dir, Console: console.FS()})
	if err != nil {
		o.node.Close(ctx)
		return nil, app.Errorf(app.Failed, "%v", err)
	}
	if m != ModeDrive {
		// In this process only: a short command that records or reads.
		o.Client = server.NewClient("http://wagent", token, &http.Client{Transport: server.InProcess(o.Server)})
		return o, nil
	}
	ln, unlist, err := server.Listen(dir)
	if err != nil {
		o.node.Close(ctx)
		return nil, app.Errorf(app.Failed, "%v", err)
	}
	o.unlist, o.served = unlist, make(chan struct{})
	go func() {
		defer close(o.served)
		o.Server.Serve(ln, true)
	}()
	o.Client = server.NewUnixClient(server.SocketPath(dir))
	return o, nil
}

// Shutdown waits until no session of other clients runs, then until the
// clients that follow them have been sent every event, then stops serving
// and releases the store.
//
// Leaving never cancels another client's turn (clients are not owners,
// and neither is this command's own input owner of the others'): the
// process stays until those turns end, even after a signal (which ended
// only this command's own turn). wagent cancel SESSION, or the client
// that started a turn, stops it.
func (o *Owner) Shutdown() {
	ctx := context.Background()
	host := o.node.Host()
	if o.mode == ModeDrive {
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
	if o.left {
		// The command stopped following on a signal: it leaves now. The
		// store's orderly close (a NATS consumer deleted on a server that
		// may be gone) gets a moment, not the request timeout; what it
		// leaves the server drops by itself.
		done := make(chan struct{})
		go func() { o.close(ctx); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
		}
		return
	}
	if o.unlist != nil {
		// A client following a turn this process ran gets its end before
		// the connection goes (a few seconds at most for a slow reader).
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		o.Server.StreamsSent(wait)
		cancel()
	}
	o.close(ctx)
}

// close stops the API and closes the node.
func (o *Owner) close(ctx context.Context) {
	o.Server.Close(ctx)
	if o.unlist != nil {
		o.unlist()
		<-o.served
	}
	o.node.Close(ctx)
}

// OpenNATSOwner opens a NATS store (st.URL) for a command: the API over
// it, for sessions that workers drive, served on a private socket.
func OpenNATSOwner(ctx context.Context, env *term.Env, st Store) (*Owner, error) {
	l, bus, err := app.OpenNATS(ctx, st.URL, 0, st.Name)
	if err != nil {
		return nil, err
	}
	opts := NodeOptions(env)
	opts.Log, opts.CloseLog, opts.Wake, opts.Interrupt, opts.SharedLog = l, true, bus.Wake, bus.Interrupt, true
	node, err := app.Open(ctx, opts)
	if err != nil {
		l.Close()
		return nil, err
	}
	o := &Owner{env: env, mode: ModeRecord, node: node}
	o.Server, err = server.New(node, server.Options{Token: RandomToken(), Version: st.Version, StoreName: st.Name, Console: console.FS()})
	if err != nil {
		node.Close(ctx)
		return nil, app.Errorf(app.Failed, "%v", err)
	}
	// A socket for this process's own client, so streams work as they do
	// with an owner (the whole command talks through the same API).
	sockDir, err := os.MkdirTemp("", "wagent-nats-")
	if err != nil {
		node.Close(ctx)
		return nil, app.Errorf(app.Failed, "%v", err)
	}
	ln, unlist, err := server.Listen(sockDir)
	if err != nil {
		os.RemoveAll(sockDir)
		node.Close(ctx)
		return nil, app.Errorf(app.Failed, "%v", err)
	}
	o.unlist = func() { unlist(); os.RemoveAll(sockDir) }
	o.served = make(chan struct{})
	go func() {
		defer close(o.served)
		o.Server.Serve(ln, true)
	}()
	o.Client = server.NewUnixClient(server.SocketPath(sockDir))
	return o, nil
}

// RandomToken is a new API token.
func RandomToken() string {
	var b [24]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
