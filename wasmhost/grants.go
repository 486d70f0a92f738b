package wasmhost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/confine"
	"github.com/wagent/wagent/internal/procbox"
)

// Grants are what a pipeline gives an op. The op gets the capabilities its
// manifest requests that are also granted here, and nothing else; NewOp
// refuses an op that requests something not granted (hostabi/ABI.md §6).
type Grants struct {
	// Mounts are directories; a mount is given only if the manifest
	// requests its guest path, and read-write only if both say so.
	Mounts []Mount
	// HTTP lists the hosts the op may reach through http_request
	// (hostabi.HostPattern syntax: "api.github.com", "127.0.0.1:8080",
	// "*.example.com", "*"). Loopback and private addresses are reached
	// only through a grant that names the host (not a wildcard).
	HTTP []string
	// Exec lists the commands the op may run through exec.
	Exec []ExecGrant
}

// Mount maps a host directory to a path inside the guest.
type Mount struct {
	HostDir   string
	GuestPath string
	// Write makes the mount read-write (ABI 1.2): the guest may create,
	// change, rename and remove files inside it, confined like os.Root.
	Write bool
}

// ExecGrant allows commands matching one pattern.
type ExecGrant struct {
	// Cmd is an argv pattern (hostabi.CommandPattern: "go test **", "git
	// diff *"); with Shell, a command line for sh -c, in which "*"
	// matches any run of characters.
	Cmd string
	// Shell runs the command line under sh -c. Everything a shell does
	// then applies: ; && | $(…) and redirections included, so a "*" in
	// Cmd allows any command at all.
	Shell bool
	// Env is the command's whole environment besides PATH, HOME and
	// TMPDIR (which the host sets: a fixed PATH, a fresh empty directory
	// for the other two): "NAME=VALUE", or "NAME" for the value NAME has
	// in the host's environment when the op is made. Nothing else is
	// inherited.
	Env []string
	// Read and Write are host paths the confined command may read
	// (and execute), or also change, besides the op's mounts (a
	// toolchain's cache, for one). A leading ~/ is the user's home.
	Read, Write []string
	// Timeout bounds one run (default 60 s); the call's deadline bounds
	// it too.
	Timeout time.Duration
	// OutputBytes is how much of stdout, and of stderr, is kept (default
	// 1 MiB each: the first and last halves).
	OutputBytes int64
	// Network leaves the confined command's network alone (TCP and UDP
	// are refused by default).
	Network bool
	// Unconfined runs the command without Landlock, with the user's
	// rights. Without it a command is confined, and an op granted a
	// command on a kernel that cannot confine it is refused at load.
	Unconfined bool
}

// Defaults of an exec grant.
const (
	DefaultExecTimeout     = 60 * time.Second
	DefaultExecOutputBytes = 1 << 20
)

// ParseMount parses a pipeline mount grant "HOST:GUEST", "HOST:GUEST:ro"
// or (ABI 1.2) "HOST:GUEST:rw". A relative HOST is resolved against base
// (the pipeline file's directory).
func ParseMount(base, spec string) (Mount, error) {
	parts := strings.Split(spec, ":")
	write := false
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
		case "rw":
			write = true
		default:
			return Mount{}, fmt.Errorf("mount %q: end it with :ro (read-only, the default) or :rw (read-write)", spec)
		}
	}
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return Mount{}, fmt.Errorf("mount %q: want HOST_DIR:GUEST_PATH[:ro|:rw]", spec)
	}
	host := parts[0]
	if !filepath.IsAbs(host) {
		host = filepath.Join(base, host)
	}
	if err := hostabi.CheckGuestPath(parts[1]); err != nil {
		return Mount{}, fmt.Errorf("mount %q: %v", spec, err)
	}
	return Mount{HostDir: host, GuestPath: parts[1], Write: write}, nil
}

// CanConfine reports whether this host can confine commands (Landlock ABI
// 3 or later); without it only grants that say Unconfined load.
func CanConfine() bool { return confine.Level() >= confine.MinLevel }

// Confinement says what confining a command restricts on this host:
// "landlock v7: files, tcp, signals", or "unavailable".
func Confinement() string { return confine.Describe(false) }

// capabilities is what an op was given: requested ∩ granted, checked and
// parsed once when the op is made.
type capabilities struct {
	mounts []Mount
	http   []hostGrant
	exec   []*execGrant
	// doc is the Granted document the capabilities host function copies.
	doc []byte
}

type hostGrant struct {
	pattern hostabi.HostPattern
	text    string
}

// execGrant is an ExecGrant checked and filled in.
type execGrant struct {
	ExecGrant
	pattern hostabi.CommandPattern // for argv grants
	env     []string               // NAME=VALUE, resolved
	read    []string               // absolute
	write   []string
	confine string // what confinement does ("none" when unconfined)
	// enforce is what the process box gives its commands here.
	enforce procbox.Enforcement
	// told is set once the op's watcher was told what enforce lacks.
	told atomic.Bool
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// grant computes requested ∩ granted for man, refusing with one line an
// op whose request is not granted; with readOnly every mount given is
// read-only (WithReadOnlyMounts).
func grant(man *hostabi.Manifest, g Grants, readOnly bool) (*capabilities, error) {
	c := &capabilities{}
	// Mounts: each requested one must be granted, read-write if asked so,
	// but an optional one may be left out.
	for _, want := range man.Capabilities.Mounts {
		i := slices.IndexFunc(g.Mounts, func(m Mount) bool { return m.GuestPath == want.Path })
		if i < 0 {
			if want.Optional {
				continue // the op works without it (its path does not exist)
			}
			if want.Write {
				return nil, fmt.Errorf("op %s requests the read-write mount %s, which is not granted: grant it (grants: {mounts: [\"DIR:%s:rw\"]}) or leave the op out", man.Name, want.Path, want.Path)
			}
			return nil, fmt.Errorf("op %s requests the read-only mount %s, which is not granted: grant it (grants: {mounts: [\"DIR:%s:ro\"]}) or leave the op out", man.Name, want.Path, want.Path)
		}
		m := g.Mounts[i]
		if want.Write && !m.Write {
			return nil, fmt.Errorf("op %s requests %s read-write, but the pipeline grants it read-only: end the mount with :rw (grants: {mounts: [\"%s:%s:rw\"]}) or leave the op out", man.Name, want.Path, m.HostDir, want.Path)
		}
		m.Write = want.Write && !readOnly // read-only when the op asked for no more
		st, err := os.Stat(m.HostDir)
		if err != nil || !st.IsDir() {
			return nil, fmt.Errorf("op %s: mount %s: %s is not a directory", man.Name, m.GuestPath, m.HostDir)
		}
		c.mounts = append(c.mounts, m)
	}
	slices.SortFunc(c.mounts, func(a, b Mount) int { return strings.Compare(a.GuestPath, b.GuestPath) })

	// HTTP: a named host must be granted as written; "*" takes what is.
	var hosts []hostGrant
	for _, h := range g.HTTP {
		p, err := hostabi.ParseHostPattern(h)
		if err != nil {
			return nil, fmt.Errorf("grants: %v", err)
		}
		hosts = append(hosts, hostGrant{pattern: p, text: p.String()})
	}
	for _, want := range man.Capabilities.HTTP {
		if want == hostabi.AnyHost {
			if len(hosts) == 0 {
				return nil, fmt.Errorf("op %s makes HTTP requests, but the pipeline grants it no host: grant the hosts it may reach (grants: {http: [\"api.example.com\"]}) or leave the op out", man.Name)
			}
			c.http = hosts
			break
		}
		p, _ := hostabi.ParseHostPattern(want) // checked with the manifest
		i := slices.IndexFunc(hosts, func(h hostGrant) bool { return h.text == p.String() })
		if i < 0 {
			return nil, fmt.Errorf("op %s requests HTTP to %s, which is not granted: grant it (grants: {http: [\"%s\"]}) or leave the op out", man.Name, p, p)
		}
		if !slices.ContainsFunc(c.http, func(h hostGrant) bool { return h.text == p.String() }) {
			c.http = append(c.http, hosts[i])
		}
	}

	// Exec: the grants some request covers; a request that covers none
	// is refused.
	var all []*execGrant
	for _, eg := range g.Exec {
		x, err := checkExecGrant(eg)
		if err != nil {
			return nil, err
		}
		all = append(all, x)
	}
	for _, want := range man.Capabilities.Exec {
		req, _ := hostabi.ParseCommandPattern(want) // checked with the manifest
		n := 0
		for _, x := range all {
			if req.Covers(x.argvPattern()) {
				n++
				if !slices.Contains(c.exec, x) {
					c.exec = append(c.exec, x)
				}
			}
		}
		if n == 0 {
			if req.Any() {
				return nil, fmt.Errorf("op %s runs commands, but the pipeline grants it none: grant the commands it may run (grants: {exec: [\"go test ./...\"]}) or leave the op out", man.Name)
			}
			return nil, fmt.Errorf("op %s requests to run %q, which no exec grant allows: grant it (grants: {exec: [%q]}) or leave the op out", man.Name, want, want)
		}
	}
	// Keep the pipeline's order: the first matching grant decides.
	slices.SortFunc(c.exec, func(a, b *execGrant) int { return slices.Index(all, a) - slices.Index(all, b) })
	if len(c.exec) > 0 && len(c.mounts) == 0 {
		return nil, fmt.Errorf("op %s is granted commands but no mount to run them in: commands run inside a mount the op requests and is granted", man.Name)
	}
	doc := hostabi.Granted{}
	for _, m := range c.mounts {
		doc.Mounts = append(doc.Mounts, hostabi.GuestMount{Path: m.GuestPath, Write: m.Write})
	}
	for _, h := range c.http {
		doc.HTTP = append(doc.HTTP, h.text)
	}
	for _, x := range c.exec {
		doc.Exec = append(doc.Exec, hostabi.GrantedCommand{Cmd: x.Cmd, Shell: x.Shell, TimeoutMS: x.Timeout.Milliseconds(), OutputBytes: x.OutputBytes, Confinement: x.confine, Enforcement: x.enforce.String()})
	}
	c.doc = hostabi.AppendGranted(nil, &doc)
	return c, nil
}

// argvPattern is the argv pattern a grant amounts to (sh -c LINE for a
// shell grant), for matching against a manifest's requests.
func (x *execGrant) argvPattern() hostabi.CommandPattern {
	if x.Shell {
		return hostabi.ShellCommandPattern(x.Cmd)
	}
	return x.pattern
}

func checkExecGrant(eg ExecGrant) (*execGrant, error) {
	x := &execGrant{ExecGrant: eg}
	at := fmt.Sprintf("exec grant %q", eg.Cmd)
	if eg.Shell {
		if strings.TrimSpace(eg.Cmd) == "" {
			return nil, fmt.Errorf("%s: a shell grant needs a command line", at)
		}
	} else {
		p, err := hostabi.ParseCommandPattern(eg.Cmd)
		if err != nil {
			return nil, fmt.Errorf("grants: exec %v", strings.TrimPrefix(err.Error(), "command "))
		}
		if !p.Named() {
			return nil, fmt.Errorf("%s: the first word must name the command (a grant of * or ** would allow any program)", at)
		}
		x.pattern = p
	}
	if x.Timeout < 0 || x.OutputBytes < 0 {
		return nil, fmt.Errorf("%s: timeout and output bytes must not be negative", at)
	}
	if x.Timeout == 0 {
		x.Timeout = DefaultExecTimeout
	}
	if x.OutputBytes == 0 {
		x.OutputBytes = DefaultExecOutputBytes
	}
	if x.OutputBytes > 64<<20 {
		return nil, fmt.Errorf("%s: output bytes of %d are over the limit of 64 MiB", at, x.OutputBytes)
	}
	for _, e := range eg.Env {
		name, value, hasValue := strings.Cut(e, "=")
		if !envName.MatchString(name) {
			return nil, fmt.Errorf("%s: env %q is not NAME or NAME=VALUE", at, e)
		}
		if !hasValue {
			v, ok := os.LookupEnv(name)
			if !ok {
				continue // not set here: not set for the command either
			}
			value = v
		}
		x.env = append(x.env, name+"="+value)
	}
	var err error
	if x.read, err = hostPaths(at, "read", eg.Read); err != nil {
		return nil, err
	}
	if x.write, err = hostPaths(at, "write", eg.Write); err != nil {
		return nil, err
	}
	x.confine = "none"
	if !eg.Unconfined {
		if v := confine.Level(); v < confine.MinLevel {
			why := "this system has no Landlock"
			if v > 0 {
				why = fmt.Sprintf("this kernel's Landlock is ABI v%d and confinement needs v%d (Linux 6.2 or later)", v, confine.MinLevel)
			}
			return nil, fmt.Errorf("%s: commands run confined with Landlock, and %s: add unconfined: true to the grant to run it with your own rights, or leave it out", at, why)
		}
		x.confine = confine.Describe(eg.Network)
	}
	x.enforce = procbox.For(!eg.Unconfined)
	return x, nil
}

// hostPaths expands and checks a grant's read or write paths: each must
// exist (a Landlock rule needs the file).
func hostPaths(at, what string, paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("%s: %s path %s: %v", at, what, p, err)
			}
			p = filepath.Join(home, rest)
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%s: %s path %s must be absolute (or start with ~/)", at, what, p)
		}
		if _, err := os.Stat(p); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s: %s path %s does not exist: create it, or drop it from the grant", at, what, p)
			}
			return nil, fmt.Errorf("%s: %s path %s: %v", at, what, p, err)
		}
		out = append(out, filepath.Clean(p))
	}
	return out, nil
}

// timeoutFor is the call deadline an op with capabilities gets when its
// pipeline sets none: long enough for its longest command, or 30 s for
// HTTP, instead of the 1 s a policy op gets.
func (c *capabilities) timeoutFor() time.Duration {
	var d time.Duration
	if len(c.http) > 0 {
		d = 30 * time.Second
	}
	for _, x := range c.exec {
		d = max(d, x.Timeout+2*time.Second)
	}
	return d
}
