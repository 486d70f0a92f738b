// Package mcp runs Model Context Protocol servers as tool sources of a
// wagent pipeline, built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// A pipeline entry "mcp: NAME" becomes one Op: a native engine.Operation
// that owns the tool namespace NAME__*. At contribute it offers the
// server's tools as NAME__TOOL, with the server's description, input
// schema and annotations; at the tool hook, once guards have passed a
// call and its tool/call is durable, it sends the call and answers with
// the result. Read-only and idempotent hints make a call idempotent for
// the engine (run again after a crash instead of TOOL_OUTCOME_UNKNOWN).
//
// Servers live in a Hub, one per process: a stdio server is started when a
// session first needs it and shared by every session of the process; its
// standard error goes to a bounded buffer; when it exits it is restarted
// with backoff on next use and its tools are listed again;
// notifications/tools/list_changed makes the next step list them again.
// A call that outlives its timeout, or whose turn is cancelled, is
// cancelled with notifications/cancelled and answered with an error
// result; the server keeps running. A call in flight when the server died
// is answered TOOL_OUTCOME_UNKNOWN, or sent again once to the restarted
// server when the tool is idempotent. Hub.Close ends every server; on
// Linux a server also dies with wagent when wagent is killed (see
// procattr_linux.go; other systems rely on the server noticing that its
// standard input closed).
package mcp

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Defaults.
const (
	DefaultTimeout        = 60 * time.Second
	DefaultStartTimeout   = 30 * time.Second
	DefaultMaxResultBytes = 100 << 10
	// Separator joins the server's name and the tool's: NAME__TOOL.
	Separator = "__"
)

// Config is one MCP server of a pipeline. Exactly one of Command and URL
// is set. Env and Headers hold values already expanded; they may be
// secrets and are never written to a log or shown in a message.
type Config struct {
	// Name is the server's name in the pipeline; its tools are offered as
	// NAME__TOOL.
	Name string
	// Command runs a stdio server: the program and its arguments.
	Command []string
	// Dir is the working directory of Command (the pipeline file's).
	Dir string
	// Env is added to wagent's environment for Command.
	Env map[string]string
	// URL is a streamable HTTP endpoint.
	URL string
	// Headers are sent with every HTTP request.
	Headers map[string]string
	// Timeout bounds one tool call (default DefaultTimeout).
	Timeout time.Duration
	// StartTimeout bounds starting and initializing the server (default
	// DefaultStartTimeout).
	StartTimeout time.Duration
	// MaxResultBytes bounds a result's text; longer ones are cut with a
	// note saying how much (default DefaultMaxResultBytes).
	MaxResultBytes int
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,31}$|^[A-Za-z0-9][A-Za-z0-9_-]{0,30}[A-Za-z0-9-]$`)

// Validate checks a config on its own: a usable name, one of command and
// url, a command found on PATH (or at its path), a well-formed http(s)
// URL. Its errors are one line and never quote Env or Headers values.
func (c *Config) Validate() error {
	if !nameRE.MatchString(c.Name) || strings.Contains(c.Name, Separator) {
		return fmt.Errorf("server name %q must be 1-32 letters, digits, '-' or '_' (no %q, which joins server and tool names)", c.Name, Separator)
	}
	switch {
	case len(c.Command) > 0 && c.URL != "":
		return errors.New("both command and url are set: a server is either a command (stdio) or a url (streamable HTTP)")
	case len(c.Command) == 0 && c.URL == "":
		return errors.New("neither command nor url is set: give command: [PROGRAM, ARGS…] for a stdio server or url: for an HTTP one")
	case len(c.Command) > 0:
		if c.Command[0] == "" {
			return errors.New("command is empty")
		}
		if _, err := c.lookPath(); err != nil {
			return err
		}
	default:
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q is not an http:// or https:// URL", c.URL)
		}
		if len(c.Env) > 0 {
			return errors.New("env is for command servers; an HTTP server takes headers")
		}
	}
	if len(c.Command) > 0 && len(c.Headers) > 0 {
		return errors.New("headers are for url servers; a command server takes env")
	}
	if c.Timeout < 0 || c.StartTimeout < 0 {
		return errors.New("timeout_ms must be positive")
	}
	return nil
}

// lookPath finds the command's program: on PATH for a bare name,
// relative to Dir for a path.
func (c *Config) lookPath() (string, error) {
	prog := c.Command[0]
	if strings.ContainsRune(prog, filepath.Separator) && !filepath.IsAbs(prog) && c.Dir != "" {
		prog = filepath.Join(c.Dir, prog)
	}
	p, err := exec.LookPath(prog)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			if strings.ContainsRune(c.Command[0], filepath.Separator) {
				return "", fmt.Errorf("command %s not found", prog)
			}
			return "", fmt.Errorf("command %q not found on PATH: install it or give its path", c.Command[0])
		}
		return "", fmt.Errorf("command %s: %v", prog, err)
	}
	return p, nil
}

// Describe names the server for messages: its command or URL, never its
// environment or headers.
func (c *Config) Describe() string {
	if c.URL != "" {
		return c.URL
	}
	return strings.Join(c.Command, " ")
}

// key identifies a server within a hub: the same name, command, url,
// environment and headers share one process.
func (c *Config) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%q\x00%s\x00%s\x00", c.Name, c.Command, c.Dir, c.URL)
	for _, m := range []map[string]string{c.Env, c.Headers} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s\x00", k, m[k])
		}
		b.WriteByte(1)
	}
	return b.String()
}

func (c *Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Config) startTimeout() time.Duration {
	if c.StartTimeout > 0 {
		return c.StartTimeout
	}
	return DefaultStartTimeout
}

func (c *Config) maxResult() int {
	if c.MaxResultBytes > 0 {
		return c.MaxResultBytes
	}
	return DefaultMaxResultBytes
}

// ExpandEnv replaces each ${VAR} in s with the variable's value from
// lookup; nothing else is special ("$VAR" stays as written). An unset
// variable, or a "${" without its "}", is an error naming it (never the
// value of any).
func ExpandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("%q has ${ without a closing }", s[i:])
		}
		name := s[i+2 : i+j]
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(s[:i])
		b.WriteString(v)
		s = s[i+j+1:]
	}
}
