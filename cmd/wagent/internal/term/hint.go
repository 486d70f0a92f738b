package term

import (
	"net/url"
	"strings"
)

// Hints is the store a command was given on its command line, for the
// follow-up commands it prints (wagent log -f ID, wagent resume ID, …):
// a hint that forgot --store would look in the default store. Copies of
// an Env share it.
type Hints struct {
	store string
	// creds: the store URL held a user, password or token, left out of
	// the hints (they are never printed).
	creds bool
}

// SetStore records the --store value the command was given ("": none,
// the store came from $WAGENT_STORE, the config file or the default,
// which a follow-up command finds the same way).
func (h *Hints) SetStore(v string) {
	if h == nil {
		return
	}
	h.store, h.creds = StripCredentials(v)
}

// Hint is the command "wagent ARGS", with --store when the command was
// given one, for a person to type next. A store URL's credentials are left
// out, and the hint says to pass them again.
func (e *Env) Hint(args ...string) string {
	s := "wagent " + strings.Join(args, " ")
	if e == nil || e.Hints == nil || e.Hints.store == "" {
		return s
	}
	s += " --store " + shellWord(e.Hints.store)
	if e.Hints.creds {
		s += " (with the store's credentials again)"
	}
	return s
}

// StoreHint is the store a hint names ("" for none) and whether its
// credentials were left out.
func (e *Env) StoreHint() (string, bool) {
	if e == nil || e.Hints == nil {
		return "", false
	}
	return e.Hints.store, e.Hints.creds
}

// StripCredentials removes the user, password or token from each server
// of a store URL (nats://user:pw@host:4222,nats://tok@h2?stream=X) and
// the query's secrets (token=, password=, user=, nkey=, creds=). found
// says whether it removed any. A directory is returned as it is.
func StripCredentials(v string) (string, bool) {
	i := strings.Index(v, "://")
	if i < 0 {
		return v, false
	}
	found := false
	servers, query, hasQuery := strings.Cut(v, "?")
	var out []string
	for _, s := range strings.Split(servers, ",") {
		if j := strings.Index(s, "://"); j >= 0 {
			if at := strings.LastIndex(s, "@"); at > j {
				s = s[:j+3] + s[at+1:]
				found = true
			}
		}
		out = append(out, s)
	}
	r := strings.Join(out, ",")
	if hasQuery {
		q, err := url.ParseQuery(query)
		if err != nil {
			return r, true // unreadable: keep none of it
		}
		for k := range q {
			switch strings.ToLower(k) {
			case "token", "password", "pass", "user", "username", "nkey", "seed", "creds", "jwt":
				q.Del(k)
				found = true
			}
		}
		if len(q) > 0 {
			r += "?" + q.Encode()
		}
	}
	return r, found
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,=@+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
