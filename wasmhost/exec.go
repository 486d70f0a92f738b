package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/confine"
	"github.com/wagent/wagent/internal/procbox"
)

// Commands (ABI 1.2, exec). A command runs only when its argv matches one
// of the op's exec grants (a shell only under a grant that says shell), in
// a directory inside one of the op's mounts, with the environment the
// grant names and nothing inherited, bounded by the grant's timeout and
// the call's deadline, its output kept to the grant's size; and, unless
// the grant says unconfined, confined with Landlock to the op's mounts,
// the system's programs and libraries and the grant's own paths. It runs
// in a process box (internal/procbox): everything it starts ends with it,
// when it exits, is stopped or the host dies, and its /proc shows the box
// only. Where the system gives no whole box, the grant records so and the
// op's watcher is told once.

// defaultPath is a command's PATH unless its grant sets one: the usual
// system directories, never the host's own PATH.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// systemRead is what every confined command may read and execute: the
// programs, libraries and the few files of /etc that programs need to
// start (the dynamic loader's cache, users and groups, time zones,
// certificates, Debian's alternatives). Paths that do not exist are
// skipped.
var systemRead = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/resolv.conf",
	"/etc/localtime", "/etc/timezone", "/etc/ssl", "/etc/ca-certificates", "/etc/pki",
	"/etc/gitconfig", "/etc/mime.types", "/etc/os-release",
	"/dev/urandom", "/dev/random",
	// Landlock keeps a confined process out of other processes' /proc
	// entries (they are outside its domain), so its own are what it sees.
	"/proc",
}

// systemWrite is what every confined command may write.
var systemWrite = []string{"/dev/null", "/dev/zero", "/dev/full"}

// outputCeiling is how much a command may write, both streams together,
// before it is killed: far more than is kept, so that a test run's summary
// at the end survives, but not gigabytes.
func outputCeiling(keep int64) int64 { return max(64<<20, 16*keep) }

func (o *Op) doExec(ctx context.Context, req *hostabi.ExecRequest, tell func(string, ...any)) hostabi.ExecResponse {
	what := strings.Join(quoteArgs(req.Argv), " ")
	if req.Shell != "" {
		what = "sh -c " + quoteArg(req.Shell)
	}
	what = clip(what, quotedBytes)
	fail := func(code, format string, args ...any) hostabi.ExecResponse {
		msg := fmt.Sprintf(format, args...)
		tell("exec %s refused: %s", what, msg)
		return hostabi.ExecResponse{ExitCode: -1, Code: code, Error: "exec: " + clipText(msg)}
	}
	if len(o.caps.exec) == 0 {
		return fail(hostabi.CapNotCapable, "op %s may run no commands (its manifest requests none, or the pipeline grants none)", o.man.Name)
	}
	if (len(req.Argv) == 0) == (req.Shell == "") {
		return fail(hostabi.CapBadRequest, "give argv (a command and its arguments) or shell (a command line), not both or neither")
	}
	for _, a := range append(req.Argv, req.Shell, req.Stdin) {
		if strings.IndexByte(a, 0) >= 0 {
			return fail(hostabi.CapBadRequest, "an argument holds a NUL byte")
		}
	}
	x := o.execGrantFor(req)
	if x == nil {
		return fail(hostabi.CapNotGranted, "%s matches no exec grant of op %s (granted: %s)", what, o.man.Name, o.grantedCommands())
	}
	dir, err := o.commandDir(req.Dir)
	if err != nil {
		return fail(hostabi.CapBadDir, "%v", err)
	}
	scratch, err := os.MkdirTemp("", "wagent-exec-")
	if err != nil {
		return fail(hostabi.CapStartFailed, "a scratch directory: %v", err)
	}
	defer os.RemoveAll(scratch)
	// Built from nothing: the host's environment (its API keys above all)
	// reaches a command only through what the grant names.
	env := []string{"PATH=" + defaultPath, "HOME=" + scratch, "TMPDIR=" + scratch, "LANG=C.UTF-8", "TERM=dumb"}
	env = mergeEnv(env, x.env)
	argv := req.Argv
	if req.Shell != "" {
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	bin, err := lookPath(argv[0], dir, envValue(env, "PATH"))
	if err != nil {
		return fail(hostabi.CapNotFound, "%v", err)
	}
	timeout := x.Timeout
	if req.TimeoutMS > 0 {
		timeout = min(timeout, time.Duration(req.TimeoutMS)*time.Millisecond)
	}
	var policy *confine.Policy
	if !x.Unconfined {
		policy = &confine.Policy{Read: append(append([]string(nil), systemRead...), x.read...), Write: append(append([]string{scratch}, systemWrite...), x.write...), Network: x.Network}
		if bin != "" && !strings.HasPrefix(bin, dir) {
			policy.Read = append(policy.Read, bin)
		}
		for _, m := range o.caps.mounts {
			if m.Write {
				policy.Write = append(policy.Write, m.HostDir)
			} else {
				policy.Read = append(policy.Read, m.HostDir)
			}
		}
	}
	if !x.enforce.Full() && !x.told.Swap(true) {
		tell("exec grant %s of op %s is not fully enforced on this system: %s", quoteArg(x.Cmd), o.man.Name, strings.TrimPrefix(x.enforce.String(), "partial: "))
	}
	res := run(ctx, runSpec{bin: bin, argv: argv, dir: dir, env: env, stdin: req.Stdin, timeout: timeout, keep: x.OutputBytes, policy: policy})
	res.Confinement = x.confine
	if res.Code != "" {
		tell("exec %s in %s failed: %s", what, o.guestDir(dir), res.Error)
		return res
	}
	end := fmt.Sprintf("exit %d", res.ExitCode)
	if res.Killed != "" {
		end = "killed (" + res.Killed + ")"
	}
	tell("exec %s in %s → %s (%d ms, %d bytes out, %d bytes err, confinement: %s)", what, o.guestDir(dir), end, res.DurationMS, res.StdoutBytes, res.StderrBytes, x.confine)
	return res
}

// execGrantFor returns the first grant the request fits.
func (o *Op) execGrantFor(req *hostabi.ExecRequest) *execGrant {
	for _, x := range o.caps.exec {
		switch {
		case req.Shell != "" && x.Shell && hostabi.MatchShellLine(x.Cmd, req.Shell):
			return x
		case req.Shell == "" && !x.Shell && x.pattern.Match(req.Argv):
			return x
		}
	}
	return nil
}

func (o *Op) grantedCommands() string {
	var s []string
	for _, x := range o.caps.exec {
		if x.Shell {
			s = append(s, "sh -c "+quoteArg(x.Cmd))
		} else {
			s = append(s, x.Cmd)
		}
	}
	return strings.Join(s, "; ")
}

// commandDir maps a guest directory to the host directory inside one of
// the op's mounts, refusing one that is not (through .. or a link).
func (o *Op) commandDir(guest string) (string, error) {
	if guest == "" {
		guest = o.caps.mounts[0].GuestPath
	}
	if !path.IsAbs(guest) {
		guest = path.Join(o.caps.mounts[0].GuestPath, guest)
	}
	guest = path.Clean(guest)
	for _, m := range o.caps.mounts {
		rel, ok := strings.CutPrefix(guest, m.GuestPath)
		if !ok || rel != "" && rel[0] != '/' {
			continue
		}
		rel = strings.TrimPrefix(rel, "/")
		if rel == "" {
			rel = "."
		}
		root, err := os.OpenRoot(m.HostDir)
		if err != nil {
			return "", fmt.Errorf("mount %s: %v", m.GuestPath, err)
		}
		st, err := root.Stat(rel)
		root.Close()
		if err != nil || !st.IsDir() {
			return "", fmt.Errorf("%s is not a directory inside mount %s", guest, m.GuestPath)
		}
		// A link inside the mount that stays inside is fine; the real path
		// must still be under the mount's.
		base, err1 := filepath.EvalSymlinks(m.HostDir)
		real, err2 := filepath.EvalSymlinks(filepath.Join(m.HostDir, filepath.FromSlash(rel)))
		if err1 != nil || err2 != nil || (real != base && !strings.HasPrefix(real, base+string(filepath.Separator))) {
			return "", fmt.Errorf("%s leads out of mount %s", guest, m.GuestPath)
		}
		return real, nil
	}
	var paths []string
	for _, m := range o.caps.mounts {
		paths = append(paths, m.GuestPath)
	}
	return "", fmt.Errorf("%s is not inside a mount of the op (its mounts: %s)", guest, strings.Join(paths, ", "))
}

// guestDir names a host directory as the guest knows it, for the log.
func (o *Op) guestDir(dir string) string {
	for _, m := range o.caps.mounts {
		base, err := filepath.EvalSymlinks(m.HostDir)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(base, dir); err == nil && !strings.HasPrefix(rel, "..") {
			return path.Join(m.GuestPath, filepath.ToSlash(rel))
		}
	}
	return dir
}

func mergeEnv(base, extra []string) []string {
	out := append([]string(nil), base...)
	for _, e := range extra {
		name, _, _ := strings.Cut(e, "=")
		replaced := false
		for i, b := range out {
			if strings.HasPrefix(b, name+"=") {
				out[i], replaced = e, true
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return out
}

func envValue(env []string, name string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds a command the way a shell would with the command's own
// PATH (not the host's); a name with a slash is taken relative to dir.
func lookPath(name, dir, pathList string) (string, error) {
	executable := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if !executable(p) {
			return "", fmt.Errorf("%s is not an executable file", name)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !filepath.IsAbs(d) {
			continue // a relative PATH entry would search the mount
		}
		if p := filepath.Join(d, name); executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not found on the command's PATH (%s)", name, pathList)
}

type runSpec struct {
	bin     string
	argv    []string
	dir     string
	env     []string
	stdin   string
	timeout time.Duration
	keep    int64
	policy  *confine.Policy
}

// run runs one command to its end, or until it is stopped.
func run(ctx context.Context, s runSpec) hostabi.ExecResponse {
	start := time.Now()
	cmd := &procbox.Cmd{Spec: procbox.Spec{Path: s.bin, Args: s.argv, Dir: s.dir, Env: s.env, Policy: s.policy}}
	fail := func(format string, args ...any) hostabi.ExecResponse {
		return hostabi.ExecResponse{ExitCode: -1, Code: hostabi.CapStartFailed, Error: "exec: " + clipText(fmt.Sprintf(format, args...))}
	}
	// Pipes made here, handed over as files: the box's init and the
	// command write to them directly, nothing of os/exec's copying.
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail("%v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fail("%v", err)
	}
	var inW *os.File
	if s.stdin != "" {
		var inR *os.File
		if inR, inW, err = os.Pipe(); err != nil {
			return fail("%v", err)
		}
		cmd.Stdin = inR
		defer inR.Close()
	} else {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			return fail("%v", err)
		}
		cmd.Stdin = devnull
		defer devnull.Close()
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var total atomic.Int64
	tooMuch := make(chan struct{})
	var once sync.Once
	ceiling := outputCeiling(s.keep)
	stdout, stderr := newCapture(s.keep), newCapture(s.keep)
	var readers sync.WaitGroup
	drain := func(r *os.File, c *capture) {
		defer readers.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				c.write(buf[:n])
				if total.Add(int64(n)) > ceiling {
					once.Do(func() { close(tooMuch) })
				}
			}
			if err != nil {
				return
			}
		}
	}
	readers.Add(2)
	go drain(outR, stdout)
	go drain(errR, stderr)
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		readers.Wait()
		return fail("starting %s: %v", s.argv[0], err)
	}
	if inW != nil {
		go func() {
			io.WriteString(inW, s.stdin)
			inW.Close()
		}()
	}
	turnDone, _ := engine.TurnDone(ctx)
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	killed := ""
	select {
	case <-cmd.Done():
	case <-timer.C:
		killed = "timeout"
	case <-ctx.Done():
		killed = "deadline"
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			killed = "canceled"
		}
	case <-turnDone:
		killed = "canceled"
	case <-tooMuch:
		killed = "output"
	}
	if killed != "" {
		cmd.Kill()
	}
	state, waitErr := cmd.Wait()
	// Whatever the command left running goes with it: with a whole box the
	// kernel has ended it already; without one, its process group.
	cmd.Kill()
	// Output still held open by something that left the group (only
	// without a whole box) ends here.
	finished := make(chan struct{})
	go func() { readers.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Second):
		outR.Close()
		errR.Close()
		<-finished
	}
	outR.Close()
	errR.Close()
	res := hostabi.ExecResponse{ExitCode: state.ExitCode, Killed: killed, DurationMS: time.Since(start).Milliseconds()}
	if waitErr != nil && killed == "" {
		res.Code, res.Error = hostabi.CapStartFailed, "exec: "+clipText(waitErr.Error())
	}
	res.Stdout, res.StdoutBytes, res.StdoutCut = stdout.text()
	res.Stderr, res.StderrBytes, res.StderrCut = stderr.text()
	switch killed {
	case "timeout":
		res.Error = fmt.Sprintf("exec: killed after its timeout of %v", s.timeout)
	case "deadline":
		res.Error = "exec: killed at the call's deadline"
	case "canceled":
		res.Error = "exec: killed: the turn was cancelled"
	case "output":
		res.Error = fmt.Sprintf("exec: killed after writing more than %d bytes", ceiling)
	}
	return res
}

// capture keeps the first and the last half of what a stream writes.
type capture struct {
	mu    sync.Mutex
	keep  int64
	head  []byte
	tail  []byte // a ring once full
	next  int    // where the ring writes next
	full  bool
	total int64
}

func newCapture(keep int64) *capture { return &capture{keep: keep} }

func (c *capture) write(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	h := int(c.keep / 2)
	if n := min(h-len(c.head), len(p)); n > 0 {
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	t := int(c.keep) - h
	for len(p) > 0 && t > 0 {
		if !c.full {
			n := min(t-len(c.tail), len(p))
			c.tail = append(c.tail, p[:n]...)
			p = p[n:]
			if len(c.tail) == t {
				c.full = true
			}
			continue
		}
		if len(p) >= t {
			copy(c.tail, p[len(p)-t:])
			c.next, p = 0, nil
			continue
		}
		n := copy(c.tail[c.next:], p)
		c.next = (c.next + n) % t
		p = p[n:]
	}
}

// text returns what was kept, the total written and how many bytes were
// left out (a line marks where).
func (c *capture) text() (string, int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := c.tail
	if c.full && c.next > 0 {
		tail = append(append([]byte(nil), c.tail[c.next:]...), c.tail[:c.next]...)
	}
	cut := c.total - int64(len(c.head)) - int64(len(tail))
	if cut <= 0 {
		return string(c.head) + string(tail), c.total, 0
	}
	head := trimRuneEnd(c.head)
	tail = trimRuneStart(tail)
	cut = c.total - int64(len(head)) - int64(len(tail))
	return string(head) + fmt.Sprintf("\n… [%d bytes cut] …\n", cut) + string(tail), c.total, cut
}

func trimRuneEnd(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size > 1 {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

func trimRuneStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.RuneStart(b[0]) {
			return b
		}
		b = b[1:]
	}
	return b
}

func quoteArgs(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = quoteArg(a)
	}
	return out
}

// quoteArg writes an argument so that the log line reads back as the
// argv: plain when it can be, in single quotes otherwise.
func quoteArg(a string) string {
	if a != "" && !strings.ContainsAny(a, " \t\n'\"\\;&|<>()$`*?[]{}~#") {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
