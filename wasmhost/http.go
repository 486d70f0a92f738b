package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/wagent/wagent/hostabi"
)

// Outbound HTTP (ABI 1.2, http_request). A request goes out only to a
// host:port the op was granted; every redirect is checked again before it
// is followed; a host is dialled at an address checked at dial time (so a
// name that resolves to a loopback or private address is refused unless a
// grant names that host: a wildcard never opens the local network); no
// proxy is used; the body read is bounded by the op's limit and the whole
// request by the call's deadline.

// webClient is an op's HTTP client, made on first use (most ops have no
// HTTP grant).
type webClient struct {
	once   sync.Once
	client *http.Client
}

func (o *Op) httpClient() *http.Client {
	o.web.once.Do(func() {
		tr := &http.Transport{
			Proxy:                  nil, // a proxy would be a host nobody granted
			DialContext:            o.dialGranted,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           8,
			IdleConnTimeout:        30 * time.Second,
			TLSHandshakeTimeout:    10 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		}
		o.web.client = &http.Client{Transport: tr, CheckRedirect: o.checkRedirect}
	})
	return o.web.client
}

// grantFor returns the grant that allows host:port, if any.
func (o *Op) grantFor(host string, port int) (hostGrant, bool) {
	for _, g := range o.caps.http {
		if g.pattern.Matches(host, port) {
			return g, true
		}
	}
	return hostGrant{}, false
}

// byName reports whether a grant names host:port itself (not through a
// wildcard): only such a grant reaches loopback and private addresses.
func (o *Op) byName(host string, port int) bool {
	for _, g := range o.caps.http {
		if !g.pattern.Wildcard && g.pattern.Matches(host, port) {
			return true
		}
	}
	return false
}

func (o *Op) grantedHosts() string {
	var names []string
	for _, g := range o.caps.http {
		names = append(names, g.text)
	}
	return strings.Join(names, ", ")
}

// target returns the host and port a URL goes to, checking its scheme.
func target(u *url.URL) (string, int, error) {
	port := 0
	switch u.Scheme {
	case "http":
		port = 80
	case "https":
		port = 443
	default:
		return "", 0, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", 0, errors.New("the URL names no host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("port %q is not 1-65535", p)
		}
		port = n
	}
	return host, port, nil
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

type notGrantedError struct {
	url, hostport, granted string
	redirect               bool
}

func (e *notGrantedError) Error() string {
	if e.redirect {
		return fmt.Sprintf("the server redirected to %s, and %s is not granted (granted: %s); the redirect was not followed", e.url, e.hostport, e.granted)
	}
	return fmt.Sprintf("%s is not granted (granted: %s)", e.hostport, e.granted)
}

type privateError struct {
	host string
	addr netip.Addr
}

func (e *privateError) Error() string {
	return fmt.Sprintf("%s resolves to %s, a loopback or private address, which only a grant naming %s itself opens", e.host, e.addr, e.host)
}

func (o *Op) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	host, port, err := target(req.URL)
	if err != nil {
		return fmt.Errorf("the server redirected to %s: %v", req.URL, err)
	}
	if _, ok := o.grantFor(host, port); !ok {
		return &notGrantedError{url: req.URL.String(), hostport: hostPort(host, port), granted: o.grantedHosts(), redirect: true}
	}
	return nil
}

// dialGranted dials addr at an address it checks: public, or the host is
// granted by name.
func (o *Op) dialGranted(ctx context.Context, network, addr string) (net.Conn, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(p)
	host = strings.ToLower(host)
	if _, ok := o.grantFor(host, port); !ok { // defence in depth: the request was checked
		return nil, &notGrantedError{hostport: hostPort(host, port), granted: o.grantedHosts()}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		addrs = ips
	}
	named := o.byName(host, port)
	var d net.Dialer
	var firstErr error
	for _, a := range addrs {
		a = a.Unmap()
		if !named && !public(a) {
			if firstErr == nil {
				firstErr = &privateError{host: host, addr: a}
			}
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), p))
		if err == nil {
			return c, nil
		}
		if firstErr == nil || errors.As(firstErr, new(*privateError)) {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("%s has no address", host)
	}
	return nil, firstErr
}

// nonPublic are ranges a wildcard grant never reaches, besides what
// netip's predicates name.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64 can reach anything
	netip.MustParsePrefix("2002::/16"),    // 6to4, likewise
}

// public reports whether a is an address on the internet: not loopback,
// private, link-local, multicast, unspecified or reserved.
func public(a netip.Addr) bool {
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || !a.IsGlobalUnicast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

var httpMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// reservedHeader reports whether a request header is the host's to set.
func reservedHeader(name string) bool {
	switch strings.ToLower(name) {
	case "host", "connection", "content-length", "transfer-encoding", "te", "trailer", "upgrade", "keep-alive":
		return true
	}
	return strings.HasPrefix(strings.ToLower(name), "proxy-")
}

// doHTTP makes one request for the op. tell says what happened to
// watchers.
func (o *Op) doHTTP(ctx context.Context, req *hostabi.HTTPRequest, tell func(string, ...any)) hostabi.HTTPResponse {
	method := strings.ToUpper(req.Method)
	if method == "" {
		method = "GET"
	}
	fail := func(code, format string, args ...any) hostabi.HTTPResponse {
		msg := fmt.Sprintf(format, args...)
		tell("http %s %s refused: %s", method, clip(req.URL, quotedBytes), msg)
		return hostabi.HTTPResponse{Code: code, Error: "http_request: " + clipText(msg)}
	}
	if len(o.caps.http) == 0 {
		return fail(hostabi.CapNotCapable, "op %s has no HTTP capability (its manifest requests none, or the pipeline grants none)", o.man.Name)
	}
	if !httpMethods[method] {
		return fail(hostabi.CapBadRequest, "method %q is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS", req.Method)
	}
	u, err := url.Parse(req.URL)
	if err != nil || !u.IsAbs() {
		return fail(hostabi.CapBadRequest, "%q is not an absolute URL", clip(req.URL, quotedBytes))
	}
	host, port, err := target(u)
	if err != nil {
		return fail(hostabi.CapBadRequest, "%v", err)
	}
	if _, ok := o.grantFor(host, port); !ok {
		return fail(hostabi.CapNotGranted, "%s", (&notGrantedError{hostport: clip(hostPort(host, port), quotedBytes), granted: o.grantedHosts()}).Error())
	}
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), strings.NewReader(req.Body))
	if err != nil {
		return fail(hostabi.CapBadRequest, "%v", err)
	}
	if req.Body == "" {
		hr.Body, hr.ContentLength = http.NoBody, 0
	}
	hr.Header.Set("User-Agent", "wagent")
	for k, v := range req.Headers {
		if reservedHeader(k) {
			return fail(hostabi.CapBadRequest, "header %s is the host's to set", k)
		}
		hr.Header.Set(k, v)
	}
	limit := o.limits.HTTPBytes
	if req.MaxBytes > 0 {
		limit = min(limit, req.MaxBytes)
	}
	start := time.Now()
	resp, err := o.httpClient().Do(hr)
	if err != nil {
		return o.httpError(ctx, method, req.URL, err, start, tell)
	}
	defer resp.Body.Close()
	out := hostabi.HTTPResponse{Status: resp.StatusCode, URL: resp.Request.URL.String(), Headers: map[string]string{}}
	if resp.Uncompressed {
		// The transport asked for gzip itself and is inflating it: the
		// limit below counts inflated bytes, so a small bomb stops at it.
		out.Decoded = "gzip"
	}
	body, err := readBody(resp.Body, resp.Header.Get("Content-Type"), limit, &out)
	if err != nil {
		return o.httpError(ctx, method, req.URL, err, start, tell)
	}
	out.DurationMS = time.Since(start).Milliseconds()
	out.Body = string(body)
	for k, v := range resp.Header {
		out.Headers[k] = strings.Join(v, ", ")
	}
	var notes []string
	if out.Decoded != "" {
		notes = append(notes, out.Decoded+" decoded")
	}
	if out.Binary != "" {
		notes = append(notes, "not text: "+out.Binary+", not passed on")
	}
	if out.Truncated {
		notes = append(notes, fmt.Sprintf("cut at the limit of %d bytes", limit))
	}
	extra := ""
	if len(notes) > 0 {
		extra = ", " + strings.Join(notes, ", ")
	}
	tell("http %s %s → %d (%d bytes%s, %d ms)", method, req.URL, out.Status, out.Size, extra, out.DurationMS)
	return out
}

// sniffBytes is how much of a body decides whether it is text.
const sniffBytes = 1024

// readBody reads at most limit bytes of a (decoded) body and records its
// size, whether it had more and, for a body that is not text, its type.
// It never reads more than limit+1 bytes, whatever the body inflates to.
// A body that is not text is counted and dropped, not kept: the guest
// would get it as text mangled to U+FFFD (each escaped control byte six
// bytes of JSON), megabytes of nothing it can use.
func readBody(r io.Reader, ctype string, limit int64, out *hostabi.HTTPResponse) ([]byte, error) {
	head := make([]byte, min(limit+1, sniffBytes))
	n, err := io.ReadFull(r, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	head = head[:n]
	if kind := binaryType(ctype, head[:min(int64(n), limit)]); kind != "" {
		out.Binary = kind
		rest, err := io.Copy(io.Discard, io.LimitReader(r, limit+1-int64(n)))
		if err != nil {
			return nil, err
		}
		out.Size = min(int64(n)+rest, limit)
		out.Truncated = int64(n)+rest > limit
		return nil, nil
	}
	body := bytes.NewBuffer(head)
	if int64(n) == int64(len(head)) && int64(n) <= limit {
		if _, err := body.ReadFrom(io.LimitReader(r, limit+1-int64(n))); err != nil {
			return nil, err
		}
	}
	b := body.Bytes()
	if int64(len(b)) > limit {
		b, out.Truncated = b[:limit], true
	}
	out.Size = int64(len(b))
	return b, nil
}

// binaryType returns the media type of a body that is not text, judged by
// its first bytes and its declared Content-Type, or "" for text. Not text:
// what http.DetectContentType finds a binary signature in (PNG, PDF, ZIP,
// gzip, …) or binary bytes in (NUL and the control codes no text uses),
// and bytes that are not UTF-8 under a Content-Type that is not text
// (image/*, application/octet-stream, …). Bytes that are not UTF-8 under a
// text type (a Latin-1 page) stay text, as they were.
func binaryType(ctype string, head []byte) string {
	declared, _, _ := mime.ParseMediaType(ctype)
	sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(head))
	if strings.HasPrefix(sniffed, "text/") && (textMedia(declared) || validUTF8Head(head)) {
		return ""
	}
	if declared != "" && declared != "application/octet-stream" && !textMedia(declared) {
		return declared
	}
	if strings.HasPrefix(sniffed, "text/") { // not UTF-8, and declared as nothing more precise
		return "application/octet-stream"
	}
	return sniffed
}

// textMedia reports whether a declared media type is text ("" counts:
// the bytes decide).
func textMedia(m string) bool {
	if m == "" || strings.HasPrefix(m, "text/") {
		return true
	}
	for _, suffix := range []string{"/json", "+json", "/xml", "+xml", "/javascript", "/ecmascript", "/x-javascript", "/yaml", "+yaml", "/x-yaml", "/toml", "/x-sh", "/sql", "/graphql", "/x-ndjson", "/jsonl", "/x-www-form-urlencoded", "/markdown", "/x-tex", "/rtf", "/csv"} {
		if strings.HasSuffix(m, suffix) {
			return true
		}
	}
	return false
}

// validUTF8Head reports whether head is UTF-8, a rune cut at its end
// aside.
func validUTF8Head(head []byte) bool {
	for i := len(head) - 1; i >= 0 && i >= len(head)-utf8.UTFMax; i-- {
		if utf8.RuneStart(head[i]) {
			if !utf8.FullRune(head[i:]) {
				head = head[:i]
			}
			break
		}
	}
	return utf8.Valid(head)
}

func (o *Op) httpError(ctx context.Context, method, rawURL string, err error, start time.Time, tell func(string, ...any)) hostabi.HTTPResponse {
	var ng *notGrantedError
	var pe *privateError
	code := hostabi.CapTransport
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	switch {
	case errors.As(err, &ng):
		code, msg = hostabi.CapNotGranted, ng.Error()
	case errors.As(err, &pe):
		code, msg = hostabi.CapPrivate, pe.Error()
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		code = hostabi.CapTimeout
		msg = fmt.Sprintf("no complete response within %d ms (the call's deadline, or the request's timeout_ms)", time.Since(start).Milliseconds())
	}
	tell("http %s %s failed: %s", method, clip(rawURL, quotedBytes), msg)
	return hostabi.HTTPResponse{Code: code, Error: "http_request: " + clipText(msg), DurationMS: time.Since(start).Milliseconds()}
}
