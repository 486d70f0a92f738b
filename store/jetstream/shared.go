package jetstream

import "github.com/nats-io/nats.go"

// What other packages on the same servers share with the store: a worker
// fleet coordinates (wake-ups, leases) on the connection the store uses,
// with subjects keyed by session the way the store keys its own.

// Conn returns the NATS connection the Log uses. A Log opened with OpenURL
// owns it and closes it on Close; one opened with Open was handed it.
func (l *Log) Conn() *nats.Conn { return l.nc }

// SessionToken returns the subject token of a valid session id: the id
// with '.' written %2E and ':' written %3A (see the package documentation).
func SessionToken(id string) string { return sessionToken(id) }

// SessionOfToken is the inverse of SessionToken; it reports false for a
// token SessionToken does not write.
func SessionOfToken(token string) (string, bool) { return sessionOfToken(token) }
