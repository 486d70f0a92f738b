package main

import (
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// Where a store lives. --store (or $WAGENT_STORE) takes
//
//	DIR, badger:DIR                  the embedded badger store in DIR (the default)
//	nats://HOST:PORT[,nats://…][?stream=…&replicas=3&…]
//	tls://HOST:PORT…                 a JetStream store (store/jetstream.OpenURL)
//
// Any other scheme is refused: a value such as nats:x or s3://bucket is a
// mistake, never a directory name. A directory whose name looks like a
// scheme is written ./name or badger:name.

// storeLoc is a parsed --store: a badger directory or a NATS URL.
type storeLoc struct {
	dir string
	url string
}

func (l storeLoc) isNATS() bool { return l.url != "" }

// natsSchemes are the URL schemes a JetStream store URL may use.
var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// schemeRe matches what reads as a URL scheme: a letter, then letters,
// digits, '+', '-' or '.', then a colon. One letter is a Windows drive.
var schemeRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]+):`)

// parseStore reads a --store value.
func parseStore(v string) (storeLoc, error) {
	if dir, ok := strings.CutPrefix(v, "badger:"); ok {
		if dir == "" {
			return storeLoc{}, fail(exitUsage, "--store badger: needs a directory (badger:DIR)")
		}
		return storeLoc{dir: dir}, nil
	}
	m := schemeRe.FindStringSubmatch(v)
	if m == nil {
		return storeLoc{dir: v}, nil
	}
	scheme := strings.ToLower(m[1])
	if natsSchemes[scheme] && strings.HasPrefix(v[len(m[0]):], "//") {
		return storeLoc{url: v}, nil
	}
	if natsSchemes[scheme] {
		return storeLoc{}, fail(exitUsage, "--store %s: a NATS store is a URL such as %s://HOST:4222 (for a directory of that name write ./%s)", v, scheme, v)
	}
	return storeLoc{}, fail(exitUsage, "--store %s: this build does not know stores of scheme %q; it knows DIR, badger:DIR and nats://HOST:PORT (for a directory of that name write ./%s)", v, scheme, v)
}

// storeLocation finds the command's store: --store, $WAGENT_STORE, the
// config file's store:, or the default directory.
func storeLocation(c *cli.Context, env *cliEnv) (storeLoc, error) {
	// --store may come before the command (wagent --store DIR sessions)
	// or after it: the nearest one given wins.
	var v string
	for _, cc := range c.Lineage() {
		if v = cc.String("store"); v != "" {
			break
		}
	}
	// Follow-up commands it prints name the store it was given (one from
	// the environment or the config file they find themselves).
	env.Hints.SetStore(v)
	if v == "" {
		v = env.Getenv("WAGENT_STORE")
	}
	if v == "" {
		cfg, err := env.LoadConfig()
		if err != nil {
			return storeLoc{}, err
		}
		v = cfg.Store
	}
	if v != "" {
		return parseStore(v)
	}
	dir, err := defaultStoreDir(env)
	return storeLoc{dir: dir}, err
}

// storeDir finds the command's store directory; a NATS store is refused
// (the command needs a directory: the store's lock, its socket).
func storeDir(c *cli.Context, env *cliEnv) (string, error) {
	loc, err := storeLocation(c, env)
	if err != nil {
		return "", err
	}
	if loc.isNATS() {
		return "", fail(exitUsage, "wagent %s needs a store directory, not %s", c.Command.FullName(), redactURL(loc.url))
	}
	return loc.dir, nil
}

// redactURL hides a password or token in a store URL, for messages.
func redactURL(u string) string {
	servers, query, hasQuery := strings.Cut(u, "?")
	var out []string
	for _, s := range strings.Split(servers, ",") {
		if at := strings.LastIndex(s, "@"); at >= 0 {
			if i := strings.Index(s, "://"); i >= 0 && i < at {
				s = s[:i+3] + "xxxxx" + s[at:]
			}
		}
		out = append(out, s)
	}
	r := strings.Join(out, ",")
	if hasQuery {
		r += "?" + query
	}
	return r
}
