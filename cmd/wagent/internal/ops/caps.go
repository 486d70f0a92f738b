package ops

import (
	"fmt"
	"os"
	"strings"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// Capabilities as ops inspect and ops check show them (ABI 1.2): what a
// manifest requests, and what an op gets from its grants.

// requestedLines describes a manifest's requests, one line each.
func requestedLines(man *hostabi.Manifest) []string {
	var out []string
	c := man.Capabilities
	if len(c.Mounts) > 0 {
		var m []string
		for _, r := range c.Mounts {
			if r.Write {
				m = append(m, r.Path+" (read-write)")
			} else {
				m = append(m, r.Path+" (read-only)")
			}
		}
		out = append(out, "mounts "+strings.Join(m, ", "))
	}
	if len(c.HTTP) > 0 {
		out = append(out, "http "+anyOr(c.HTTP, hostabi.AnyHost, "to whichever hosts the pipeline grants"))
	}
	if len(c.Exec) > 0 {
		out = append(out, "exec "+anyOr(c.Exec, hostabi.AnyCommand, "whichever commands the pipeline grants"))
	}
	return out
}

func anyOr(list []string, any, says string) string {
	var out []string
	for _, s := range list {
		if s == any {
			out = append(out, says)
		} else {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// effectiveLines describes what an op got: requested ∩ granted.
func effectiveLines(op *wasmhost.Op) []string {
	var out []string
	for _, m := range op.Mounts() {
		rw := "read-only"
		if m.Write {
			rw = "read-write"
		}
		out = append(out, fmt.Sprintf("mount %s = %s (%s)", m.GuestPath, m.HostDir, rw))
	}
	if h := op.HTTP(); len(h) > 0 {
		out = append(out, fmt.Sprintf("http %s (at most %d KiB of each response; loopback and private addresses only for hosts granted by name)", strings.Join(h, ", "), op.Limits().HTTPBytes>>10))
	}
	for _, x := range op.Exec() {
		cmd := x.Cmd
		if x.Shell {
			cmd = "sh -c " + fmt.Sprintf("%q", x.Cmd)
		}
		out = append(out, fmt.Sprintf("exec %s (timeout %v, %d KiB of output kept, confinement: %s, enforcement: %s)", cmd, x.Timeout, x.OutputBytes>>10, x.Confinement, x.Enforcement))
	}
	return out
}

// checkGrants are the grants ops check gives an op: what its flags grant,
// and for a request no flag answers a grant that lets the op start
// without reaching anything (an empty folder, a host that never resolves,
// /bin/true).
func checkGrants(man *hostabi.Manifest, mounts []wasmhost.Mount, http, exec []string, unconfined bool, cleanup *[]string) (wasmhost.Grants, error) {
	g := wasmhost.Grants{Mounts: mounts, HTTP: http}
	for _, e := range exec {
		g.Exec = append(g.Exec, wasmhost.ExecGrant{Cmd: e, Unconfined: unconfined})
	}
	for _, want := range man.Capabilities.Mounts {
		if !hasMount(g.Mounts, want.Path) {
			dir, err := os.MkdirTemp("", "wagent-check-")
			if err != nil {
				return g, err
			}
			*cleanup = append(*cleanup, dir)
			g.Mounts = append(g.Mounts, wasmhost.Mount{HostDir: dir, GuestPath: want.Path, Write: want.Write})
		}
	}
	if len(http) == 0 {
		for _, h := range man.Capabilities.HTTP {
			if h == hostabi.AnyHost {
				h = "check.invalid" // reserved: it never resolves
			}
			g.HTTP = append(g.HTTP, h)
		}
	}
	if len(exec) == 0 {
		sample := unconfined || !wasmhost.CanConfine()
		for _, e := range man.Capabilities.Exec {
			if e == hostabi.AnyCommand {
				e = "true"
			}
			g.Exec = append(g.Exec, wasmhost.ExecGrant{Cmd: e, Unconfined: sample})
		}
	}
	return g, nil
}
