package app

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/tools/mcp"
	"github.com/wagent/wagent/wasmhost"
	"github.com/wagent/wagent/worker"
)

// Options configure a Node. Log is required; everything else has a
// default.
type Options struct {
	// Log is the store the node holds. The node does not close it
	// unless CloseLog is set. Without a Log, OpenLog opens one (closed by
	// Close) once the runtime has started loading the preload, so that
	// the two overlap.
	Log      store.Log
	CloseLog bool
	OpenLog  func() (store.Log, error)

	// Getenv is the node's environment (default os.Getenv): the
	// variables settings name for API keys, *_BASE_URL, WAGENT_MODEL,
	// WAGENT_PROJECT_ROOTS, WAGENT_TRUSTED_BASE_URLS, WAGENT_SKILLS.
	Getenv func(string) string
	// Warn receives one-line warnings (a session's, the wasm runtime's).
	Warn func(msg string)
	// Progress, if set, is shown while a pipeline takes a noticeable time
	// to load (compiling on a cold cache).
	Progress func() Progress

	// Drive says this node runs sessions: it loads their pipelines and
	// makes their providers. Without it, it records and reads only.
	Drive bool
	// Wake, if set, means the sessions are driven elsewhere (workers
	// sharing the store): the node records what clients send but never
	// runs a session, and calls Wake after each change that needs a
	// drive, once it is durable. Interrupt is called after a
	// cancellation is recorded, to stop a drive in progress elsewhere.
	Wake, Interrupt func(ctx context.Context, session string) error
	// SharedLog says others may write the log (a NATS store): no
	// principal a session's settings record is believed, and every
	// session is opened as a worker's (Policy(Worker)).
	SharedLog bool
	// Exposed says remote clients may reach the node (an API served
	// over TCP): a session whose settings record no principal (written
	// before principals were) is then opened as a remote client's.
	Exposed bool

	// Config is the node's own config file (profiles, defaults, base
	// URLs it trusts); nil for none.
	Config *Config
	// Policy says what each principal may do (default DefaultPolicy).
	Policy func(Principal) Policy
	// ProjectRoots are the folders restricted principals' files may lie
	// under (default: $WAGENT_PROJECT_ROOTS).
	ProjectRoots []string
	// PipelinesDir, for a worker, is where the sessions' pipeline and
	// script files are looked up by file name, whatever path they
	// recorded.
	PipelinesDir string
	// Pipelines are pipelines from bytes, by name; a session's settings
	// name one with Pipeline: NAME. More can be added (AddPipeline).
	Pipelines map[string]PipelineSource
	// Providers adds provider factories by name to openai, anthropic and
	// script.
	Providers map[string]ProviderFactory

	// Runtime is the wasm runtime pipelines load in; nil starts one
	// (with RuntimeOptions, closed by Close) when Drive is set. Preload
	// is a module to load at once in the background (the built-ins
	// bundle the first session will need); nil for the core bundle.
	Runtime        *wasmhost.Runtime
	RuntimeOptions []wasmhost.Option
	Preload        []byte

	// Base is the engine config every session starts from (durability,
	// clock, limits); the node fills in the rest.
	Base engine.Config
	// Resolve, if set, replaces the settings-based resolution (tests, and
	// embedders that build configs in code). It may read Secret. With it,
	// Prepare (if set) checks creates and CheckSettings imports; without
	// them, settings are recorded as given and imports unchecked.
	Resolve       engine.Resolver
	Prepare       func(ctx context.Context, p Principal, req Request) (event.SessionCreated, error)
	CheckSettings event.SettingsCheck
}

// PipelineSource is a pipeline from bytes: its YAML and the modules its
// entries name with use: (by that name), so an embedder can load a
// tenant's uploaded op without a file.
type PipelineSource struct {
	YAML []byte
	// Dir resolves relative paths the YAML names (mounts); default none.
	Dir     string
	Modules map[string][]byte
}

// Progress shows that a pipeline is loading.
type Progress interface {
	Loading(what string)
	Done()
}

// SecretAPIKey names the secret a client hands over for the provider.
const SecretAPIKey = "api_key"

// Node is the application: one store's sessions, resolved from their
// recorded settings into pipelines and providers, driven here or by
// workers, for principals who may each do what their policy says. The
// CLI, the API server, workers and embedders all go through it.
type Node struct {
	o         Options
	getenv    func(string) string
	host      *session.Host
	providers map[string]ProviderFactory
	mcp       *mcp.Hub

	rt      *wasmhost.Runtime
	ownRT   bool
	preload struct {
		done chan struct{}
		mod  *wasmhost.Module
		b    []byte
	}

	mu sync.Mutex
	// pipes caches loaded pipelines by file (or registered name) and
	// folder, with the file's digest.
	pipes map[string]*loadedPipeline
	// sessionPipes is the pipeline each open session was resolved with.
	sessionPipes map[string]*engine.Pipeline
	secrets      map[string]map[string]string
	registered   map[string]PipelineSource
	// created counts sessions per principal, for Policy.MaxSessions
	// (nil until first needed).
	created map[string]int
	// creators caches who created each session (session/created's
	// settings never change), for Policy.OwnSessionsOnly.
	creators map[string]string
}

type loadedPipeline struct {
	digest [32]byte
	l      *pipeline.Loaded
}

// Open makes a node over o.Log. Nothing is written to the store.
func Open(ctx context.Context, o Options) (*Node, error) {
	if o.Log == nil && o.OpenLog == nil {
		return nil, errors.New("app: Options need a Log (or OpenLog)")
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	if o.Policy == nil {
		o.Policy = DefaultPolicy
	}
	if o.ProjectRoots == nil {
		o.ProjectRoots = filepath.SplitList(o.Getenv("WAGENT_PROJECT_ROOTS"))
	}
	n := &Node{o: o, getenv: o.Getenv, mcp: mcp.NewHub(), pipes: map[string]*loadedPipeline{},
		sessionPipes: map[string]*engine.Pipeline{}, secrets: map[string]map[string]string{}, registered: map[string]PipelineSource{},
		providers: map[string]ProviderFactory{}}
	for k, f := range builtinProviders {
		n.providers[k] = f
	}
	for k, f := range o.Providers {
		n.providers[k] = f
	}
	for k, p := range o.Pipelines {
		if err := n.AddPipeline(k, p); err != nil {
			return nil, err
		}
	}
	n.rt = o.Runtime
	if n.rt == nil && o.Drive && o.Resolve == nil {
		opts := append([]wasmhost.Option{wasmhost.WithLogger(slog.New(warnHandler{warn: n.o.Warn}))}, o.RuntimeOptions...)
		rt, err := wasmhost.NewRuntime(ctx, opts...)
		if err != nil {
			return nil, Errorf(Failed, "start the wasm runtime: %v", err)
		}
		n.rt, n.ownRT = rt, true
	}
	n.preload.done = make(chan struct{})
	if n.rt != nil {
		n.preload.b = o.Preload
		if n.preload.b == nil {
			n.preload.b = builtins.CoreModule()
		}
		// The bundle loads (or compiles) while the store opens and the
		// session is read; errors surface again when a pipeline loads it.
		go func() {
			defer close(n.preload.done)
			n.preload.mod, _ = n.rt.Load(context.WithoutCancel(ctx), n.preload.b)
		}()
	} else {
		close(n.preload.done)
	}
	if n.o.Log == nil {
		// Opened while the bundle loads: their work overlaps.
		l, err := o.OpenLog()
		if err != nil {
			<-n.preload.done
			if n.ownRT {
				n.rt.Close(ctx)
			}
			return nil, err
		}
		n.o.Log, n.o.CloseLog = l, true
		o = n.o
	}
	base := o.Base
	base.Log = o.Log
	if base.Warn == nil {
		base.Warn = o.Warn
	}
	if o.Wake != nil || !o.Drive {
		base.Passive = true
	}
	n.host = session.NewHostWith(base, n.resolve)
	return n, nil
}

// Host is the engine host that holds the node's open sessions.
func (n *Node) Host() *session.Host { return n.host }

// Log is the node's store.
func (n *Node) Log() store.Log { return n.o.Log }

// Getenv reads the node's environment.
func (n *Node) Getenv(key string) string { return n.getenv(key) }

// Config is the node's config file (nil for none).
func (n *Node) Config() *Config { return n.o.Config }

// Remote says the node's sessions are driven elsewhere (workers).
func (n *Node) Remote() bool { return n.o.Wake != nil }

// Wake asks a worker to drive the session (a node with Options.Wake).
func (n *Node) Wake(ctx context.Context, id string) error {
	if n.o.Wake == nil {
		return nil
	}
	return n.o.Wake(ctx, id)
}

// Interrupt asks a worker to stop a drive in progress at once.
func (n *Node) Interrupt(ctx context.Context, id string) error {
	if n.o.Interrupt == nil {
		return nil
	}
	return n.o.Interrupt(ctx, id)
}

// Close disposes of every open session (a running turn ends "disposed"),
// ends the pipelines' MCP servers, and closes the runtime the node
// started and the log if CloseLog.
func (n *Node) Close(ctx context.Context) error {
	err := n.host.Close(ctx)
	n.mcp.Close()
	<-n.preload.done
	if n.ownRT {
		err = errors.Join(err, n.rt.Close(ctx))
	}
	if n.o.CloseLog {
		err = errors.Join(err, n.o.Log.Close())
	}
	return err
}

// SessionPipeline is the pipeline the open session id was resolved with.
func (n *Node) SessionPipeline(id string) *engine.Pipeline {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sessionPipes[id]
}

// SwapSecrets sets the in-memory secrets (API keys) of a session, never
// written anywhere, and returns what they replace. A nil map removes
// them.
func (n *Node) SwapSecrets(id string, secrets map[string]string) (prev map[string]string, had bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	prev, had = n.secrets[id]
	if secrets == nil {
		delete(n.secrets, id)
	} else {
		n.secrets[id] = secrets
	}
	return prev, had
}

// Secret returns one of a session's in-memory secrets.
func (n *Node) Secret(id, name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.secrets[id][name]
}

// AddPipeline registers a pipeline from bytes under name, which sessions'
// settings name with Pipeline: NAME. It is parsed now; a name may not
// look like a path.
func (n *Node) AddPipeline(name string, src PipelineSource) error {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return Errorf(Invalid, "pipeline name %q: use a name without / (it is not a file)", name)
	}
	if _, err := pipeline.Parse(src.YAML, name, src.Dir); err != nil {
		return Errorf(Invalid, "pipeline %s: %v", name, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.registered[name] = src
	for key := range n.pipes { // cached by name and folder
		if strings.HasPrefix(key, "mem:"+name+"\x00") {
			delete(n.pipes, key)
		}
	}
	return nil
}

// digest is what a registered pipeline's cache entry is checked against:
// its YAML and its modules (a new upload of an op under the same YAML is
// a new pipeline).
func (src PipelineSource) digest() [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(src.YAML), src.YAML)
	names := make([]string, 0, len(src.Modules))
	for k := range src.Modules {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(src.Modules[k]))
		h.Write(src.Modules[k])
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

// policyOf is the policy a session with settings s is opened under: that
// of the principal who chose them.
func (n *Node) policyOf(s Settings) Policy {
	switch {
	case n.o.SharedLog:
		return n.o.Policy(Worker)
	case s.By == "" && n.o.Exposed:
		return n.o.Policy(Remote)
	case s.By == "":
		return n.o.Policy(Local)
	}
	return n.o.Policy(ParsePrincipal(s.By))
}

// resolve is the host's engine.Resolver: the session's recorded settings
// made into a pipeline and a provider.
func (n *Node) resolve(ctx context.Context, id string, set *event.SessionCreated) (engine.Config, error) {
	var cfg engine.Config
	var err error
	if n.o.Resolve != nil {
		cfg, err = n.o.Resolve(ctx, id, set)
	} else {
		cfg, err = n.Resolve(ctx, id, set)
	}
	if err == nil {
		n.mu.Lock()
		n.sessionPipes[id] = cfg.Pipeline
		n.mu.Unlock()
	}
	return cfg, err
}

// Resolve builds a session's config from its recorded settings: the
// provider (with the key its client handed over, if any) and, for a node
// that drives, the pipeline (loaded once per file contents, shared by the
// sessions that name it). A node that only records or reads needs
// neither.
func (n *Node) Resolve(ctx context.Context, id string, set *event.SessionCreated) (engine.Config, error) {
	if !n.o.Drive {
		return engine.Config{}, nil
	}
	s, err := readSettings(set.Settings, n.knows)
	if err != nil {
		return engine.Config{}, Errorf(Failed, "session %s: its recorded settings cannot be read: %v", id, err)
	}
	s = s.WithDefaults(n.getenv)
	pol := n.policyOf(s)
	if n.o.PipelinesDir != "" {
		if s, err = s.inDir(n.o.PipelinesDir); err != nil {
			return engine.Config{}, Errorf(Failed, "session %s: %v", id, err)
		}
	} else if err := n.sessionFiles(s, pol); err != nil {
		return engine.Config{}, fmt.Errorf("session %s: %w", id, err)
	}
	prov, err := n.buildProvider(s, n.Secret(id, SecretAPIKey), pol)
	if err != nil {
		return engine.Config{}, err
	}
	l, err := n.pipeline(ctx, s, pol)
	if err != nil {
		return engine.Config{}, err
	}
	cfg := engine.Config{Pipeline: l.Pipeline, Provider: prov, Model: s.Model}
	if s.System != "" {
		cfg.PromptParts = []event.Contribution{{Source: s.SystemSource, Text: s.System}}
	}
	return cfg, nil
}

// Request is what a principal asks a session to be created (or its
// settings changed) with.
type Request struct {
	// Settings as the client sent them (JSON of Settings); By is
	// ignored: the node records who asked.
	Settings json.RawMessage
	// Secrets are kept in memory for the session (SwapSecrets).
	Secrets map[string]string
	// Profile names a profile of the node's config whose values fill in
	// what Settings leave out.
	Profile   string
	CreatedBy string
	// Change says the request changes an existing session's settings
	// (POST …/settings): it makes no new session, so it does not count
	// against the principal's MaxSessions.
	Change bool
	// Recorded, for a change, are the settings the session records now:
	// what the change keeps of them was chosen by whoever chose them, and
	// is held to that principal's policy too.
	Recorded json.RawMessage
}

// Prepare checks a create's (or a change's) settings before anything is
// written (the provider is known and has what it needs, the pipeline
// loads, the files are ones p may name) and returns what session/created
// records.
//
// Settings a local client sends are whole (it resolved its own config);
// for anyone else, and for a request naming a profile, what they leave
// out comes from the node's config: its profile, its top level.
func (n *Node) Prepare(ctx context.Context, p Principal, req Request) (_ event.SessionCreated, err error) {
	if n.o.Prepare != nil {
		return n.o.Prepare(ctx, p, req)
	}
	if n.o.Resolve != nil {
		return event.SessionCreated{Settings: req.Settings, CreatedBy: req.CreatedBy}, nil
	}
	s, err := readSettings(req.Settings, n.knows)
	if err != nil {
		return event.SessionCreated{}, Errorf(Invalid, "settings: %v", err)
	}
	if req.Profile != "" || p.Kind != KindLocal {
		if s, err = n.withConfig(s, req.Profile); err != nil {
			return event.SessionCreated{}, err
		}
	}
	s = s.WithDefaults(n.getenv)
	s.Version, s.By = SettingsVersion, p.String()
	if err := s.check(n.knows); err != nil {
		return event.SessionCreated{}, err
	}
	pol := n.o.Policy(p)
	if n.o.SharedLog {
		// Workers will open it as theirs: its keys go where theirs may.
		pol = n.o.Policy(Worker)
	}
	if !req.Change {
		// Reserved now, so that creates at once cannot all pass the
		// check before any is counted; given back if this one is refused.
		release, err := n.ReserveSession(ctx, p)
		if err != nil {
			return event.SessionCreated{}, err
		}
		defer func() {
			if err != nil {
				release()
			}
		}()
	}
	// The files are checked here only by a node that will run the
	// session: workers check them against their own project roots (or
	// --pipelines), which this process cannot know.
	if err := n.sessionFiles(s, pol); err != nil && (n.o.Drive || pol.Pipeline != nil) {
		return event.SessionCreated{}, err
	}
	if req.Change {
		if err := n.keptChoices(&s, req.Recorded, p); err != nil {
			return event.SessionCreated{}, err
		}
	}
	if _, err := n.buildProvider(s, req.Secrets[SecretAPIKey], pol); err != nil {
		return event.SessionCreated{}, err
	}
	info := event.SessionCreated{Model: s.Model, CreatedBy: req.CreatedBy}
	if n.o.Wake != nil && s.Pipeline != "" && !n.isRegistered(s.Pipeline) {
		// Workers load it; check here that it reads, so a typo fails now.
		if _, err := pipeline.ParseFile(s.Pipeline); err != nil {
			return event.SessionCreated{}, Errorf(Failed, "%v", err)
		}
	}
	if n.o.Drive && n.o.Wake == nil {
		l, err := n.pipeline(ctx, s, pol)
		if err != nil {
			return event.SessionCreated{}, err
		}
		info.Pipeline = l.Pipeline.Digest()
	}
	info.Settings, _ = json.Marshal(s)
	if info.CreatedBy == "" {
		info.CreatedBy = "wagent"
	}
	return info, nil
}

// CheckImport is the settings check for a log p imports: the settings
// read as every open reads them, and name no principal p could not be
// (an import must not make its sessions trusted as the local user's).
func (n *Node) CheckImport(p Principal) event.SettingsCheck {
	if n.o.Resolve != nil {
		return n.o.CheckSettings
	}
	return func(set *event.SessionCreated) error {
		s, err := readSettings(set.Settings, n.knows)
		if err != nil {
			return err
		}
		if p.Kind != KindLocal && s.By != "" && s.By != p.String() {
			return fmt.Errorf("the settings say they were chosen by %s; an import by %s may only record its own", s.By, p)
		}
		// Even no settings at all: such a session is opened as the local
		// user's, and is no one's for OwnSessionsOnly and MaxSessions.
		if p.Kind != KindLocal && s.By == "" && !n.o.Exposed {
			return fmt.Errorf("the settings name no principal; an import by %s must record its own (by: %q)", p, p.String())
		}
		return nil
	}
}

// keptChoices holds what a change by p keeps of a session's recorded
// settings (its base URL, pipeline, script, folder) to the policy of the
// principal who chose them, when that is not p: the local user changing
// the model of a session a remote client made must not make the remote's
// base URL one the node sends its keys to, nor the remote's folder one
// agents-md reads. A kept folder the chooser may not name is dropped; a
// kept base URL or file is refused.
func (n *Node) keptChoices(s *Settings, recorded json.RawMessage, p Principal) error {
	rec, err := readSettings(recorded, n.knows)
	if err != nil || len(recorded) == 0 || rec.By == p.String() {
		return nil
	}
	pol := n.policyOf(rec)
	by := rec.By
	if by == "" {
		by = "a client before principals were recorded"
	}
	if !pol.AnyBaseURL && s.BaseURL != "" && s.BaseURL == rec.BaseURL && s.ProviderName() != "script" && !n.trustedBaseURL(s.BaseURL) {
		return Errorf(Forbidden, "the session's base URL %s was chosen by %s, and this process sends no key there for it: name another base URL, or add it to WAGENT_TRUSTED_BASE_URLS in this process's environment", s.BaseURL, by)
	}
	if !pol.AnyFiles && s.Dir != "" && s.Dir == rec.Dir {
		s.Dir = underRoots(n.o.ProjectRoots, s.Dir)
	}
	var kept Settings
	if s.Pipeline == rec.Pipeline {
		kept.Pipeline = s.Pipeline
	}
	if s.Script == rec.Script {
		kept.Script = s.Script
	}
	if err := n.sessionFiles(kept, pol); err != nil && (n.o.Drive || n.o.SharedLog || pol.Pipeline != nil) {
		return Errorf(Forbidden, "%v (it was chosen by %s)", err, by)
	}
	return nil
}

// withConfig fills what s leaves out from the node's config: the profile
// named (or the config's default profile), then its top level.
func (n *Node) withConfig(s Settings, profile string) (Settings, error) {
	cfg := n.o.Config
	if cfg == nil {
		if profile != "" {
			return s, Errorf(Invalid, "no profile %q: this process has no config file", profile)
		}
		return s, nil
	}
	src, err := NewSources(cfg, func(string) string { return "" }, nil, profile, "the request's profile")
	if err != nil {
		return s, err
	}
	fill := func(dst *string, key string) {
		if *dst == "" {
			*dst = src.Get(key).Value
		}
	}
	if s.Provider == "" && s.Script == "" {
		fill(&s.Provider, "provider")
	}
	fill(&s.Model, "model")
	fill(&s.BaseURL, "base_url")
	fill(&s.APIKeyEnv, "api_key_env")
	fill(&s.Pipeline, "pipeline")
	if s.System == "" {
		if sys := src.Get("system"); sys.Value != "" {
			if s.System, s.SystemSource, err = SystemPrompt(sys.Value, sys.Source); err != nil {
				return s, err
			}
		}
	}
	return s, nil
}

// isRegistered says whether name is a pipeline registered with the node.
func (n *Node) isRegistered(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.registered[name]
	return ok
}

// configPipeline says whether path is a pipeline the node's config names.
func (n *Node) configPipeline(path string) bool {
	cfg := n.o.Config
	if cfg == nil || path == "" {
		return false
	}
	src := &Sources{getenv: n.getenv, cfg: cfg}
	if v := cfg.Top.Pipeline; v != "" && src.cfgPath("pipeline", v) == path {
		return true
	}
	for _, p := range cfg.Profiles {
		if p.Pipeline != "" && src.cfgPath("pipeline", p.Pipeline) == path {
			return true
		}
	}
	return false
}

// sessionFiles refuses, for a principal that may not read any file, a
// pipeline file or script outside the project roots (registered
// pipelines and the node config's are the node's own): the session's
// creator named the path, and the node would read that file of its
// machine, run what it grants and quote it in errors.
func (n *Node) sessionFiles(s Settings, pol Policy) error {
	if pol.Pipeline != nil && n.isRegistered(s.Pipeline) && !pol.Pipeline(s.Pipeline) {
		return Errorf(Forbidden, "the pipeline %s is not one this principal may use", s.Pipeline)
	}
	if !pol.AnyFiles && s.Pipeline == "" && s.Defaults != nil && len(s.Defaults.Fetch) > 0 {
		// Fetch reaches hosts from this machine, its reads unasked: a
		// restricted principal gets the default pipeline's other parts,
		// not hosts of its choosing.
		return Errorf(Forbidden, "the session's settings grant fetch hosts (defaults.fetch), which only the local user may: leave them out, or name a pipeline this process offers")
	}
	if pol.AnyFiles || n.o.PipelinesDir != "" {
		return nil
	}
	for _, f := range []struct{ what, path string }{{"pipeline", s.Pipeline}, {"script", s.Script}} {
		if f.path == "" || (f.what == "pipeline" && (n.isRegistered(f.path) || n.configPipeline(f.path))) {
			continue
		}
		if underRoots(n.o.ProjectRoots, f.path) == "" {
			return Errorf(Forbidden, "the session's %s %s is not under this process's WAGENT_PROJECT_ROOTS: a process that runs sessions others create reads their files only there (set it in this process's environment, or start a worker with --pipelines DIR)", f.what, f.path)
		}
	}
	return nil
}

// inDir returns the settings with their pipeline and script looked up by
// file name in dir: a worker with --pipelines DIR runs what its folder
// holds, whatever path the session's creator recorded. A recorded path
// whose last element is no file name (.., ., /) is refused: joined to dir
// it would name dir or its parent.
func (s Settings) inDir(dir string) (Settings, error) {
	for _, f := range []struct {
		what string
		p    *string
	}{{"pipeline", &s.Pipeline}, {"script", &s.Script}} {
		if *f.p == "" {
			continue
		}
		base := filepath.Base(*f.p)
		if base == "." || base == ".." || base == string(filepath.Separator) {
			return s, fmt.Errorf("the session's %s %q names no file to look up in --pipelines %s", f.what, *f.p, dir)
		}
		*f.p = filepath.Join(dir, base)
	}
	return s, nil
}

// pipeline loads the settings' pipeline, or returns it loaded already.
func (n *Node) pipeline(ctx context.Context, s Settings, pol Policy) (*pipeline.Loaded, error) {
	// Every load checks the files, whatever its caller checked: a
	// pipeline file grants mounts of its own.
	if n.o.PipelinesDir == "" {
		if err := n.sessionFiles(s, pol); err != nil {
			return nil, err
		}
	}
	if !pol.AnyFiles {
		// The session's creator recorded its folder, which agents-md
		// would mount and read: for a restricted principal, only a folder
		// under the project roots.
		s.Dir = underRoots(n.o.ProjectRoots, s.Dir)
		if s.Pipeline == "" && s.Defaults != nil && len(s.Defaults.Fetch) > 0 {
			return nil, Errorf(Forbidden, "the session's settings grant fetch hosts (defaults.fetch), which only the local user may")
		}
	}
	var digest [32]byte
	var spec *pipeline.Spec
	n.mu.Lock()
	src, registered := n.registered[s.Pipeline]
	n.mu.Unlock()
	key := s.Pipeline + "\x00" + s.Dir // agents-md, files and shell mount the folder
	if s.Pipeline == "" && s.Defaults != nil {
		b, _ := json.Marshal(s.Defaults)
		key += "\x00" + string(b)
	}
	switch {
	case registered:
		key = "mem:" + key
		digest = src.digest()
	case s.Pipeline != "":
		b, err := os.ReadFile(s.Pipeline)
		if err != nil {
			return nil, Errorf(Failed, "pipeline: %v", err)
		}
		digest = sha256.Sum256(b)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if lp, ok := n.pipes[key]; ok && lp.digest == digest {
		return lp.l, nil
	}
	var err error
	switch {
	case registered:
		if spec, err = pipeline.Parse(src.YAML, s.Pipeline, src.Dir); err != nil {
			return nil, Errorf(Failed, "pipeline %s: %v", s.Pipeline, err)
		}
		for i := range spec.Ops {
			if b, ok := src.Modules[spec.Ops[i].Use]; ok {
				spec.Ops[i].Module = b
			}
		}
	case s.Pipeline != "":
		if spec, err = pipeline.ParseFile(s.Pipeline); err != nil {
			return nil, Errorf(Failed, "%v", err)
		}
		grantProject(spec, s.Dir)
	default:
		spec = s.DefaultPipeline(n.getenv)
	}
	l, err := n.build(ctx, spec)
	if err != nil {
		return nil, err
	}
	n.pipes[key] = &loadedPipeline{digest: digest, l: l}
	return l, nil
}

// build loads a pipeline, showing progress when modules take a while to
// compile (a cold cache, not a warm one).
func (n *Node) build(ctx context.Context, spec *pipeline.Spec) (*pipeline.Loaded, error) {
	if n.rt == nil {
		return nil, Errorf(Failed, "this node does not run sessions (Options.Drive is not set)")
	}
	var progress Progress = nopProgress{}
	if n.o.Progress != nil {
		progress = n.o.Progress()
	}
	current, shown := "the built-in operations", false
	var mu sync.Mutex
	show := time.AfterFunc(300*time.Millisecond, func() {
		mu.Lock()
		defer mu.Unlock()
		progress.Loading(current)
		shown = true
	})
	<-n.preload.done
	var loaded map[*byte]*wasmhost.Module
	if n.preload.mod != nil {
		loaded = map[*byte]*wasmhost.Module{&n.preload.b[0]: n.preload.mod}
	}
	l, err := spec.Build(ctx, pipeline.Options{Runtime: n.rt, Builtins: builtins.Bundle(), MCP: n.mcp, Loaded: loaded, Progress: func(use string) {
		mu.Lock()
		defer mu.Unlock()
		current = use
		if shown {
			progress.Loading(use)
		}
	}})
	show.Stop()
	mu.Lock()
	progress.Done()
	mu.Unlock()
	if err != nil {
		return nil, Errorf(Failed, "%v", err)
	}
	return l, nil
}

type nopProgress struct{}

func (nopProgress) Loading(string) {}
func (nopProgress) Done()          {}

// grantProject gives a pipeline file's builtin:agents-md entry that
// names no mount the session's working directory, read-only, which is
// what the op is for.
func grantProject(spec *pipeline.Spec, dir string) {
	if dir == "" || strings.Contains(dir, ":") { // no mount can name it (HOST:GUEST:MODE)
		return
	}
	for i := range spec.Ops {
		if o := &spec.Ops[i]; o.Use == pipeline.BuiltinPrefix+"agents-md" && len(o.Mounts) == 0 {
			o.Mounts = []string{dir + ":/project:ro"}
		}
	}
}

// ReserveSession counts a new session of p (a create, a fork, an
// import) against its Policy.MaxSessions, refusing it (Forbidden) beyond
// the limit. The check and the count are one step, so sessions made at
// once cannot all pass the check before any is counted. release gives
// the reservation back, for a session that was then not made; a session
// made and then failing still counts (the count errs on the safe side).
func (n *Node) ReserveSession(ctx context.Context, p Principal) (release func(), err error) {
	pol := n.o.Policy(p)
	if pol.MaxSessions <= 0 {
		return func() {}, nil
	}
	n.mu.Lock()
	counted := n.created != nil
	n.mu.Unlock()
	if !counted {
		// Once per node: who created each session, from its settings.
		counts := map[string]int{}
		ids, err := n.o.Log.Sessions(ctx)
		if err != nil {
			return nil, Errorf(Failed, "count sessions: %v", err)
		}
		for _, id := range ids {
			evs, err := n.o.Log.Read(ctx, id, 1, 1)
			if err != nil || len(evs) == 0 {
				continue
			}
			var c event.SessionCreated
			if json.Unmarshal(evs[0].Data, &c) == nil {
				if s, err := ReadSettings(c.Settings); err == nil && s.By != "" {
					counts[s.By]++
				}
			}
		}
		n.mu.Lock()
		if n.created == nil {
			n.created = counts
		}
		n.mu.Unlock()
	}
	key := p.String()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.created[key] >= pol.MaxSessions {
		return nil, Errorf(Forbidden, "%s has created %d sessions, its limit on this node", p, pol.MaxSessions)
	}
	n.created[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.created[key]--
		})
	}, nil
}

// knows says whether name is a provider registered with the node.
func (n *Node) knows(name string) bool {
	_, ok := n.providers[name]
	return ok
}

// Forget drops what the node remembers of who created the session id:
// call it once the session is deleted, so that a session made later
// under the same id is its new creator's alone.
func (n *Node) Forget(id string) {
	n.mu.Lock()
	delete(n.creators, id)
	n.mu.Unlock()
}

// MayAccess says whether p may see and act on the session id: always,
// unless p's policy limits it to its own sessions; a session that does
// not exist (yet) is p's to create.
func (n *Node) MayAccess(ctx context.Context, p Principal, id string) bool {
	if !n.o.Policy(p).OwnSessionsOnly {
		return true
	}
	n.mu.Lock()
	by, ok := n.creators[id]
	n.mu.Unlock()
	if !ok {
		evs, err := n.o.Log.Read(ctx, id, 1, 1)
		if err != nil || len(evs) == 0 {
			return errors.Is(err, store.ErrNotFound) || (err == nil && len(evs) == 0)
		}
		var c event.SessionCreated
		if json.Unmarshal(evs[0].Data, &c) == nil {
			if s, err := readSettings(c.Settings, n.knows); err == nil {
				by = s.By
			}
		}
		n.mu.Lock()
		if n.creators == nil {
			n.creators = map[string]string{}
		}
		n.creators[id] = by
		n.mu.Unlock()
	}
	return by == p.String()
}

// Create prepares and creates the session id for p (see Prepare), with
// the request's secrets kept in memory for it.
func (n *Node) Create(ctx context.Context, p Principal, id string, req Request) (*session.Session, error) {
	info, err := n.Prepare(ctx, p, req)
	if err != nil {
		return nil, err
	}
	if len(req.Secrets) > 0 {
		n.SwapSecrets(id, req.Secrets)
	}
	return n.host.Create(ctx, id, info)
}

// Session opens the session id (ErrNotFound from package store if there
// is none) with its recorded settings.
func (n *Node) Session(ctx context.Context, id string) (*session.Session, error) {
	return n.host.Open(ctx, id)
}

func (n *Node) providerNames() []string {
	var names []string
	for k := range n.providers {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Worker binds a worker of a shared store to the node: it drives the
// sessions it takes with the node's resolution (opts.Log and
// opts.Resolve are the node's).
func (n *Node) Worker(opts worker.Options) (*worker.Worker, error) {
	opts.Log = n.o.Log
	opts.Resolve = n.resolve
	if opts.Base.Warn == nil {
		opts.Base = n.o.Base
		if opts.Base.Warn == nil {
			opts.Base.Warn = n.o.Warn
		}
	}
	return worker.New(opts)
}

// warnHandler passes the wasm runtime's warnings on as one line each.
type warnHandler struct {
	warn  func(string)
	attrs []slog.Attr
}

func (h warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h warnHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("warning: " + r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.warn(oneLine(b.String()))
	return nil
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{warn: h.warn, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h warnHandler) WithGroup(string) slog.Handler { return h }

// SkillsDir is the default pipeline's skills folder: $WAGENT_SKILLS, else
// "skills" in wagent's data directory.
func SkillsDir(getenv func(string) string) string {
	if d := getenv("WAGENT_SKILLS"); d != "" {
		return d
	}
	if d := DataDir(getenv); d != "" {
		return filepath.Join(d, "skills")
	}
	return ""
}

// DataDir is wagent's data directory: $WAGENT_HOME, else
// $XDG_DATA_HOME/wagent, else ~/.local/share/wagent (on macOS
// ~/Library/Application Support/wagent); "" when there is no home.
func DataDir(getenv func(string) string) string {
	if h := getenv("WAGENT_HOME"); h != "" {
		return h
	}
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "wagent")
	}
	home := getenv("HOME")
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	if home == "" {
		return ""
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "wagent")
	}
	return filepath.Join(home, ".local", "share", "wagent")
}
