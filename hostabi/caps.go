package hostabi

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Capabilities (ABI 1.2, ABI.md §6): read-write mounts, outbound HTTP to
// named hosts and commands matching an exec grant. A manifest requests
// them, a pipeline grants them, and the op gets requested ∩ granted; the
// host enforces every one of them, and a guest reads what it got with the
// capabilities host function.

// GuestMount is a directory inside the guest: a mount a manifest requests
// or one an op was given. In a manifest a read-only mount is written as its
// path alone ("/skills"), a read-write one as {"path": "/work", "write":
// true}.
type GuestMount struct {
	Path  string `json:"path"`
	Write bool   `json:"write,omitempty"`
	// Optional (in a manifest, ABI 1.2 later) says the op loads without
	// the mount when the pipeline grants none there, and finds nothing at
	// the path: the skills op answers /skills with no skills folder.
	Optional bool `json:"optional,omitempty"`
}

// MarshalJSON writes a read-only mount as its path, as ABI 1.0 did.
func (m GuestMount) MarshalJSON() ([]byte, error) {
	if !m.Write && !m.Optional {
		return json.Marshal(m.Path)
	}
	type plain GuestMount
	return json.Marshal(plain(m))
}

// UnmarshalJSON reads a path or an object {path, write}; other keys are
// refused.
func (m *GuestMount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*m = GuestMount{Path: s}
		return nil
	}
	d := &reader{b: b}
	ok, err := d.object()
	if err != nil || !ok {
		return errors.New("a mount is a guest path or {\"path\": PATH, \"write\": true, \"optional\": true}")
	}
	*m = GuestMount{}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch string(key) {
		case "path":
			m.Path, err = d.str()
		case "write":
			m.Write, err = d.bool()
		case "optional":
			m.Optional, err = d.bool()
		default:
			return fmt.Errorf("unknown mount key %q (the keys are path, write, optional)", key)
		}
		if err != nil {
			return err
		}
	}
	return d.end()
}

// AnyHost is the manifest's http request for "whichever hosts the pipeline
// grants" (a fetch tool cannot know its hosts in advance).
const AnyHost = "*"

// AnyCommand is the manifest's exec request for "whichever commands the
// pipeline grants".
const AnyCommand = "**"

// HostPattern is a parsed HTTP host grant or request: "api.github.com"
// (ports 80 and 443), "127.0.0.1:8080" (that port only), "*.example.com"
// (its subdomains), "*" (any host), "*:8080" (any host on that port).
type HostPattern struct {
	// Host is the lower-case host name or IP literal (without brackets),
	// or "" for "*". For a wildcard it is the suffix after "*.".
	Host string
	// Port is 0 for the default ports (80, 443).
	Port int
	// Wildcard is set for "*" and "*.domain": such a grant never names a
	// host, so it never opens loopback or private addresses.
	Wildcard bool
}

// ParseHostPattern parses an HTTP host pattern (see HostPattern).
func ParseHostPattern(s string) (HostPattern, error) {
	bad := func(why string) (HostPattern, error) {
		return HostPattern{}, fmt.Errorf("http host %q %s", s, why)
	}
	if strings.Contains(s, "://") || strings.Contains(s, "/") {
		return bad("must be a host name, not a URL (write api.github.com, not https://api.github.com/)")
	}
	if s == AnyHost {
		return HostPattern{Wildcard: true}, nil
	}
	if rest, ok := strings.CutPrefix(s, AnyHost+":"); ok {
		p, err := parsePort(rest)
		if err != nil {
			return bad(err.Error())
		}
		return HostPattern{Wildcard: true, Port: p}, nil
	}
	host, port := s, 0
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad("has an unclosed [")
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return bad("has text after ]")
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return bad(err.Error())
			}
			port = p
		}
		if !strings.Contains(host, ":") {
			return bad("has brackets around something that is not an IPv6 address")
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.Count(s, ":") > 1 {
			return bad("looks like an IPv6 address: write it in brackets, [::1]:8080")
		}
		p, err := parsePort(s[i+1:])
		if err != nil {
			return bad(err.Error())
		}
		host, port = s[:i], p
	}
	host = strings.ToLower(host)
	wild := false
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		host, wild = rest, true
	}
	if host == "" {
		return bad("names no host")
	}
	for _, c := range host {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == ':' || c == '_') {
			return bad(fmt.Sprintf("has %q, which a host name cannot have", c))
		}
	}
	if strings.Contains(host, ":") && !strings.HasPrefix(s, "[") {
		return bad("is not a host name")
	}
	return HostPattern{Host: host, Port: port, Wildcard: wild}, nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("has port %q, which is not 1-65535", s)
	}
	return p, nil
}

// String writes the pattern as a grant would.
func (p HostPattern) String() string {
	h := p.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	switch {
	case p.Wildcard && h == "":
		h = "*"
	case p.Wildcard:
		h = "*." + h
	}
	if p.Port != 0 {
		h += ":" + strconv.Itoa(p.Port)
	}
	return h
}

// Matches reports whether the pattern allows host (lower case, no
// brackets) on port.
func (p HostPattern) Matches(host string, port int) bool {
	if p.Port == 0 {
		if port != 80 && port != 443 {
			return false
		}
	} else if p.Port != port {
		return false
	}
	switch {
	case p.Wildcard && p.Host == "":
		return true
	case p.Wildcard:
		return strings.HasSuffix(host, "."+p.Host)
	}
	return host == p.Host
}

// CommandPattern is a parsed exec grant or request: an argv pattern whose
// words match one argument each. A word is matched literally, except an
// unquoted "*", which matches any one argument, and an unquoted "**" as the
// last word, which matches any remaining arguments (none included). Words
// are split as a shell would split them, without expanding anything:
// quotes group ("git commit -m *" is four words, 'a b' is one), a
// backslash escapes the next character, and ; | & $ ` are ordinary
// characters. So "ls *" allows ["ls", "src"] and refuses
// ["ls", "src;", "touch", "X"].
type CommandPattern struct {
	// Text is the pattern as written.
	Text  string
	words []patWord
}

type patWord struct {
	lit  string
	kind uint8 // wordLit, wordAny, wordRest
}

const (
	wordLit uint8 = iota
	wordAny
	wordRest
)

// ParseCommandPattern parses an argv pattern (see CommandPattern). "**"
// alone is AnyCommand.
func ParseCommandPattern(s string) (CommandPattern, error) {
	words, quoted, err := splitWords(s)
	if err != nil {
		return CommandPattern{}, fmt.Errorf("command %q: %v", s, err)
	}
	if len(words) == 0 {
		return CommandPattern{}, fmt.Errorf("command %q names no command", s)
	}
	p := CommandPattern{Text: s}
	for i, w := range words {
		k := wordLit
		if !quoted[i] {
			switch w {
			case "*":
				k = wordAny
			case "**":
				k = wordRest
				if i != len(words)-1 {
					return CommandPattern{}, fmt.Errorf("command %q: ** must be the last word", s)
				}
			}
		}
		p.words = append(p.words, patWord{lit: w, kind: k})
	}
	return p, nil
}

// Any reports whether the pattern is AnyCommand.
func (p CommandPattern) Any() bool { return len(p.words) == 1 && p.words[0].kind == wordRest }

// Named reports whether the pattern's first word names the command (is
// not a wildcard), as a grant's must.
func (p CommandPattern) Named() bool { return len(p.words) > 0 && p.words[0].kind == wordLit }

// Match reports whether argv fits the pattern.
func (p CommandPattern) Match(argv []string) bool {
	for i, w := range p.words {
		switch w.kind {
		case wordRest:
			return true
		case wordAny:
			if i >= len(argv) {
				return false
			}
		default:
			if i >= len(argv) || argv[i] != w.lit {
				return false
			}
		}
	}
	return len(argv) == len(p.words)
}

// Covers reports whether every argv q matches also matches p: a request p
// covers the grant q.
func (p CommandPattern) Covers(q CommandPattern) bool {
	for i, w := range p.words {
		if w.kind == wordRest {
			return true
		}
		if i >= len(q.words) {
			return false
		}
		g := q.words[i]
		switch {
		case g.kind == wordRest:
			return false // q allows more arguments than p
		case w.kind == wordAny:
		case g.kind != wordLit || g.lit != w.lit:
			return false
		}
	}
	return len(p.words) == len(q.words)
}

// ShellCommandPattern is the argv pattern a shell grant of line amounts
// to: ["sh", "-c", line], with the line a wildcard when it has one.
func ShellCommandPattern(line string) CommandPattern {
	last := patWord{lit: line}
	if strings.Contains(line, "*") {
		last.kind = wordAny
	}
	return CommandPattern{Text: "sh -c " + strconv.Quote(line), words: []patWord{{lit: "sh"}, {lit: "-c"}, last}}
}

// MatchShellLine reports whether a command line fits a shell grant's line:
// equal, or with each "*" matching any run of characters (anything at all,
// ; and $(…) included: that is the risk of a shell grant).
func MatchShellLine(pattern, line string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == line
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(line, parts[0]) {
		return false
	}
	line = line[len(parts[0]):]
	for i, part := range parts[1:] {
		if i == len(parts)-2 {
			return strings.HasSuffix(line, part)
		}
		j := strings.Index(line, part)
		if j < 0 {
			return false
		}
		line = line[j+len(part):]
	}
	return true
}

// SplitCommand splits a command line into argv as CommandPattern splits
// patterns: quotes group, a backslash escapes, nothing is expanded and no
// character is an operator. It is how a tool that takes a command line
// turns it into the argv an exec grant is matched against.
func SplitCommand(line string) ([]string, error) {
	words, _, err := splitWords(line)
	return words, err
}

func splitWords(s string) (words []string, quoted []bool, err error) {
	var cur strings.Builder
	inWord, wasQuoted := false, false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			quoted = append(quoted, wasQuoted)
		}
		cur.Reset()
		inWord, wasQuoted = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush()
		case c == '\\':
			if i+1 >= len(s) {
				return nil, nil, errors.New("ends with a backslash")
			}
			i++
			cur.WriteByte(s[i])
			inWord, wasQuoted = true, true
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, nil, errors.New("has an unclosed '")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord, wasQuoted = true, true
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, nil, errors.New("has an unclosed \"")
			}
			i = j
			inWord, wasQuoted = true, true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, quoted, nil
}

// Granted is what an op was given: requested ∩ granted, as the
// capabilities host function returns it. An op uses it to describe its
// tools (the commands it may run, the hosts it may reach).
type Granted struct {
	Mounts []GuestMount     `json:"mounts,omitempty"`
	HTTP   []string         `json:"http,omitempty"`
	Exec   []GrantedCommand `json:"exec,omitempty"`
}

// GrantedCommand is one exec grant an op was given.
type GrantedCommand struct {
	// Cmd is the argv pattern, or for a shell grant the command line.
	Cmd   string `json:"cmd"`
	Shell bool   `json:"shell,omitempty"`
	// TimeoutMS and OutputBytes bound one run (output: kept per stream).
	TimeoutMS   int64 `json:"timeout_ms"`
	OutputBytes int64 `json:"output_bytes"`
	// Confinement says how the command is confined: "landlock" (files,
	// and network and signals where the kernel can) or "none".
	Confinement string `json:"confinement"`
	// Enforcement says whether the command runs in a whole process box
	// (everything it starts ends with it; it sees none of the host's
	// processes): "full", or "partial: " and what is missing. Empty from
	// hosts older than the box.
	Enforcement string `json:"enforcement,omitempty"`
}

// HTTPRequest is what a guest hands the http_request host function.
type HTTPRequest struct {
	// Method is GET (the default), HEAD, POST, PUT, PATCH, DELETE or
	// OPTIONS.
	Method string `json:"method,omitempty"`
	// URL is an absolute http or https URL whose host the op was granted.
	URL string `json:"url"`
	// Headers are request headers; Host, Connection, Content-Length,
	// Transfer-Encoding and Proxy-* are the host's.
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	// MaxBytes lowers the op's limit on the body read (0: the limit).
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// TimeoutMS lowers the time the request may take (0: what is left of
	// the call's deadline).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// HTTPResponse is what http_request returns: a response, or an error the
// op reports (never a fault: a host not granted is the op's to explain).
type HTTPResponse struct {
	Status int `json:"status,omitempty"`
	// URL is the URL answered, after redirects.
	URL string `json:"url,omitempty"`
	// Headers hold the response's headers, values of one name joined by
	// ", ", names in canonical form.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the body read, up to the limit, as text (invalid UTF-8
	// becomes U+FFFD); Truncated says the response had more.
	Body      string `json:"body,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// Size is the number of body bytes the host read and kept, at most
	// the limit, counted after Decoded (added in 1.2; an older host
	// leaves it out).
	Size int64 `json:"size,omitempty"`
	// Decoded names the content coding the host removed ("gzip"); the
	// limit, Size and Truncated count the decoded bytes, and the
	// Content-Encoding and Content-Length headers are gone (added in
	// 1.2).
	Decoded string `json:"decoded,omitempty"`
	// Binary is the media type of a body that is not text (an image, an
	// archive, bytes with NULs or control codes in them): the host then
	// leaves Body empty, having counted the body (Size, Truncated)
	// without keeping it (added in 1.2; an older host passes such a body
	// as text).
	Binary string `json:"binary,omitempty"`
	// Error and Code say why there is no response (see the Cap* codes).
	Error      string `json:"error,omitempty"`
	Code       string `json:"code,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
}

// ExecRequest is what a guest hands the exec host function: an argv
// (matched against the op's exec grants, never run by a shell) or, under
// a shell grant, a command line for sh -c.
type ExecRequest struct {
	Argv  []string `json:"argv,omitempty"`
	Shell string   `json:"shell,omitempty"`
	// Dir is the working directory, a guest path inside one of the op's
	// mounts (default: its first).
	Dir   string `json:"dir,omitempty"`
	Stdin string `json:"stdin,omitempty"`
	// TimeoutMS lowers the grant's timeout.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// ExecResponse is what exec returns: how the command ended, or an error.
type ExecResponse struct {
	// ExitCode is the command's exit status (-1 when a signal ended it).
	ExitCode int `json:"exit_code"`
	// Stdout and Stderr are what the command wrote, each cut to the
	// grant's output bytes: the beginning and the end are kept, and
	// StdoutCut/StderrCut count the bytes left out between them (a line
	// in the text marks the place).
	Stdout      string `json:"stdout,omitempty"`
	Stderr      string `json:"stderr,omitempty"`
	StdoutBytes int64  `json:"stdout_bytes,omitempty"`
	StderrBytes int64  `json:"stderr_bytes,omitempty"`
	StdoutCut   int64  `json:"stdout_cut,omitempty"`
	StderrCut   int64  `json:"stderr_cut,omitempty"`
	// Killed says why the host ended the command: "timeout" (its
	// timeout), "deadline" (the call's deadline), "output" (it wrote far
	// more than is kept), "canceled" (the turn was cancelled).
	Killed      string `json:"killed,omitempty"`
	DurationMS  int64  `json:"duration_ms,omitempty"`
	Confinement string `json:"confinement,omitempty"`
	Error       string `json:"error,omitempty"`
	Code        string `json:"code,omitempty"`
}

// Codes of an HTTPResponse or ExecResponse error.
const (
	CapNotGranted  = "not_granted"      // the host, redirect target or command is not granted
	CapBadRequest  = "bad_request"      // the request is malformed
	CapPrivate     = "private_address"  // a host resolved to a loopback or private address it was not granted by name for
	CapTimeout     = "timeout"          // no complete answer in time
	CapTransport   = "transport"        // the connection failed
	CapBadDir      = "bad_dir"          // the working directory is not inside a mount
	CapNotFound    = "not_found"        // the command is not on the PATH
	CapStartFailed = "start_failed"     // the command could not be started (or confined)
	CapCanceled    = "canceled"         // the turn was cancelled
	CapNotCapable  = "not_capable"      // the op has no such capability
	CapTooMany     = "too_many_actions" // the call made more requests or commands than it may
)

// Lean codec for the capability documents: a guest appends requests and
// parses responses and Granted; the host parses requests strictly
// (unknown keys refused) and appends responses.

// AppendHTTPRequest appends r as JSON to dst.
func AppendHTTPRequest(dst []byte, r *HTTPRequest) []byte {
	f := true
	dst = append(dst, '{')
	if r.Method != "" {
		dst = appendKey(dst, &f, "method")
		dst = appendString(dst, r.Method)
	}
	dst = appendKey(dst, &f, "url")
	dst = appendString(dst, r.URL)
	if len(r.Headers) > 0 {
		dst = appendKey(dst, &f, "headers")
		dst = appendStringMap(dst, r.Headers)
	}
	if r.Body != "" {
		dst = appendKey(dst, &f, "body")
		dst = appendString(dst, r.Body)
	}
	if r.MaxBytes != 0 {
		dst = appendKey(dst, &f, "max_bytes")
		dst = appendInt(dst, r.MaxBytes)
	}
	if r.TimeoutMS != 0 {
		dst = appendKey(dst, &f, "timeout_ms")
		dst = appendInt(dst, r.TimeoutMS)
	}
	return append(dst, '}')
}

// ParseHTTPRequest decodes a request strictly: unknown keys are refused.
func ParseHTTPRequest(b []byte, r *HTTPRequest) error {
	*r = HTTPRequest{}
	return members(&reader{b: b, depth: 8}, "request", func(d *reader, key []byte) (err error) {
		switch string(key) {
		case "method":
			r.Method, err = d.str()
		case "url":
			r.URL, err = d.str()
		case "headers":
			r.Headers, err = d.stringMap()
		case "body":
			r.Body, err = d.str()
		case "max_bytes":
			r.MaxBytes, err = d.int(64)
		case "timeout_ms":
			r.TimeoutMS, err = d.int(64)
		default:
			return fmt.Errorf("unknown key %q (the keys are method, url, headers, body, max_bytes, timeout_ms)", key)
		}
		return err
	})
}

// AppendHTTPResponse appends r as JSON to dst.
func AppendHTTPResponse(dst []byte, r *HTTPResponse) []byte {
	f := true
	dst = append(dst, '{')
	if r.Status != 0 {
		dst = appendKey(dst, &f, "status")
		dst = appendInt(dst, int64(r.Status))
	}
	str := func(k, v string) {
		if v != "" {
			dst = appendKey(dst, &f, k)
			dst = appendString(dst, v)
		}
	}
	str("url", r.URL)
	if len(r.Headers) > 0 {
		dst = appendKey(dst, &f, "headers")
		dst = appendStringMap(dst, r.Headers)
	}
	str("body", r.Body)
	if r.Truncated {
		dst = appendKey(dst, &f, "truncated")
		dst = appendBool(dst, true)
	}
	if r.Size != 0 {
		dst = appendKey(dst, &f, "size")
		dst = appendInt(dst, r.Size)
	}
	str("decoded", r.Decoded)
	str("binary", r.Binary)
	str("error", r.Error)
	str("code", r.Code)
	if r.DurationMS != 0 {
		dst = appendKey(dst, &f, "duration_ms")
		dst = appendInt(dst, r.DurationMS)
	}
	return append(dst, '}')
}

// ParseHTTPResponse decodes a response; keys it does not know are skipped.
func ParseHTTPResponse(b []byte, r *HTTPResponse) error {
	*r = HTTPResponse{}
	return members(&reader{b: b}, "", func(d *reader, key []byte) (err error) {
		switch string(key) {
		case "status":
			var n int64
			n, err = d.int(32)
			r.Status = int(n)
		case "url":
			r.URL, err = d.str()
		case "headers":
			r.Headers, err = d.stringMap()
		case "body":
			r.Body, err = d.str()
		case "truncated":
			r.Truncated, err = d.bool()
		case "size":
			r.Size, err = d.int(64)
		case "decoded":
			r.Decoded, err = d.str()
		case "binary":
			r.Binary, err = d.str()
		case "error":
			r.Error, err = d.str()
		case "code":
			r.Code, err = d.str()
		case "duration_ms":
			r.DurationMS, err = d.int(64)
		default:
			_, err = d.skip(0)
		}
		return err
	})
}

// AppendExecRequest appends r as JSON to dst.
func AppendExecRequest(dst []byte, r *ExecRequest) []byte {
	f := true
	dst = append(dst, '{')
	if r.Argv != nil {
		dst = appendKey(dst, &f, "argv")
		dst = appendStrings(dst, r.Argv)
	}
	str := func(k, v string) {
		if v != "" {
			dst = appendKey(dst, &f, k)
			dst = appendString(dst, v)
		}
	}
	str("shell", r.Shell)
	str("dir", r.Dir)
	str("stdin", r.Stdin)
	if r.TimeoutMS != 0 {
		dst = appendKey(dst, &f, "timeout_ms")
		dst = appendInt(dst, r.TimeoutMS)
	}
	return append(dst, '}')
}

// ParseExecRequest decodes a request strictly: unknown keys are refused.
func ParseExecRequest(b []byte, r *ExecRequest) error {
	*r = ExecRequest{}
	return members(&reader{b: b, depth: 8}, "request", func(d *reader, key []byte) (err error) {
		switch string(key) {
		case "argv":
			r.Argv, err = d.strings()
		case "shell":
			r.Shell, err = d.str()
		case "dir":
			r.Dir, err = d.str()
		case "stdin":
			r.Stdin, err = d.str()
		case "timeout_ms":
			r.TimeoutMS, err = d.int(64)
		default:
			return fmt.Errorf("unknown key %q (the keys are argv, shell, dir, stdin, timeout_ms)", key)
		}
		return err
	})
}

// AppendExecResponse appends r as JSON to dst.
func AppendExecResponse(dst []byte, r *ExecResponse) []byte {
	f := true
	dst = append(dst, '{')
	dst = appendKey(dst, &f, "exit_code")
	dst = appendInt(dst, int64(r.ExitCode))
	str := func(k, v string) {
		if v != "" {
			dst = appendKey(dst, &f, k)
			dst = appendString(dst, v)
		}
	}
	num := func(k string, v int64) {
		if v != 0 {
			dst = appendKey(dst, &f, k)
			dst = appendInt(dst, v)
		}
	}
	str("stdout", r.Stdout)
	str("stderr", r.Stderr)
	num("stdout_bytes", r.StdoutBytes)
	num("stderr_bytes", r.StderrBytes)
	num("stdout_cut", r.StdoutCut)
	num("stderr_cut", r.StderrCut)
	str("killed", r.Killed)
	num("duration_ms", r.DurationMS)
	str("confinement", r.Confinement)
	str("error", r.Error)
	str("code", r.Code)
	return append(dst, '}')
}

// ParseExecResponse decodes a response; keys it does not know are skipped.
func ParseExecResponse(b []byte, r *ExecResponse) error {
	*r = ExecResponse{}
	return members(&reader{b: b}, "", func(d *reader, key []byte) (err error) {
		var n int64
		switch string(key) {
		case "exit_code":
			n, err = d.int(32)
			r.ExitCode = int(n)
		case "stdout":
			r.Stdout, err = d.str()
		case "stderr":
			r.Stderr, err = d.str()
		case "stdout_bytes":
			r.StdoutBytes, err = d.int(64)
		case "stderr_bytes":
			r.StderrBytes, err = d.int(64)
		case "stdout_cut":
			r.StdoutCut, err = d.int(64)
		case "stderr_cut":
			r.StderrCut, err = d.int(64)
		case "killed":
			r.Killed, err = d.str()
		case "duration_ms":
			r.DurationMS, err = d.int(64)
		case "confinement":
			r.Confinement, err = d.str()
		case "error":
			r.Error, err = d.str()
		case "code":
			r.Code, err = d.str()
		default:
			_, err = d.skip(0)
		}
		return err
	})
}

// AppendGranted appends g as JSON to dst.
func AppendGranted(dst []byte, g *Granted) []byte {
	f := true
	dst = append(dst, '{')
	if len(g.Mounts) > 0 {
		dst = appendKey(dst, &f, "mounts")
		dst = append(dst, '[')
		for i, m := range g.Mounts {
			if i > 0 {
				dst = append(dst, ',')
			}
			h := true
			dst = append(dst, '{')
			dst = appendKey(dst, &h, "path")
			dst = appendString(dst, m.Path)
			if m.Write {
				dst = appendKey(dst, &h, "write")
				dst = appendBool(dst, true)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(g.HTTP) > 0 {
		dst = appendKey(dst, &f, "http")
		dst = appendStrings(dst, g.HTTP)
	}
	if len(g.Exec) > 0 {
		dst = appendKey(dst, &f, "exec")
		dst = append(dst, '[')
		for i, c := range g.Exec {
			if i > 0 {
				dst = append(dst, ',')
			}
			h := true
			dst = append(dst, '{')
			dst = appendKey(dst, &h, "cmd")
			dst = appendString(dst, c.Cmd)
			if c.Shell {
				dst = appendKey(dst, &h, "shell")
				dst = appendBool(dst, true)
			}
			dst = appendKey(dst, &h, "timeout_ms")
			dst = appendInt(dst, c.TimeoutMS)
			dst = appendKey(dst, &h, "output_bytes")
			dst = appendInt(dst, c.OutputBytes)
			dst = appendKey(dst, &h, "confinement")
			dst = appendString(dst, c.Confinement)
			if c.Enforcement != "" {
				dst = appendKey(dst, &h, "enforcement")
				dst = appendString(dst, c.Enforcement)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// ParseGranted decodes what the capabilities host function returns; keys
// it does not know are skipped.
func ParseGranted(b []byte, g *Granted) error {
	*g = Granted{}
	return members(&reader{b: b}, "", func(d *reader, key []byte) (err error) {
		switch string(key) {
		case "mounts":
			err = each(d, func() error {
				var m GuestMount
				err := object(d, "", func(d *reader, key []byte) (err error) {
					switch string(key) {
					case "path":
						m.Path, err = d.str()
					case "write":
						m.Write, err = d.bool()
					default:
						_, err = d.skip(0)
					}
					return err
				})
				g.Mounts = append(g.Mounts, m)
				return err
			})
		case "http":
			g.HTTP, err = d.strings()
		case "exec":
			err = each(d, func() error {
				var c GrantedCommand
				err := object(d, "", func(d *reader, key []byte) (err error) {
					switch string(key) {
					case "cmd":
						c.Cmd, err = d.str()
					case "shell":
						c.Shell, err = d.bool()
					case "timeout_ms":
						c.TimeoutMS, err = d.int(64)
					case "output_bytes":
						c.OutputBytes, err = d.int(64)
					case "confinement":
						c.Confinement, err = d.str()
					case "enforcement":
						c.Enforcement, err = d.str()
					default:
						_, err = d.skip(0)
					}
					return err
				})
				g.Exec = append(g.Exec, c)
				return err
			})
		default:
			_, err = d.skip(0)
		}
		return err
	})
}

// members reads a whole document that is one object, calling fn for each
// member; what names the document in errors ("" for none).
func members(d *reader, what string, fn func(d *reader, key []byte) error) error {
	if err := object(d, what, fn); err != nil {
		return err
	}
	return d.end()
}

// object reads an object inside a document, calling fn for each member.
func object(d *reader, what string, fn func(d *reader, key []byte) error) error {
	ok, err := d.object()
	if err != nil {
		return err
	}
	first := true
	for ok {
		key, more, err := d.key(&first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		if err := fn(d, key); err != nil {
			if what != "" && !errors.Is(err, ErrSyntax) {
				return fmt.Errorf("%s: %w", what, err)
			}
			return err
		}
	}
	return nil
}

// each reads an array, calling fn with the reader at each element.
func each(d *reader, fn func() error) error {
	ok, err := d.array()
	if err != nil || !ok {
		return err
	}
	first := true
	for {
		more, err := d.elem(&first)
		if err != nil || !more {
			return err
		}
		if err := fn(); err != nil {
			return err
		}
	}
}

// stringMap reads an object of strings (null gives nil).
func (d *reader) stringMap() (map[string]string, error) {
	ok, err := d.object()
	if err != nil || !ok {
		return nil, err
	}
	out := map[string]string{}
	first := true
	for {
		key, more, err := d.key(&first)
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		v, err := d.str()
		if err != nil {
			return nil, err
		}
		out[string(key)] = v
	}
}

func appendStringMap(dst []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m[k])
	}
	return append(dst, '}')
}

// check validates a manifest's capability requests; abi is the manifest's
// version (read-write mounts, http and exec need 1.2).
func (c *Capabilities) check(abi string) error {
	_, minor, _ := ParseABI(abi)
	seen := map[string]bool{}
	for _, m := range c.Mounts {
		if err := CheckGuestPath(m.Path); err != nil {
			return err
		}
		if seen[m.Path] {
			return fmt.Errorf("mount %s is requested twice", m.Path)
		}
		seen[m.Path] = true
		if m.Write && minor < 2 {
			return fmt.Errorf("read-write mount %s needs abi 1.2 or later, the manifest says %s", m.Path, abi)
		}
	}
	if (len(c.HTTP) > 0 || len(c.Exec) > 0) && minor < 2 {
		return fmt.Errorf("capabilities http and exec need abi 1.2 or later, the manifest says %s", abi)
	}
	for _, h := range c.HTTP {
		if _, err := ParseHostPattern(h); err != nil {
			return err
		}
	}
	for _, e := range c.Exec {
		if _, err := ParseCommandPattern(e); err != nil {
			return fmt.Errorf("exec %v", strings.TrimPrefix(err.Error(), "command "))
		}
	}
	return nil
}
