package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/wagent/wagent/hostabi"
)

// Pipeline is the ordered list of operations a session runs with. Order is
// priority: at a hook, the first op that does not skip wins.
type Pipeline struct {
	ops       []Operation
	manifests []*hostabi.Manifest
	byName    map[string]int
}

// NewPipeline checks the ops' manifests and orders them as given: names
// must be unique and non-empty, hooks known, and no tool or command owned
// by two ops (a namespace such as "files__*" owns every name under it, so
// it may not overlap another op's tool or namespace).
func NewPipeline(ops ...Operation) (*Pipeline, error) {
	p := &Pipeline{byName: map[string]int{}}
	type owned struct{ entry, op string }
	var tools []owned
	commands := map[string]string{}
	for i, op := range ops {
		if op == nil {
			return nil, fmt.Errorf("pipeline: op %d is nil", i)
		}
		m := op.Manifest()
		if m == nil || m.Name == "" {
			return nil, fmt.Errorf("pipeline: op %d has no name in its manifest", i)
		}
		if _, dup := p.byName[m.Name]; dup {
			return nil, fmt.Errorf("pipeline: two ops are named %q; names must be unique", m.Name)
		}
		for _, h := range m.Hooks {
			if !h.Known() {
				return nil, fmt.Errorf("pipeline: op %q declares unknown hook %q", m.Name, h)
			}
		}
		for _, t := range m.Tools {
			for _, o := range tools {
				if !hostabi.ToolsOverlap(o.entry, t) {
					continue
				}
				if o.entry == t {
					return nil, fmt.Errorf("pipeline: tool %q is owned by both %q and %q", t, o.op, m.Name)
				}
				return nil, fmt.Errorf("pipeline: tools %q of %q and %q of %q overlap; a tool has one owner", o.entry, o.op, t, m.Name)
			}
			tools = append(tools, owned{t, m.Name})
		}
		for _, c := range m.Commands {
			if other, dup := commands[c]; dup {
				return nil, fmt.Errorf("pipeline: command /%s is owned by both %q and %q", c, other, m.Name)
			}
			commands[c] = m.Name
		}
		p.byName[m.Name] = i
		p.ops = append(p.ops, op)
		p.manifests = append(p.manifests, m)
	}
	return p, nil
}

// Len returns the number of ops.
func (p *Pipeline) Len() int { return len(p.ops) }

// Op returns op i and its manifest.
func (p *Pipeline) Op(i int) (Operation, *hostabi.Manifest) { return p.ops[i], p.manifests[i] }

// Lookup returns the op with the given name.
func (p *Pipeline) Lookup(name string) (Operation, *hostabi.Manifest, bool) {
	i, ok := p.byName[name]
	if !ok {
		return nil, nil, false
	}
	return p.ops[i], p.manifests[i], true
}

// commandOwner returns the op owning a slash command.
func (p *Pipeline) commandOwner(name string) (int, bool) {
	for i, m := range p.manifests {
		if m.Handles(hostabi.HookCommand) && m.OwnsCommand(name) {
			return i, true
		}
	}
	return 0, false
}

// Digest identifies the pipeline's ops (names and versions, in order) for
// session/created.
func (p *Pipeline) Digest() string {
	h := sha256.New()
	for _, m := range p.manifests {
		fmt.Fprintf(h, "%s@%s\n", m.Name, m.Version)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}
