// Package wagent is the one import a Go program needs to embed wagent: it
// ties the embedded defaults together (the badger store in a directory, the
// wasm runtime with the built-in operations, the default pipeline) and
// returns an Agent that runs sessions.
//
// A program that wants other parts (another store backend, a pipeline built
// in code, native operations) uses the packages this one is made of:
// engine, store, pipeline and wasmhost.
package wagent

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
	"github.com/wagent/wagent/tools/mcp"
	"github.com/wagent/wagent/wasmhost"
)

// Options configure New. They are plain values, checked once by New.
type Options struct {
	// Dir is the store directory, opened with the embedded badger backend
	// (created if missing, held by this process until Close). Empty keeps
	// the log in memory: nothing survives the process.
	Dir string

	// Pipeline is the text of a pipeline file (YAML, see package pipeline).
	// Empty runs the built-in default pipeline.
	Pipeline string
	// PipelineDir resolves relative paths in Pipeline (modules, mounts);
	// default the working directory.
	PipelineDir string
	// Modules supplies module bytes for pipeline entries whose use: names
	// a key of this map, so plugins can be loaded from memory (a database,
	// an upload) instead of files. They are checked like any module.
	Modules map[string][]byte
	// SkillsDir is the folder the default pipeline's skills op mounts
	// read-only (ignored with Pipeline set; none if empty).
	SkillsDir string

	// Provider answers model requests (openai.New, anthropic.New,
	// script.Parse, or your own). Required.
	Provider provider.Provider
	// Model goes into each request header.
	Model string

	// CacheDir caches compiled modules on disk; empty uses
	// wasmhost.DefaultCacheDir.
	CacheDir string
	// Durability says when appends are made durable (default
	// engine.SyncAtBoundaries).
	Durability engine.Durability
}

// Agent runs sessions with the options' store, pipeline and provider. Its
// Host methods (Create, Open, Watch, Sessions, Dispose) are those of
// session.Host. It is safe for concurrent use.
type Agent struct {
	*session.Host
	log store.Log
	rt  *wasmhost.Runtime
	mcp *mcp.Hub // the pipeline's MCP servers, shared by its sessions
}

// New checks the options, opens the store, loads the pipeline (every
// module checked and compiled, or found in the cache) and returns an Agent.
// Nothing is written to the store.
func New(ctx context.Context, o Options) (*Agent, error) {
	if o.Provider == nil {
		return nil, errors.New("wagent: Options.Provider is required (openai.New, anthropic.New or script.Parse)")
	}
	spec := builtins.DefaultPipeline(o.SkillsDir)
	if o.Pipeline != "" {
		dir := o.PipelineDir
		if dir == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, fmt.Errorf("wagent: %w", err)
			}
			dir = wd
		}
		var err error
		if spec, err = pipeline.Parse([]byte(o.Pipeline), "(Options.Pipeline)", dir); err != nil {
			return nil, fmt.Errorf("wagent: %w", err)
		}
		for i := range spec.Ops {
			if b, ok := o.Modules[spec.Ops[i].Use]; ok {
				spec.Ops[i].Module = b
			}
		}
	}
	cache := o.CacheDir
	if cache == "" {
		cache = wasmhost.DefaultCacheDir()
	}
	rt, err := wasmhost.NewRuntime(ctx, wasmhost.WithCacheDir(cache))
	if err != nil {
		return nil, fmt.Errorf("wagent: %w", err)
	}
	hub := mcp.NewHub()
	loaded, err := spec.Build(ctx, pipeline.Options{Runtime: rt, Builtins: builtins.Bundle(), MCP: hub})
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("wagent: %w", err)
	}
	var log store.Log = store.NewMemory()
	if o.Dir != "" {
		if log, err = badger.Open(o.Dir, badger.Options{}); err != nil {
			rt.Close(ctx)
			return nil, fmt.Errorf("wagent: %w", err)
		}
	}
	host := session.NewHost(engine.Config{Log: log, Pipeline: loaded.Pipeline, Provider: o.Provider, Model: o.Model, Durability: o.Durability})
	return &Agent{Host: host, log: log, rt: rt, mcp: hub}, nil
}

// Log returns the store the agent's sessions are logged in.
func (a *Agent) Log() store.Log { return a.log }

// Session opens the session id, creating it if it does not exist.
func (a *Agent) Session(ctx context.Context, id string) (*session.Session, error) {
	s, err := a.Host.Open(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return a.Host.Create(ctx, id, event.SessionCreated{CreatedBy: "wagent (embedded)"})
	}
	return s, err
}

// Close disposes of every session (a running turn ends "disposed"), ends
// the pipeline's MCP servers, then closes the wasm runtime and the store.
func (a *Agent) Close() error {
	ctx := context.Background()
	err := a.Host.Close(ctx)
	a.mcp.Close()
	return errors.Join(err, a.rt.Close(ctx), a.log.Close())
}
