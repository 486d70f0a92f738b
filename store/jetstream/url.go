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
// max_append_bytes, timeout (a Go duration) and creds (a credentials file),
// each as the Options field of that name. An unknown key is an error, so a
// misspelt option does not silently fall back to a default. With no server
// before the query, NATS_URL is used, or nats.DefaultURL.
//
// Credentials come, in order, from the URL (user:password@ or token@, which
// nats.go reads itself), the creds key, or the environment variables the
// nats command line tool reads: NATS_CREDS (a credentials file), NATS_NKEY
// (an nkey seed file), NATS_USER with NATS_PASSWORD, or NATS_USER alone as a
// token. NATS_CERT, NATS_KEY and NATS_CA name TLS files. natsOpts are
// applied last and override all of these.
func OpenURL(ctx context.Context, rawURL string, natsOpts ...nats.Option) (*Log, error) {
	servers, opts, connOpts, err := parseURL(rawURL, os.Getenv)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(servers, append(connOpts, natsOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("open jetstream store: connect to %s: %w", redact(servers), err)
	}
	l, err := Open(ctx, nc, opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	l.ownConn = true
	return l, nil
}

// parseURL splits a store URL into the servers to connect to, the store's
// options and the connection's options. getenv reads the environment.
func parseURL(rawURL string, getenv func(string) string) (servers string, opts Options, connOpts []nats.Option, err error) {
	bad := func(format string, args ...any) (string, Options, []nats.Option, error) {
		return "", Options{}, nil, fmt.Errorf("%w: jetstream store URL %s: %s", store.ErrInvalid, redact(rawURL), fmt.Sprintf(format, args...))
	}
	servers, query, _ := strings.Cut(rawURL, "?")
	if servers == "" {
		servers = getenv("NATS_URL")
	}
	if servers == "" {
		servers = nats.DefaultURL
	}
	hasUserInfo := false
	for _, s := range strings.Split(servers, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return bad("server %q is not a URL such as nats://host:4222", redact(s))
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return bad("server %q: scheme %q, want nats, tls, ws or wss", redact(s), u.Scheme)
		}
		if u.User != nil {
			hasUserInfo = true
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: %v", err)
	}
	creds := getenv("NATS_CREDS")
	for key, vals := range q {
		if len(vals) != 1 {
			return bad("%s is given %d times", key, len(vals))
		}
		v := vals[0]
		switch key {
		case "stream":
			opts.Stream = v
		case "subject":
			opts.Subject = v
		case "replicas":
			if opts.Replicas, err = strconv.Atoi(v); err != nil {
				return bad("replicas %q is not a number", v)
			}
		case "storage":
			opts.Storage = Storage(v)
		case "max_append_bytes":
			if opts.MaxAppendBytes, err = strconv.Atoi(v); err != nil {
				return bad("max_append_bytes %q is not a number", v)
			}
		case "timeout":
			if opts.Timeout, err = time.ParseDuration(v); err != nil {
				return bad("timeout %q is not a duration such as 5s", v)
			}
		case "creds":
			creds = v
		default:
			return bad("unknown option %q (want stream, subject, replicas, storage, max_append_bytes, timeout or creds)", key)
		}
	}
	if _, err := opts.normalise(); err != nil {
		return "", Options{}, nil, err
	}

	connOpts = []nats.Option{
		nats.Name("wagent store"),
		nats.MaxReconnects(-1), // a worker outlives a server restart
	}
	switch {
	case creds != "":
		connOpts = append(connOpts, nats.UserCredentials(creds))
	case getenv("NATS_NKEY") != "":
		o, err := nats.NkeyOptionFromSeed(getenv("NATS_NKEY"))
		if err != nil {
			return bad("NATS_NKEY: %v", err)
		}
		connOpts = append(connOpts, o)
	case hasUserInfo:
	case getenv("NATS_USER") != "" && getenv("NATS_PASSWORD") != "":
		connOpts = append(connOpts, nats.UserInfo(getenv("NATS_USER"), getenv("NATS_PASSWORD")))
	case getenv("NATS_USER") != "":
		connOpts = append(connOpts, nats.Token(getenv("NATS_USER")))
	}
	if cert, key := getenv("NATS_CERT"), getenv("NATS_KEY"); cert != "" || key != "" {
		if cert == "" || key == "" {
			return bad("NATS_CERT and NATS_KEY go together")
		}
		connOpts = append(connOpts, nats.ClientCert(cert, key))
	}
	if ca := getenv("NATS_CA"); ca != "" {
		connOpts = append(connOpts, nats.RootCAs(ca))
	}
	return servers, opts, connOpts, nil
}

// redact hides the password or token in URLs, for messages.
func redact(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
			if _, hasPass := u.User.Password(); !hasPass {
				u.User = url.User("xxxxx") // a token
				parts[i] = u.String()
			}
		}
	}
	return strings.Join(parts, ",")
}
