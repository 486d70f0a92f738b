package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wagent/wagent/internal/procbox"
)

// Server is one MCP server of a hub: started on first use, shared by the
// sessions of the process, restarted with backoff after it exits. It is
// safe for concurrent use.
type Server struct {
	cfg    Config
	stderr *stderrLog

	mu          sync.Mutex
	cur         *conn         // the live connection, nil when none
	starting    chan struct{} // closed when the start in progress ends
	closed      bool
	failures    int       // starts that failed or servers that died young, in a row
	next        time.Time // no start before then (backoff)
	lastErr     error     // why the last start failed or the server last exited
	restarts    int       // servers started after the first
	everStarted bool
	tools       []*sdk.Tool
	listed      *conn // the connection tools were listed on
	stale       bool  // the server said its tool list changed

	// progress are the calls in flight that asked for progress, by the
	// token their request carried.
	progressMu sync.Mutex
	progress   map[string]func(Progress)
	nextToken  uint64
}

// Progress is a notifications/progress a server sent about a call.
type Progress struct {
	Progress, Total float64 // Total 0: unknown
	Message         string
}

// String is the progress as a person reads it: "3/10 processing", "3
// processing" without a total, "3/10" without a message.
func (p Progress) String() string {
	s := strconv.FormatFloat(p.Progress, 'f', -1, 64)
	if p.Total > 0 {
		s += "/" + strconv.FormatFloat(p.Total, 'f', -1, 64)
	}
	if m := oneLine(p.Message); m != "" {
		s += " " + m
	}
	return s
}

// onProgress hands a notification to the call whose token it carries;
// one for a call that has ended, or was never made, is dropped.
func (s *Server) onProgress(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
	if r == nil || r.Params == nil {
		return
	}
	s.progressMu.Lock()
	f := s.progress[fmt.Sprint(r.Params.ProgressToken)]
	s.progressMu.Unlock()
	if f != nil {
		f(Progress{Progress: r.Params.Progress, Total: r.Params.Total, Message: r.Params.Message})
	}
}

// watchProgress registers f for one call and returns its token and the
// function that unregisters it.
func (s *Server) watchProgress(f func(Progress)) (string, func()) {
	s.progressMu.Lock()
	defer s.progressMu.Unlock()
	s.nextToken++
	tok := "wagent-" + strconv.FormatUint(s.nextToken, 10)
	if s.progress == nil {
		s.progress = map[string]func(Progress){}
	}
	s.progress[tok] = f
	return tok, func() {
		s.progressMu.Lock()
		delete(s.progress, tok)
		s.progressMu.Unlock()
	}
}

// conn is one running server and its session.
type conn struct {
	cs      *sdk.ClientSession
	proc    *process // nil for HTTP
	started time.Time
	// done is closed when the connection ended (the server exited or
	// closed it, or Close).
	done chan struct{}
}

func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Info is what a server said of itself when it started.
type Info struct {
	Name, Version, Protocol string
	Instructions            string
}

func newServer(cfg Config) *Server {
	return &Server{cfg: cfg, stderr: newStderrLog(64 << 10)}
}

// Config returns the server's config.
func (s *Server) Config() Config { return s.cfg }

// Stderr returns the end of what the server wrote to its standard error
// (the last 64 KiB, from the first whole line).
func (s *Server) Stderr() string { return s.stderr.String() }

// Restarts counts the times the server was started again after it exited.
func (s *Server) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// backoff is the wait before the next start after n failures in a row.
func backoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := 250 * time.Millisecond << min(n-1, 7)
	return min(d, 30*time.Second)
}

// running reports whether the server is up or starting.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starting != nil || s.cur != nil && s.cur.alive() || s.closed
}

// Start starts the server if it is not running (waiting out a backoff that
// ends before ctx does) and returns what it said of itself.
func (s *Server) Start(ctx context.Context) (Info, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return Info{}, err
	}
	r := c.cs.InitializeResult()
	in := Info{}
	if r != nil {
		in.Protocol, in.Instructions = r.ProtocolVersion, r.Instructions
		if r.ServerInfo != nil {
			in.Name, in.Version = r.ServerInfo.Name, r.ServerInfo.Version
		}
	}
	return in, nil
}

// connect returns the live connection, starting the server if needed.
func (s *Server) connect(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("mcp server %s: wagent is shutting its servers down", s.cfg.Name)
		}
		if s.cur != nil && s.cur.alive() {
			c := s.cur
			s.mu.Unlock()
			return c, nil
		}
		if s.cur != nil {
			// It died: let its session go, and start another below.
			go s.cur.close(s.cfg.Name)
			s.cur = nil
		}
		if s.starting == nil {
			break
		}
		ch := s.starting
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	wait := time.Until(s.next)
	if dl, ok := ctx.Deadline(); ok && wait > 0 && time.Now().Add(wait).After(dl) {
		err := fmt.Errorf("mcp server %s is not running (%v); it failed %d time(s) in a row and is tried again in %s", s.cfg.Name, s.lastErr, s.failures, wait.Round(time.Millisecond))
		s.mu.Unlock()
		return nil, err
	}
	ch := make(chan struct{})
	s.starting = ch
	first := s.listed == nil && !s.everStarted
	s.mu.Unlock()

	var c *conn
	err := sleepCtx(ctx, wait)
	if err == nil {
		c, err = s.start(ctx)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	close(ch)
	s.starting = nil
	if err != nil {
		if ctx.Err() == nil {
			s.failures++
			s.next = time.Now().Add(backoff(s.failures))
			s.lastErr = err
		}
		return nil, err
	}
	if s.closed {
		go c.close(s.cfg.Name)
		return nil, fmt.Errorf("mcp server %s: wagent is shutting its servers down", s.cfg.Name)
	}
	if !first {
		s.restarts++
	}
	s.everStarted = true
	s.cur = c
	go s.watch(c)
	return c, nil
}

// watch notes when a connection ends, for the backoff: a server that dies
// within 10 s of starting counts as a failure in a row.
func (s *Server) watch(c *conn) {
	<-c.done
	if c.proc != nil {
		// The connection can end first (the server closed stdout, or sent
		// what the SDK cannot read): a server we cannot talk to is ended.
		select {
		case <-c.proc.exited:
		case <-time.After(2 * time.Second):
			c.proc.kill()
			<-c.proc.exited
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != c {
		return
	}
	why := errors.New("it closed the connection")
	if c.proc != nil {
		why = c.proc.exitError(s.stderr)
	}
	s.lastErr = why
	if time.Since(c.started) < 10*time.Second {
		s.failures++
	} else {
		s.failures = 1
	}
	s.next = time.Now().Add(backoff(s.failures - 1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start runs the server and initializes the session, within the start
// timeout. Its errors are one line naming the server, saying why and what
// to do.
func (s *Server) start(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.startTimeout())
	defer cancel()
	c := &conn{started: time.Now(), done: make(chan struct{})}
	client := sdk.NewClient(&sdk.Implementation{Name: "wagent", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler:      func(context.Context, *sdk.ToolListChangedRequest) { s.toolsChanged(c) },
		ProgressNotificationHandler: s.onProgress,
	})
	var t sdk.Transport
	if s.cfg.URL != "" {
		t = &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &http.Client{Transport: headers{s.cfg.Headers}}, MaxRetries: -1}
	} else {
		p, err := spawn(&s.cfg, s.stderr)
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: %v", s.cfg.Name, err)
		}
		c.proc = p
		t = &sdk.IOTransport{Reader: p.stdout, Writer: p.stdin}
	}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, s.startError(ctx, c, err)
	}
	c.cs = cs
	go func() {
		if c.proc != nil {
			select {
			case <-c.proc.exited:
			case <-waitDone(cs):
			}
		} else {
			<-waitDone(cs)
		}
		close(c.done)
	}()
	return c, nil
}

func waitDone(cs *sdk.ClientSession) <-chan struct{} {
	ch := make(chan struct{})
	go func() { cs.Wait(); close(ch) }()
	return ch
}

// startError explains a failed start: the process exited (with its code
// and last stderr line), initialize timed out, the URL did not answer, or
// the server's protocol version is one the SDK refuses.
func (s *Server) startError(ctx context.Context, c *conn, err error) error {
	name := s.cfg.Name
	msg := err.Error()
	exited := false
	if c.proc != nil {
		// The process may be exiting on its own: give it a moment to say
		// how, unless the start timed out (closing its stdin ends it).
		if ctx.Err() == nil {
			select {
			case <-c.proc.exited:
			case <-time.After(500 * time.Millisecond):
			}
		}
		select {
		case <-c.proc.exited:
			exited = true
		default:
		}
		c.proc.kill()
	}
	// Read stderr only now: a process that exited has had all it wrote
	// copied (Wait returns after the copy), so its last line is its last.
	last := ""
	if l := s.stderr.LastLine(); l != "" {
		last = " (its last stderr line: " + l + ")"
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("mcp server %s timed out after %s during initialize%s: check that the command is an MCP server speaking on stdio (or the url an MCP endpoint)", name, s.cfg.startTimeout(), last)
	case strings.Contains(msg, "unsupported protocol version"):
		return fmt.Errorf("mcp server %s speaks a protocol version this wagent does not support (%s): upgrade the server or wagent", name, oneLine(msg))
	case exited:
		return fmt.Errorf("mcp server %s %s during initialize%s: check its command, arguments and env in the pipeline", name, c.proc.status(), last)
	case s.cfg.URL != "" && isDialError(err):
		return fmt.Errorf("mcp server %s does not answer at %s (%s): start it, or fix url: in the pipeline", name, s.cfg.URL, oneLine(msg))
	}
	return fmt.Errorf("mcp server %s failed to start: %s%s", name, oneLine(msg), last)
}

func isDialError(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// toolsChanged: the server said its tool list changed; the next step
// lists it again.
func (s *Server) toolsChanged(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listed == c {
		s.stale = true
	}
}

// Tools returns the server's tools, starting it if needed. The list is
// kept until the server says it changed or the server is restarted.
func (s *Server) Tools(ctx context.Context) ([]*sdk.Tool, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.listed == c && !s.stale {
		t := s.tools
		s.mu.Unlock()
		return t, nil
	}
	s.stale = false
	s.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	defer cancel()
	var tools []*sdk.Tool
	for t, err := range c.cs.Tools(lctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: listing its tools: %s", s.cfg.Name, oneLine(err.Error()))
		}
		tools = append(tools, t)
	}
	s.mu.Lock()
	s.tools, s.listed = tools, c
	s.mu.Unlock()
	return tools, nil
}

// CallError is why a call got no result from the server.
type CallError struct {
	// Sent: the request reached the server (it may have acted on it).
	Sent bool
	// Exited: the server died while the call was in flight.
	Exited bool
	Err    error
}

func (e *CallError) Error() string { return e.Err.Error() }
func (e *CallError) Unwrap() error { return e.Err }

// Call sends one tools/call and waits for its result or ctx. When ctx
// ends first the SDK sends notifications/cancelled and the server keeps
// running. When rerun is set (the tool is idempotent) and the server dies
// with the call in flight, the call is sent once more to the restarted
// server.
func (s *Server) Call(ctx context.Context, tool string, args json.RawMessage, rerun bool) (*sdk.CallToolResult, error) {
	return s.CallWithProgress(ctx, tool, args, rerun, nil)
}

// CallWithProgress is Call that, with progress set, sends the request a
// progress token and hands progress the server's notifications/progress
// about the call while it runs.
func (s *Server) CallWithProgress(ctx context.Context, tool string, args json.RawMessage, rerun bool, progress func(Progress)) (*sdk.CallToolResult, error) {
	var token string
	if progress != nil {
		var stop func()
		token, stop = s.watchProgress(progress)
		defer stop()
	}
	var died error // why the first attempt got no result
	for attempt := 0; ; attempt++ {
		c, err := s.connect(ctx)
		if err != nil {
			if died != nil {
				return nil, &CallError{Sent: true, Exited: true, Err: fmt.Errorf("%v; restarted to run it again (it is idempotent), but %v", died, err)}
			}
			return nil, &CallError{Err: err}
		}
		var a any = map[string]any{}
		if len(args) > 0 && string(args) != "null" {
			a = args
		}
		params := &sdk.CallToolParams{Name: tool, Arguments: a}
		if token != "" {
			params.SetProgressToken(token)
		}
		res, err := c.cs.CallTool(ctx, params)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, &CallError{Sent: true, Err: err}
		}
		if errors.Is(err, sdk.ErrConnectionClosed) || !c.alive() || waitEnded(c, 200*time.Millisecond) {
			why := errors.New("it closed the connection")
			if c.proc != nil {
				<-c.proc.exited
				why = c.proc.exitError(s.stderr)
			}
			err := fmt.Errorf("mcp server %s %s", s.cfg.Name, why)
			if rerun && attempt == 0 {
				died = err
				continue
			}
			if died != nil {
				err = fmt.Errorf("%v, and again when it was run once more (it is idempotent): %s", died, why)
			}
			return nil, &CallError{Sent: true, Exited: true, Err: err}
		}
		// A JSON-RPC error: the server answered, with an error.
		return nil, &CallError{Sent: true, Err: fmt.Errorf("mcp server %s refused the call: %s", s.cfg.Name, oneLine(err.Error()))}
	}
}

// waitEnded reports whether the connection ends within d: an error from a
// call races the process's exit.
func waitEnded(c *conn, d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

// Close ends the server: its standard input is closed, then it is sent
// SIGTERM and SIGKILL (its whole process group) if it does not exit.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c != nil {
		c.close(s.cfg.Name)
	}
}

func (c *conn) close(name string) {
	if c.cs != nil {
		// Closing the session closes the server's stdin and waits for it
		// to go; a stdio server that lingers is stopped below.
		done := make(chan struct{})
		go func() { c.cs.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(500 * time.Millisecond):
		}
	}
	if c.proc != nil {
		c.proc.stop()
	}
}

// headers adds the configured headers to every request.
type headers struct{ h map[string]string }

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.h {
			r.Header.Set(k, v)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// process is a running stdio server, in a process box
// (internal/procbox): whatever it starts, through a wrapper (sh -c, npx)
// or by leaving its group (setsid), ends with it, when it is stopped and
// when wagent dies, even by SIGKILL; and it sees none of wagent's
// processes.
type process struct {
	box    *procbox.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	exited chan struct{}
	state  procbox.State
	err    error // from Wait, once exited is closed
}

// spawn starts a stdio server in a box. Its environment is built from
// nothing: the basics (PATH, HOME, LANG, TERM, TMPDIR) and the entry's
// env; never the rest of wagent's, where the API keys are.
func spawn(cfg *Config, stderr *stderrLog) (*process, error) {
	path, err := cfg.lookPath()
	if err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	env := procbox.BasicEnv()
	for k, v := range cfg.Env {
		env = append(env, k+"="+v)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	box := &procbox.Cmd{Spec: procbox.Spec{Path: path, Args: append([]string{cfg.Command[0]}, cfg.Command[1:]...), Dir: dir, Env: env},
		Stdin: inR, Stdout: outW, Stderr: stderr}
	err = box.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting %s: %v", cfg.Command[0], err)
	}
	p := &process{box: box, stdin: inW, stdout: outR, exited: make(chan struct{})}
	go func() {
		p.state, p.err = box.Wait()
		close(p.exited)
	}()
	return p, nil
}

// status says how the process ended.
func (p *process) status() string {
	if p.err != nil {
		return "ended: " + p.err.Error()
	}
	return p.state.String()
}

// exitError says how the process ended, with its last stderr line.
func (p *process) exitError(stderr *stderrLog) error {
	how := p.status()
	if l := stderr.LastLine(); l != "" {
		how += "; its last stderr line: " + l
	}
	return errors.New(how)
}

// kill ends the server and everything it started, at once.
func (p *process) kill() { p.box.Kill() }

// stop ends the process gently: standard input is closed (an MCP stdio
// server exits on that), then SIGTERM, then SIGKILL.
func (p *process) stop() {
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(500 * time.Millisecond):
		p.box.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(2 * time.Second):
			p.kill()
			<-p.exited
		}
	}
	// Whatever the server started and left behind goes with it.
	p.kill()
}
