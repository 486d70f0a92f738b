package jetstream

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wagent/wagent/store"
)

// OpenURL connects to NATS and opens a Log there, the way a worker started
// with a URL does. The Log owns the connection and closes it on Close.
//
// The URL is one or more comma-separated server URLs followed by the store's
// options as a query:
//
//	nats://host:4222?stream=WAGENT_LOG&replicas=3
//	nats://a:4222,nats://b:4222,nats://c:4222?stream=LOGS&subject=logs&storage=file
//
// Query keys: stream, subject, replicas, storage (file or memory),
// max_append_bytes, timeout and election_wait (Go durations) and creds (a
// credentials file), each as the Options field of that name. An unknown key
// is an error, so a misspelt option does not silently fall back to a
// default. With no server before the query, NATS_URL is used, or
// nats.DefaultURL.
//
// Credentials come from the first of: the creds key, a user or token in the
// URL itself (nats://user:password@host, nats://token@host, which nats.go
// reads), then the environment variables the nats command line tool reads:
// NATS_CREDS (a credentials file), NATS_NKEY (an nkey seed file), NATS_USER
// with NATS_PASSWORD, or NATS_USER alone as a token.
// NATS_CERT with NATS_KEY, and NATS_CA, name TLS files. natsOpts are applied
// last and override all of these.
func OpenURL(ctx context.Context, rawURL string, natsOpts ...nats.Option) (*Log, error) {
	u, err := parseURL(rawURL, os.Getenv)
	if err != nil {
		return nil, err
	}
	connOpts, err := u.natsOptions()
	if err != nil {
		return nil, fmt.Errorf("%w: jetstream store URL %s: %v", store.ErrInvalid, redact(rawURL), err)
	}
	nc, err := nats.Connect(u.servers, append(connOpts, natsOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("open jetstream store: connect to %s: %w", redact(u.servers), err)
	}
	l, err := Open(ctx, nc, u.opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	l.ownConn = true
	return l, nil
}

// storeURL is a parsed store URL: where to connect, as whom, and the
// store's options.
type storeURL struct {
	servers string
	opts    Options
	auth    urlAuth
}

// urlAuth is how to authenticate, at most one of creds, nkey, user and
// password, or token, plus TLS files.
type urlAuth struct {
	Creds, Nkey, User, Password, Token string
	Cert, Key, CA                      string
}

// parseURL splits a store URL into servers, options and credentials.
// getenv reads the environment.
func parseURL(rawURL string, getenv func(string) string) (storeURL, error) {
	bad := func(format string, args ...any) (storeURL, error) {
		return storeURL{}, fmt.Errorf("%w: jetstream store URL %s: %s", store.ErrInvalid, redact(rawURL), fmt.Sprintf(format, args...))
	}
	var u storeURL
	servers, query, _ := strings.Cut(rawURL, "?")
	if servers == "" {
		servers = getenv("NATS_URL")
	}
	if servers == "" {
		servers = nats.DefaultURL
	}
	u.servers = servers
	hasUserInfo := false
	for _, s := range strings.Split(servers, ",") {
		p, err := url.Parse(strings.TrimSpace(s))
		if err != nil || p.Host == "" {
			return bad("server %q is not a URL such as nats://host:4222", redact(s))
		}
		switch p.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return bad("server %q: scheme %q, want nats, tls, ws or wss", redact(s), p.Scheme)
		}
		if p.User != nil {
			hasUserInfo = true
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: %v", err)
	}
	creds := ""
	for key, vals := range q {
		if len(vals) != 1 {
			return bad("%s is given %d times", key, len(vals))
		}
		v := vals[0]
		switch key {
		case "stream":
			u.opts.Stream = v
		case "subject":
			u.opts.Subject = v
		case "replicas":
			if u.opts.Replicas, err = strconv.Atoi(v); err != nil {
				return bad("replicas %q is not a number", v)
			}
		case "storage":
			u.opts.Storage = Storage(v)
		case "max_append_bytes":
			if u.opts.MaxAppendBytes, err = strconv.Atoi(v); err != nil {
				return bad("max_append_bytes %q is not a number", v)
			}
		case "timeout":
			if u.opts.Timeout, err = time.ParseDuration(v); err != nil {
				return bad("timeout %q is not a duration such as 5s", v)
			}
		case "election_wait":
			if u.opts.ElectionWait, err = time.ParseDuration(v); err != nil {
				return bad("election_wait %q is not a duration such as 30s", v)
			}
		case "creds":
			creds = v
		default:
			return bad("unknown option %q (want stream, subject, replicas, storage, max_append_bytes, timeout, election_wait or creds)", key)
		}
	}
	if _, err := u.opts.normalise(); err != nil {
		return storeURL{}, err
	}
	// What the URL says first, then the environment.
	switch {
	case creds != "":
		u.auth.Creds = creds
	case hasUserInfo: // nats.go reads it from the URL
	case getenv("NATS_CREDS") != "":
		u.auth.Creds = getenv("NATS_CREDS")
	case getenv("NATS_NKEY") != "":
		u.auth.Nkey = getenv("NATS_NKEY")
	case getenv("NATS_USER") != "" && getenv("NATS_PASSWORD") != "":
		u.auth.User, u.auth.Password = getenv("NATS_USER"), getenv("NATS_PASSWORD")
	case getenv("NATS_USER") != "":
		u.auth.Token = getenv("NATS_USER")
	}
	u.auth.Cert, u.auth.Key, u.auth.CA = getenv("NATS_CERT"), getenv("NATS_KEY"), getenv("NATS_CA")
	if (u.auth.Cert == "") != (u.auth.Key == "") {
		return bad("NATS_CERT and NATS_KEY go together")
	}
	return u, nil
}

// natsOptions returns the connection options for u.
func (u storeURL) natsOptions() ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("wagent store"),
		nats.MaxReconnects(-1), // a worker outlives a server restart
	}
	a := u.auth
	switch {
	case a.Creds != "":
		opts = append(opts, nats.UserCredentials(a.Creds))
	case a.Nkey != "":
		o, err := nats.NkeyOptionFromSeed(a.Nkey)
		if err != nil {
			return nil, fmt.Errorf("NATS_NKEY: %w", err)
		}
		opts = append(opts, o)
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	}
	if a.Cert != "" {
		opts = append(opts, nats.ClientCert(a.Cert, a.Key))
	}
	if a.CA != "" {
		opts = append(opts, nats.RootCAs(a.CA))
	}
	return opts, nil
}

// redact hides the password or token in URLs, for messages.
func redact(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			// Not a URL (a stray % or a space in the password): hide
			// whatever stands between the scheme and the last @.
			if at, sc := strings.LastIndex(p, "@"), strings.Index(p, "://"); sc >= 0 && sc < at {
				parts[i] = p[:sc+3] + "xxxxx" + p[at:]
			}
			continue
		}
		if u.User != nil {
			parts[i] = u.Redacted()
			if _, hasPass := u.User.Password(); !hasPass {
				u.User = url.User("xxxxx") // a token
				parts[i] = u.String()
			}
		}
	}
	return strings.Join(parts, ",")
}
