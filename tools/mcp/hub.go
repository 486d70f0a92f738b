package mcp

import "sync"

// Hub holds the MCP servers of one process. Pipelines built with the same
// hub share a server whose config is the same (name, command or url,
// environment, headers), so the sessions of a process share one server
// process. Close ends them all; a process that runs servers must call it
// before it exits.
type Hub struct {
	mu      sync.Mutex
	servers map[string]*Server
	order   []*Server
}

// NewHub returns an empty hub. Servers start only when first needed.
func NewHub() *Hub { return &Hub{servers: map[string]*Server{}} }

// Server returns the hub's server for cfg, creating it (not starting it)
// on first use.
func (h *Hub) Server(cfg Config) *Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := cfg.key()
	if s := h.servers[k]; s != nil {
		return s
	}
	s := newServer(cfg)
	h.servers[k] = s
	h.order = append(h.order, s)
	return s
}

// Servers lists the hub's servers in the order they were first asked for.
func (h *Hub) Servers() []*Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Server(nil), h.order...)
}

// Close ends every server of the hub, in parallel, and waits for them.
func (h *Hub) Close() {
	h.mu.Lock()
	servers := h.order
	h.order, h.servers = nil, map[string]*Server{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.Close() }()
	}
	wg.Wait()
}
