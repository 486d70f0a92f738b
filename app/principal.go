package app

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Kind is the kind of a Principal.
type Kind string

const (
	// KindLocal is the user the node runs as, asking through the owner's
	// Unix socket (same uid, mode 0600) or in-process: trusted like a
	// command in their own shell, with their config, keys and files.
	KindLocal Kind = "local"
	// KindRemote is a client with the API token, over TCP: its sessions
	// read files only under the project roots, and the node's own API
	// keys go only to base URLs the node trusts.
	KindRemote Kind = "remote"
	// KindWorker is a worker driving sessions of a shared store that
	// anyone with access to it may have written: restricted as a remote
	// client is.
	KindWorker Kind = "worker"
)

// Principal is who asks the node for something. Embedders map their own
// users onto principals of their own kinds and say what each may do
// (Options.Policy).
type Principal struct {
	Kind Kind
	// Name tells principals of one kind apart (a tenant, a token's name);
	// it is recorded with the settings the principal chooses.
	Name string
}

var (
	// Local is the node's own user.
	Local = Principal{Kind: KindLocal}
	// Remote is a client with the API token.
	Remote = Principal{Kind: KindRemote}
	// Worker is a worker of a shared store.
	Worker = Principal{Kind: KindWorker}
)

// String is the principal as settings record it ("local", "remote:NAME").
func (p Principal) String() string {
	if p.Name == "" {
		return string(p.Kind)
	}
	return string(p.Kind) + ":" + p.Name
}

// Valid says why p cannot be recorded and read back as itself (a kind
// with ":" would read back as another principal), nil if it can.
func (p Principal) Valid() error {
	if p.Kind == "" || strings.ContainsAny(string(p.Kind), ":") {
		return fmt.Errorf("principal kind %q: a kind is a non-empty word without ':'", p.Kind)
	}
	for _, r := range p.String() {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("principal %q has a control character", p.String())
		}
	}
	if ParsePrincipal(p.String()) != p {
		return fmt.Errorf("principal %q does not read back as itself", p.String())
	}
	return nil
}

// ParsePrincipal reads a principal recorded by String.
func ParsePrincipal(s string) Principal {
	k, n, _ := strings.Cut(s, ":")
	return Principal{Kind: Kind(k), Name: n}
}

// Policy is what a principal may do.
type Policy struct {
	// AnyFiles lets the principal's sessions read any file they name
	// (pipelines, scripts, the project folder agents-md mounts); without
	// it, only files under the node's project roots, or pipelines
	// registered with the node or named by its config.
	AnyFiles bool
	// AnyBaseURL lets the node send its own API keys to any base URL the
	// principal's settings name; without it only to the providers'
	// defaults, the node's *_BASE_URL, its config's base URLs and
	// WAGENT_TRUSTED_BASE_URLS (a principal that hands over its own key
	// may name any).
	AnyBaseURL bool
	// MaxSessions bounds the sessions the principal may create on this
	// node (0: no bound).
	MaxSessions int
	// OwnSessionsOnly limits the principal to the sessions it created:
	// others are not listed and answer as if they did not exist (a
	// tenant of a shared node).
	OwnSessionsOnly bool
	// Pipeline, if set, says which pipelines registered with the node
	// (Node.AddPipeline) the principal may name: a tenant its own.
	Pipeline func(name string) bool
}

// DefaultPolicy trusts the local user fully and restricts everyone else.
func DefaultPolicy(p Principal) Policy {
	if p.Kind == KindLocal {
		return Policy{AnyFiles: true, AnyBaseURL: true}
	}
	return Policy{}
}

// underRoots returns path, with symbolic links resolved, if it lies under
// one of roots (also resolved), and "" otherwise.
func underRoots(roots []string, path string) string {
	if path == "" {
		return ""
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	for _, root := range roots {
		if root == "" {
			continue
		}
		r, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(r, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return real
		}
	}
	return ""
}
