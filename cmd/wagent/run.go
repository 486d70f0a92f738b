package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/anthropic"
	"github.com/wagent/wagent/engine/provider/openai"
	"github.com/wagent/wagent/engine/provider/script"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
	"github.com/wagent/wagent/wasmhost"
)

// settings are what `run` records in session/created, so that resume,
// step and later runs of the session use the same pipeline and model.
type settings struct {
	Pipeline string `json:"pipeline,omitempty"` // absolute path; "" for the built-in default
	Provider string `json:"provider,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	Model    string `json:"model,omitempty"`
	Script   string `json:"script,omitempty"` // absolute path
}

var providerFlags = []cli.Flag{
	&cli.StringFlag{Name: "pipeline", Usage: "pipeline `FILE` (YAML); default: the built-in pipeline"},
	&cli.StringFlag{Name: "provider", Usage: "model provider: openai, anthropic or script (default: script when --script is given, else openai)"},
	&cli.StringFlag{Name: "base-url", Usage: "API `URL` (default: $OPENAI_BASE_URL or https://api.openai.com/v1; for anthropic $ANTHROPIC_BASE_URL or https://api.anthropic.com)"},
	&cli.StringFlag{Name: "model", Usage: "model `NAME` (default: $WAGENT_MODEL)"},
	&cli.StringFlag{Name: "api-key", Usage: "API `KEY` (default: $OPENAI_API_KEY, or $ANTHROPIC_API_KEY for anthropic; never written to the store)"},
	&cli.StringFlag{Name: "script", Usage: "scripted replies `FILE` for --provider script (offline runs)"},
	&cli.BoolFlag{Name: "json", Usage: "print one JSON object per line (live events and log events)"},
}

func runCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "start or continue a session and stream what happens",
		UsageText: `wagent run [--session ID] [--pipeline FILE] [--provider openai|anthropic|script] [--model M] [--json] [PROMPT]

Examples:
   wagent run --model gpt-4o-mini "what is 6 times 7?"
   wagent run --provider script --script replies.yaml --pipeline agent.yaml "add 2 and 40"
   wagent run --session 20261130-a1b2c3 "and now subtract 2"`,
		Flags: append([]cli.Flag{storeFlag, &cli.StringFlag{Name: "session", Usage: "session `ID` to continue or create (default: a new one)"}}, providerFlags...),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 1, "[flags] [PROMPT]"); err != nil {
				return err
			}
			return drive(c, env, c.String("session"), c.Args().First())
		},
	}
}

func resumeCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "resume",
		Usage: "continue a session: run queued input, or the turn that waited for a decision",
		UsageText: `wagent resume SESSION [--json]

Example:
   wagent approve 20261130-a1b2c3 --all && wagent resume 20261130-a1b2c3`,
		Flags: append([]cli.Flag{storeFlag}, providerFlags...),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "SESSION"); err != nil {
				return err
			}
			return drive(c, env, c.Args().First(), "")
		},
	}
}

func newSessionID() string {
	var b [3]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// resolve merges flags over the settings a session was created with.
func resolve(c *cli.Context, env *cliEnv, recorded settings) (settings, error) {
	s := recorded
	abs := func(p string) string {
		if p == "" {
			return ""
		}
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		return a
	}
	if v := c.String("pipeline"); v != "" {
		s.Pipeline = abs(v)
	}
	if v := c.String("script"); v != "" {
		s.Script = abs(v)
	}
	if v := c.String("provider"); v != "" {
		s.Provider = v
	}
	if v := c.String("base-url"); v != "" {
		s.BaseURL = v
	}
	if v := c.String("model"); v != "" {
		s.Model = v
	}
	if s.Provider == "" {
		s.Provider = "openai"
		if s.Script != "" {
			s.Provider = "script"
		}
	}
	if s.Model == "" {
		s.Model = env.getenv("WAGENT_MODEL")
	}
	switch s.Provider {
	case "script":
		if s.Script == "" {
			return s, fail(exitUsage, "--provider script needs --script FILE")
		}
	case "openai":
		if s.Model == "" {
			return s, fail(exitUsage, "--provider openai needs a model: pass --model NAME or set WAGENT_MODEL")
		}
	case "anthropic":
		if s.Model == "" {
			return s, fail(exitUsage, "--provider anthropic needs a model: pass --model NAME or set WAGENT_MODEL")
		}
	default:
		return s, fail(exitUsage, "unknown --provider %q: use openai, anthropic or script", s.Provider)
	}
	return s, nil
}

func buildProvider(c *cli.Context, env *cliEnv, s settings) (provider.Provider, error) {
	switch s.Provider {
	case "script":
		p, err := script.Load(s.Script)
		if err != nil {
			return nil, fail(exitFailure, "%v", err)
		}
		return p, nil
	case "anthropic":
		cfg := anthropic.ConfigFromEnv()
		cfg.Model = s.Model
		if s.BaseURL != "" {
			cfg.BaseURL = s.BaseURL
		} else {
			cfg.BaseURL = env.getenv("ANTHROPIC_BASE_URL")
		}
		cfg.APIKey = c.String("api-key")
		if cfg.APIKey == "" {
			cfg.APIKey = env.getenv("ANTHROPIC_API_KEY")
		}
		p, err := anthropic.New(cfg)
		if err != nil {
			return nil, fail(exitUsage, "%v", err)
		}
		return p, nil
	default:
		cfg := openai.Config{BaseURL: s.BaseURL, APIKey: c.String("api-key"), Model: s.Model}
		if cfg.APIKey == "" {
			cfg.APIKey = env.getenv("OPENAI_API_KEY")
		}
		if cfg.BaseURL == "" {
			cfg.BaseURL = env.getenv("OPENAI_BASE_URL")
		}
		p, err := openai.New(cfg)
		if err != nil {
			return nil, fail(exitUsage, "%v", err)
		}
		return p, nil
	}
}

// warmRuntime is the wasm runtime, started at once with the built-in
// bundle compiling (or loading from the cache) in the background while
// the store opens and the session is read.
type warmRuntime struct {
	rt   *wasmhost.Runtime
	done chan struct{}
}

func startRuntime(ctx context.Context, env *cliEnv) (*warmRuntime, error) {
	opts := []wasmhost.Option{wasmhost.WithLogger(warnings(env.stderr))}
	if d := env.getenv("WAGENT_CACHE_DIR"); d != "" {
		opts = append(opts, wasmhost.WithCacheDir(d))
	}
	rt, err := wasmhost.NewRuntime(ctx, opts...)
	if err != nil {
		return nil, fail(exitFailure, "start the wasm runtime: %v", err)
	}
	w := &warmRuntime{rt: rt, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		rt.Load(ctx, builtins.Module()) // errors surface again when the pipeline loads it
	}()
	return w, nil
}

// close waits for the background load and closes the runtime.
func (w *warmRuntime) close() {
	<-w.done
	w.rt.Close(context.Background())
}

// loadPipeline builds the session's pipeline, showing progress (on a
// terminal) when modules take a while to compile.
func loadPipeline(ctx context.Context, env *cliEnv, s settings, w *warmRuntime) (*pipeline.Loaded, error) {
	spec := defaultPipeline(env)
	if s.Pipeline != "" {
		var err error
		if spec, err = pipeline.ParseFile(s.Pipeline); err != nil {
			return nil, fail(exitFailure, "%v", err)
		}
	}
	// A line on the terminal only when loading takes long enough to
	// notice: compiling on a cold cache, not loading from a warm one.
	progress := newProgress(env)
	current := "the built-in operations"
	var mu sync.Mutex
	show := time.AfterFunc(300*time.Millisecond, func() {
		mu.Lock()
		defer mu.Unlock()
		progress.loading(current)
	})
	<-w.done
	l, err := spec.Build(ctx, pipeline.Options{Runtime: w.rt, Builtins: builtinModules(), Progress: func(use string) {
		mu.Lock()
		defer mu.Unlock()
		current = use
		if progress.shown {
			progress.loading(use)
		}
	}})
	show.Stop()
	mu.Lock()
	progress.done()
	mu.Unlock()
	if err != nil {
		return nil, fail(exitFailure, "%v", err)
	}
	return l, nil
}

// prepared is what running a session needs, all checked before the
// session is touched.
type prepared struct {
	log    *badger.Store
	w      *warmRuntime
	id     string
	isNew  bool
	s      settings
	prov   provider.Provider
	loaded *pipeline.Loaded
}

func (p *prepared) close() {
	if p.w != nil {
		p.w.close()
	}
	if p.log != nil {
		p.log.Close()
	}
}

// prepare opens the store (while the wasm runtime warms up), reads the
// session's recorded settings, merges the flags, and builds the provider
// and the pipeline. An empty id names a new session; with mayCreate false a
// missing session is an error. Nothing is written.
func prepare(ctx context.Context, c *cli.Context, env *cliEnv, id string, mayCreate bool) (*prepared, error) {
	p := &prepared{id: id}
	var err error
	if p.w, err = startRuntime(ctx, env); err != nil {
		return nil, err
	}
	if p.log, err = openStore(c, env); err != nil {
		p.close()
		return nil, err
	}
	var recorded settings
	p.isNew = id == ""
	if p.isNew {
		p.id = newSessionID()
	} else {
		if err := store.ValidSessionID(id); err != nil {
			p.close()
			return nil, fail(exitUsage, "%v", err)
		}
		st, _, err := readState(ctx, p.log, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			p.isNew = true
		case err != nil:
			p.close()
			return nil, err
		case len(st.Created.Settings) > 0:
			json.Unmarshal(st.Created.Settings, &recorded)
		}
	}
	if p.isNew && !mayCreate {
		p.close()
		return nil, fail(exitFailure, "no session %q in this store (wagent sessions lists them)", id)
	}
	if p.s, err = resolve(c, env, recorded); err == nil {
		if p.prov, err = buildProvider(c, env, p.s); err == nil {
			p.loaded, err = loadPipeline(ctx, env, p.s, p.w)
		}
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// drive runs a session until it is done or waits for a person.
func drive(c *cli.Context, env *cliEnv, id, prompt string) error {
	ctx, stop := signalContext()
	defer stop()
	p, err := prepare(ctx, c, env, id, c.Command.Name == "run")
	if err != nil {
		return err
	}
	defer p.close()
	if p.isNew {
		raw, _ := json.Marshal(p.s)
		info := engine.SessionCreated{Pipeline: p.loaded.Pipeline.Digest(), Model: p.s.Model, CreatedBy: "wagent " + version, Settings: raw}
		if err := engine.Create(ctx, p.log, p.id, info, time.Now()); err != nil {
			return fail(exitFailure, "create session %s: %v", p.id, err)
		}
	}
	out := newPrinter(env, c.Bool("json"), p.id)
	sess, err := engine.OpenSession(ctx, engine.Config{
		Log: p.log, Session: p.id, Pipeline: p.loaded.Pipeline, Provider: p.prov, Model: p.s.Model,
		Durability: engine.SyncAtBoundaries, Observer: out.live,
	})
	if err != nil {
		return fail(exitFailure, "open session %s: %v", p.id, err)
	}
	defer sess.Close(context.Background())
	out.start(p.isNew)
	if prompt != "" {
		if _, err := sess.Send(ctx, prompt); err != nil {
			return fail(exitFailure, "send: %v", err)
		}
	} else {
		sess.Wake()
	}
	return waitLoop(ctx, env, p.log, sess, out)
}

func waitLoop(ctx context.Context, env *cliEnv, log store.Log, sess *engine.Session, out *printer) error {
	in := bufio.NewReader(env.stdin)
	for {
		if err := sess.WhenIdle(ctx); err != nil {
			// Interrupted: cancel the turn, keep queued input, record it.
			sess.Cancel(context.Background(), engine.Cause{Kind: engine.CauseUser, Reason: "interrupted at the terminal"}, true)
			sess.WhenIdle(context.Background())
			out.finish()
			return fail(exitFailure, "interrupted; the turn was recorded as aborted (wagent log %s)", sess.ID())
		}
		if err := sess.Err(); err != nil {
			out.finish()
			return fail(exitFailure, "session %s: %v", sess.ID(), err)
		}
		waiting := sess.Waiting()
		if len(waiting) == 0 {
			out.finish()
			return lastTurnError(ctx, log, sess.ID())
		}
		if !env.interactive || out.json {
			out.waiting(waiting)
			return &exitError{code: exitWaiting}
		}
		ds, err := askDecisions(env, in, waiting)
		if err != nil {
			return err
		}
		if err := sess.Decide(ctx, ds...); err != nil {
			return fail(exitFailure, "record decision: %v", err)
		}
	}
}

// askDecisions asks at the terminal about each waiting call.
func askDecisions(env *cliEnv, in *bufio.Reader, waiting []engine.WaitingCall) ([]engine.Decision, error) {
	var ds []engine.Decision
	for _, w := range waiting {
		for {
			tprintf(env.stdout, "\nallow %s %s? [y]es, [n]o, [a]lways: ", w.Name, compact(string(w.Arguments), 200))
			line, err := in.ReadString('\n')
			if err != nil && line == "" {
				return nil, fail(exitWaiting, "no answer at the terminal; the session waits (wagent approve|deny)")
			}
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "y", "yes":
				ds = append(ds, engine.Decision{CallID: w.ID, Allow: true, Who: "terminal"})
			case "a", "always":
				ds = append(ds, engine.Decision{CallID: w.ID, Allow: true, Scope: hostabi.ScopeAlways, Who: "terminal"})
			case "n", "no":
				ds = append(ds, engine.Decision{CallID: w.ID, Allow: false, Who: "terminal"})
			default:
				continue
			}
			break
		}
	}
	return ds, nil
}

// lastTurnError fails the command when the session's last turn ended in
// error, so scripts see it in the exit code.
func lastTurnError(ctx context.Context, log store.Log, id string) error {
	head, err := log.Head(ctx, id)
	if err != nil {
		return err
	}
	from := uint64(1)
	if head > 64 {
		from = head - 63
	}
	evs, err := log.Read(ctx, id, from, 0)
	if err != nil {
		return err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type != engine.EvTurnEnd {
			continue
		}
		var te engine.TurnEnd
		json.Unmarshal(evs[i].Data, &te)
		if te.Reason == engine.ReasonError {
			return fail(exitFailure, "turn %d ended in error: %s (wagent log %s shows the attempts)", te.Turn, te.Error, id)
		}
		return nil
	}
	return nil
}
