package jetstream

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/store"
)

// A requirement is a server feature the store uses, with the first
// nats-server release that has it and the JetStream API level that
// release reports (0: older than API levels, which came with 2.11).
type requirement struct {
	feature  string
	version  serverVersion
	apiLevel int
}

// requirements lists what wagent's NATS store uses, the log here and the
// workers' bus (package worker) on the same connection, oldest first.
// Features older than 2.9 (streams, key-value buckets with a bucket TTL,
// per-subject expected sequences, pull consumers) are not listed: every
// release these checks can tell from has them.
var requirements = []requirement{
	{"direct gets (allow_direct) on the log stream", serverVersion{2, 9, 0}, 0},
	{"message schedules (allow_msg_schedules) on the wake-up stream", serverVersion{2, 12, 0}, 2},
}

// MinServerVersion is the oldest nats-server release that has every
// feature the store uses: the newest release in requirements.
const MinServerVersion = "2.12.0"

// installHint says how to run a server that has everything.
const installHint = "upgrade it (docker run -p 4222:4222 nats:2.12 -js, or go install github.com/nats-io/nats-server/v2@v2.15.2 and run nats-server -js)"

// serverVersion is a nats-server release: major, minor, patch.
type serverVersion [3]int

func (v serverVersion) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

func (v serverVersion) less(w serverVersion) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

// parseVersion reads the version a server's INFO line reports: "2.9.10",
// "v2.12.0", "2.11.0-RC.1" or "2.10.4-beta" (a pre-release counts as its
// release). ok is false for anything else.
func parseVersion(s string) (v serverVersion, ok bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || p[0] == '+' {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

// checkVersion says, in one line, which feature a server at url
// reporting version lacks, or nil when it has them all. A version that
// does not parse is left to checkAPILevel.
func checkVersion(url, version string) error {
	v, ok := parseVersion(version)
	if !ok {
		return nil
	}
	for _, r := range requirements {
		if v.less(r.version) {
			return tooOld(url, version, r)
		}
	}
	return nil
}

// checkAPILevel is checkVersion for a server whose version string says
// nothing usable: it goes by the JetStream API level the account info
// reports (0 when the server predates levels).
func checkAPILevel(url, version string, level int) error {
	for _, r := range requirements {
		if level < r.apiLevel {
			return tooOld(url, fmt.Sprintf("%q (JetStream API level %d)", version, level), r)
		}
	}
	return nil
}

func tooOld(url, version string, r requirement) error {
	return oldServerError(fmt.Sprintf("nats-server at %s is %s; the store needs %s (nats-server %s or later): %s",
		url, version, r.feature, r.version, installHint))
}

// oldServerError is the line tooOld writes. It is a store.ErrInvalid
// without that error's prefix, so the line reads the same wherever it is
// shown.
type oldServerError string

func (e oldServerError) Error() string { return string(e) }

func (e oldServerError) Is(target error) bool { return target == store.ErrInvalid }

// checkServer refuses a server that lacks a feature the store uses. It
// reads the version from the INFO the server sent on connecting, which
// costs nothing; only a version it cannot read costs a round trip, for the
// JetStream API level. A cluster of mixed releases is judged by the server
// this connection reached.
func checkServer(ctx context.Context, nc *nats.Conn, js natsjs.JetStream) error {
	url, version := nc.ConnectedUrlRedacted(), nc.ConnectedServerVersion()
	if _, ok := parseVersion(version); ok {
		return checkVersion(url, version)
	}
	// An empty version is a connection between servers (reconnecting):
	// the request waits for the next one, as Open's own requests would.
	info, err := js.AccountInfo(ctx)
	if err != nil {
		return fmt.Errorf("open jetstream store: read the server's JetStream API level (its version %q says nothing): %w", version, err)
	}
	if url, version = nc.ConnectedUrlRedacted(), nc.ConnectedServerVersion(); version != "" {
		if _, ok := parseVersion(version); ok {
			return checkVersion(url, version)
		}
	}
	return checkAPILevel(url, version, info.API.Level)
}
