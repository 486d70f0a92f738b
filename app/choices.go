package app

import (
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/wagent/wagent/pipeline"
)

// Choices are what a client starting a session may pick from: the node
// config's profiles and defaults, and the pipelines it may name.
type Choices struct {
	// Profiles are the config's profiles, by name.
	Profiles []ProfileChoice `json:"profiles"`
	// DefaultProfile is the profile used when none is named ("" for
	// none).
	DefaultProfile string `json:"default_profile,omitempty"`
	// Provider and Model are what a session gets when it names neither.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Pipelines are pipelines the client may name: the node's
	// registered ones, the config's, and pipeline files under the
	// project roots.
	Pipelines []PipelineChoice `json:"pipelines"`
}

// ProfileChoice describes a profile without its secrets (it has none:
// only the name of the key's variable).
type ProfileChoice struct {
	Name     string `json:"name"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	BaseURL  string `json:"base_url,omitempty"`
	Pipeline string `json:"pipeline,omitempty"`
}

// PipelineChoice is a pipeline a client may name in its settings.
type PipelineChoice struct {
	// Pipeline is the value for Settings.Pipeline.
	Pipeline string `json:"pipeline"`
	// Name is a short name to show.
	Name string `json:"name"`
	// Ops is how many ops it runs.
	Ops int `json:"ops,omitempty"`
}

// maxPipelineChoices bounds the pipeline files listed from the project
// roots, and maxChoiceDepth how deep under a root they are looked for.
const (
	maxPipelineChoices = 100
	maxChoiceDepth     = 3
	// maxChoiceEntries and maxChoiceParses bound one listing's work.
	maxChoiceEntries = 20000
	maxChoiceParses  = 400
)

// Choices lists what p may pick from to start a session.
func (n *Node) Choices(p Principal) Choices {
	var c Choices
	seen := map[string]bool{}
	add := func(pc PipelineChoice) {
		if pc.Pipeline != "" && !seen[pc.Pipeline] && len(c.Pipelines) < maxPipelineChoices {
			seen[pc.Pipeline] = true
			c.Pipelines = append(c.Pipelines, pc)
		}
	}
	if cfg := n.o.Config; cfg != nil {
		src := &Sources{getenv: n.getenv, cfg: cfg}
		c.DefaultProfile = cfg.DefaultProfile
		top, _ := NewSources(cfg, func(string) string { return "" }, nil, "", "")
		if top != nil {
			c.Provider, c.Model = top.Get("provider").Value, top.Get("model").Value
		}
		var names []string
		for name := range cfg.Profiles {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			pr := cfg.Profiles[name]
			pc := ProfileChoice{Name: name, Provider: pr.Provider, Model: pr.Model, BaseURL: withoutCredentials(pr.BaseURL)}
			if pr.Pipeline != "" {
				pc.Pipeline = src.cfgPath("pipeline", pr.Pipeline)
				add(PipelineChoice{Pipeline: pc.Pipeline, Name: filepath.Base(pc.Pipeline) + " (profile " + name + ")"})
			}
			c.Profiles = append(c.Profiles, pc)
		}
		if v := cfg.Top.Pipeline; v != "" {
			path := src.cfgPath("pipeline", v)
			add(PipelineChoice{Pipeline: path, Name: filepath.Base(path) + " (config)"})
		}
	}
	if c.Provider == "" {
		c.Provider = "openai"
	}
	if c.Model == "" {
		c.Model = n.getenv("WAGENT_MODEL")
	}
	// Only the registered pipelines p may name: a tenant's are not
	// another tenant's to see.
	pol := n.o.Policy(p)
	n.mu.Lock()
	var reg []string
	for name := range n.registered {
		reg = append(reg, name)
	}
	n.mu.Unlock()
	sort.Strings(reg)
	for _, name := range reg {
		if pol.Pipeline == nil || pol.Pipeline(name) { // the embedder's code: not under n.mu
			add(PipelineChoice{Pipeline: name, Name: name})
		}
	}
	for _, root := range n.o.ProjectRoots {
		if root == "" {
			continue
		}
		n.pipelineFiles(root, add)
	}
	if c.Profiles == nil {
		c.Profiles = []ProfileChoice{}
	}
	if c.Pipelines == nil {
		c.Pipelines = []PipelineChoice{}
	}
	return c
}

// pipelineFiles calls add for each YAML file under root (a few levels
// deep, hidden folders and node_modules skipped) that parses as a
// pipeline.
func (n *Node) pipelineFiles(root string, add func(PipelineChoice)) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return
	}
	// Bounded whatever the root holds (a session's agent may write
	// there): entries visited, files read.
	found, visited, parsed := 0, 0, 0
	filepath.WalkDir(real, func(path string, d fs.DirEntry, err error) error {
		visited++
		if err != nil || found >= maxPipelineChoices || visited > maxChoiceEntries || parsed >= maxChoiceParses {
			return filepath.SkipAll
		}
		rel, _ := filepath.Rel(real, path)
		if d.IsDir() {
			name := d.Name()
			if path != real && (strings.HasPrefix(name, ".") || name == "node_modules" || strings.Count(rel, string(filepath.Separator)) >= maxChoiceDepth) {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); (ext != ".yaml" && ext != ".yml") || !d.Type().IsRegular() {
			return nil
		}
		parsed++
		b, ok := readRegular(path, 1<<20)
		if !ok {
			return nil
		}
		spec, err := pipeline.Parse(b, path, filepath.Dir(path))
		if err != nil || len(spec.Ops) == 0 {
			return nil
		}
		found++
		add(PipelineChoice{Pipeline: path, Name: rel, Ops: len(spec.Ops)})
		return nil
	})
}

// readRegular reads the file at path if it is, when opened, a regular
// file of at most limit bytes: opened without following a link and
// without blocking (a file swapped for a FIFO after the walk saw it must
// not hang the request).
func readRegular(path string, limit int64) ([]byte, bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > limit {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(b)) > limit {
		return nil, false
	}
	return b, true
}

// withoutCredentials is a base URL as the choices show it: where it
// points, without what it may carry to authenticate (user:password@, a
// query such as ?api-key=, a fragment), which is the owner's.
func withoutCredentials(u string) string {
	if u == "" {
		return ""
	}
	pu, err := url.Parse(u)
	if err != nil {
		return ""
	}
	pu.User, pu.RawQuery, pu.ForceQuery, pu.Fragment, pu.RawFragment = nil, "", false, "", ""
	return pu.String()
}
