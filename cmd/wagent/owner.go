package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/server/console"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
	"github.com/wagent/wagent/tools/mcp"
	"github.com/wagent/wagent/worker"
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
		o, err := openOwner(ctx, c, env, dir, m)
		if err == nil {
			return &conn{client: o.client, own: o, dir: dir}, nil
		}
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitLocked || time.Now().After(deadline) {
			if ee != nil && ee.code == exitLocked {
				ee.code = exitFailure
			}
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

// owner is this process holding the store.
type owner struct {
	env    *cliEnv
	dir    string
	mode   mode
	log    store.Log
	w      *warmRuntime
	srv    *server.Server
	client *server.Client
	unlist func()
	served chan struct{}

	mu    sync.Mutex
	pipes map[string]*loadedPipeline
	// mcp runs the MCP servers the pipelines name, shared by the sessions
	// of this process; they end with it.
	mcp *mcp.Hub
	// bus is set for a NATS store (natsstore.go): workers drive its
	// sessions and this process wakes them.
	bus *worker.Bus
	// pipelinesDir, for a worker with --pipelines, is where the sessions'
	// pipeline and script files are looked up by name.
	pipelinesDir string
	// shared: the sessions this process runs may be created by others (a
	// worker, a NATS store's owner, an owner serving TCP), so its own API
	// keys go only to base URLs it trusts (buildProvider).
	shared bool
}

type loadedPipeline struct {
	digest [32]byte
	l      *pipeline.Loaded
}

// lockPatience is how long a command waits for a store another process
// holds to answer on its socket.
const lockPatience = 30 * time.Second

// exitLocked marks an open refused because another process holds the
// store (connect waits and asks its socket again).
const exitLocked = -1

func openOwner(ctx context.Context, c *cli.Context, env *cliEnv, dir string, m mode) (*owner, error) {
	o := &owner{env: env, dir: dir, mode: m, pipes: map[string]*loadedPipeline{}, mcp: mcp.NewHub()}
	var err error
	if m == modeDrive {
		if o.w, err = startRuntime(ctx, env, preloadFor(c, env)); err != nil {
			return nil, err
		}
	}
	if o.log, err = openStoreDir(dir, m == modeRead); err != nil {
		o.closeRuntime()
		return nil, err
	}
	token := randomToken()
	o.srv, err = server.New(server.Options{
		Log: o.log, Token: token, Version: version, StoreName: dir,
		Base:    engine.Config{Durability: engine.SyncAtBoundaries, Passive: m != modeDrive, Warn: func(msg string) { tprintln(env.stderr, "wagent: "+oneLine(msg)) }},
		Resolve: o.resolve, Prepare: o.prepare, CheckSettings: checkSettings,
		Console: console.FS(),
	})
	if err != nil {
		o.log.Close()
		o.closeRuntime()
		return nil, fail(exitFailure, "%v", err)
	}
	if m != modeDrive {
		// In this process only: a short command that records or reads.
		o.client = server.NewClient("http://wagent", token, &http.Client{Transport: localTransport{o.srv}})
		return o, nil
	}
	ln, unlist, err := server.Listen(dir)
	if err != nil {
		o.srv.Close(ctx)
		o.log.Close()
		o.closeRuntime()
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

func (o *owner) closeRuntime() {
	o.mcp.Close()
	if o.w != nil {
		o.w.close()
	}
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
	if o.mode == modeDrive {
		said := false
		// A drain that is ending (this command's own turn has just ended)
		// is not worth a line: only sessions still running after a moment.
		quiet := time.Now().Add(500 * time.Millisecond)
		for {
			var running []string
			for _, id := range o.srv.Host().Sessions() {
				if s, ok := o.srv.Host().Get(id); ok && s.Status() == string(session.DriverRunning) {
					running = append(running, id)
				}
			}
			if len(running) == 0 {
				break
			}
			if !said && time.Now().After(quiet) {
				fmt.Fprintf(o.env.stderr, "wagent: other clients' turns run in this process (session %s); it leaves when they end (wagent cancel SESSION stops one)\n", strings.Join(running, ", "))
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
	o.log.Close()
	o.closeRuntime()
}

// secretAPIKey names the secret a client hands over for the provider.
const secretAPIKey = "api_key"

// resolve builds a session's config from its settings: the provider and,
// for an owner that drives, the pipeline (loaded once per file contents,
// shared by the sessions that name it). An owner that only records or
// reads needs neither.
func (o *owner) resolve(ctx context.Context, id string, set *event.SessionCreated, secrets map[string]string) (engine.Config, error) {
	if o.mode != modeDrive {
		return engine.Config{}, nil
	}
	s, err := readSettings(set.Settings)
	if err != nil {
		return engine.Config{}, fmt.Errorf("session %s: its recorded settings cannot be read: %v", id, err)
	}
	s = s.withDefaults(o.env)
	if o.pipelinesDir != "" {
		if s, err = s.inDir(o.pipelinesDir); err != nil {
			return engine.Config{}, fmt.Errorf("session %s: %v", id, err)
		}
	} else if err := o.sessionFiles(s); err != nil {
		return engine.Config{}, fmt.Errorf("session %s: %v", id, err)
	}
	prov, err := buildProvider(o.env, s, secrets[secretAPIKey], o.shared)
	if err != nil {
		return engine.Config{}, err
	}
	l, err := o.pipeline(ctx, s)
	if err != nil {
		return engine.Config{}, err
	}
	cfg := engine.Config{Pipeline: l.Pipeline, Provider: prov, Model: s.Model}
	if s.System != "" {
		cfg.PromptParts = []event.Contribution{{Source: s.SystemSource, Text: s.System}}
	}
	return cfg, nil
}

// prepare checks a create's (or a change's) settings before anything is
// written: the provider is known and has what it needs, and the pipeline
// loads.
func (o *owner) prepare(ctx context.Context, req *server.CreateRequest) (event.SessionCreated, error) {
	s, err := readSettings(req.Settings)
	if err != nil {
		return event.SessionCreated{}, fmt.Errorf("settings: %v", err)
	}
	s = s.withDefaults(o.env)
	if err := s.check(); err != nil {
		return event.SessionCreated{}, err
	}
	if o.mode == modeDrive {
		if err := o.sessionFiles(s); err != nil {
			return event.SessionCreated{}, fail(exitFailure, "%v", err)
		}
	}
	if _, err := buildProvider(o.env, s, req.Secrets[secretAPIKey], o.shared); err != nil {
		return event.SessionCreated{}, err
	}
	info := event.SessionCreated{Model: s.Model, CreatedBy: req.CreatedBy}
	if o.bus != nil && s.Pipeline != "" {
		// Workers load it; check here that it reads, so a typo fails now.
		if _, err := pipeline.ParseFile(s.Pipeline); err != nil {
			return event.SessionCreated{}, fail(exitFailure, "%v", err)
		}
	}
	if o.mode == modeDrive {
		l, err := o.pipeline(ctx, s)
		if err != nil {
			return event.SessionCreated{}, err
		}
		info.Pipeline = l.Pipeline.Digest()
	}
	info.Settings, _ = json.Marshal(s)
	if info.CreatedBy == "" {
		info.CreatedBy = "wagent " + version
	}
	return info, nil
}

// pipeline loads the settings' pipeline, or returns it loaded already.
func (o *owner) pipeline(ctx context.Context, s settings) (*pipeline.Loaded, error) {
	if o.shared {
		// The session's creator recorded its folder, which agents-md
		// would mount and read: in a process others' sessions run in,
		// only a folder under WAGENT_PROJECT_ROOTS; and its files only
		// from there (or --pipelines).
		s.Dir = projectDir(o.env, s.Dir)
		if err := o.sessionFiles(s); err != nil {
			return nil, err
		}
	}
	var digest [32]byte
	if s.Pipeline != "" {
		b, err := os.ReadFile(s.Pipeline)
		if err != nil {
			return nil, fmt.Errorf("pipeline: %v", err)
		}
		digest = sha256.Sum256(b)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// The working directory is part of the key: agents-md mounts it.
	key := s.Pipeline + "\x00" + s.Dir
	if lp, ok := o.pipes[key]; ok && lp.digest == digest {
		return lp.l, nil
	}
	l, err := loadPipeline(ctx, o.env, s, o.w, o.mcp)
	if err != nil {
		return nil, err
	}
	o.pipes[key] = &loadedPipeline{digest: digest, l: l}
	return l, nil
}

// sessionFiles refuses, in a process that runs sessions others create
// (unless a worker's --pipelines names where its files come from), a
// pipeline file or script outside WAGENT_PROJECT_ROOTS: the session's
// creator named the path, and the process would read that file of its
// machine, run what it grants and quote it in errors.
func (o *owner) sessionFiles(s settings) error {
	if !o.shared || o.pipelinesDir != "" {
		return nil
	}
	for _, f := range []struct{ what, path string }{{"pipeline", s.Pipeline}, {"script", s.Script}} {
		if f.path != "" && projectDir(o.env, f.path) == "" {
			return fmt.Errorf("the session's %s %s is not under this process's WAGENT_PROJECT_ROOTS: a process that runs sessions others create reads their files only there (set it in this process's environment, or start a worker with --pipelines DIR)", f.what, f.path)
		}
	}
	return nil
}

// projectDir returns dir if it lies under one of the folders
// WAGENT_PROJECT_ROOTS lists (filepath.ListSeparator between them), both
// with symbolic links resolved, and "" otherwise: for a process that runs
// sessions others create (a worker, an owner serving TCP or NATS), which
// must not read a folder of its machine because a creator named it.
func projectDir(env *cliEnv, dir string) string {
	if dir == "" {
		return ""
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	for _, root := range filepath.SplitList(env.getenv("WAGENT_PROJECT_ROOTS")) {
		if root == "" {
			continue
		}
		r, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(r, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return real
		}
	}
	return ""
}

// openStoreDir opens the badger store in dir, read-only or for writing.
func openStoreDir(dir string, ro bool) (*badger.Store, error) {
	if !ro {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fail(exitFailure, "create store directory: %v", err)
		}
	}
	s, err := badger.Open(dir, badger.Options{ReadOnly: ro})
	switch {
	case errors.Is(err, store.ErrLocked):
		return nil, &exitError{code: exitLocked, msg: fmt.Sprintf("the store %s is in use by another wagent process that does not answer on its socket: wait for it to finish, or use another --store", dir)}
	case errors.Is(err, store.ErrCorrupt):
		// The store's own message names the directory and what to do.
		return nil, fail(exitFailure, "%s", strings.TrimPrefix(oneLine(err.Error()), store.ErrCorrupt.Error()+": "))
	case err != nil:
		return nil, fail(exitFailure, "open store: %v", err)
	}
	return s, nil
}

// localTransport serves requests with the handler in this process, for
// a command that needs no socket (nothing streams through it).
type localTransport struct{ h http.Handler }

func (t localTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}
