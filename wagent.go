// Package wagent is the one import a Go program needs to embed wagent. Open
// returns the same application node the wagent command runs on (package
// app): it opens a store (a directory the CLI may have created too),
// continues its sessions with the settings they recorded, creates new ones
// for principals the program names, and serves the API as an http.Handler
// (server.New) the program mounts behind its own authentication.
//
// A program that wants other parts (another store backend, a pipeline built
// in code, native operations) uses the packages this one is made of: app,
// engine, store, pipeline, wasmhost and server.
package wagent

import (
	"context"
	"fmt"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/wasmhost"
)

// Node is an open store's application: see app.Node.
type Node = app.Node

// Options configure Open. They are plain values, checked once by Open.
type Options struct {
	// Dir is the store directory, opened with the embedded badger backend
	// (created if missing, held by this process until Close): the same
	// store the wagent command uses with --store DIR. Empty keeps the log
	// in memory: nothing survives the process. Log, if set, is used
	// instead (and not closed by Close).
	Dir string
	Log store.Log

	// Pipelines are pipelines from bytes, by name, with the modules their
	// entries name (plugins loaded from memory: a database, an upload);
	// a session's settings name one with Pipeline: NAME. More can be
	// added with Node.AddPipeline.
	Pipelines map[string]app.PipelineSource
	// Provider, if set, answers every session whose settings name the
	// provider "embedded" (and Providers adds factories by name beside
	// openai, anthropic and script).
	Provider  provider.Provider
	Providers map[string]app.ProviderFactory
	// Policy says what each principal may do (default: the local user
	// everything, anyone else only files under ProjectRoots).
	Policy       func(app.Principal) app.Policy
	ProjectRoots []string
	// Getenv is the environment sessions take API keys from (default
	// os.Getenv).
	Getenv func(string) string

	// CacheDir caches compiled modules on disk; empty uses
	// wasmhost.DefaultCacheDir.
	CacheDir string
	// Durability says when appends are made durable (default
	// engine.SyncAtBoundaries).
	Durability engine.Durability
}

// Open opens the store and returns its node, ready to run sessions. A
// session the wagent command created runs with what it recorded. Nothing
// is written to the store.
func Open(ctx context.Context, o Options) (*Node, error) {
	log, own := o.Log, false
	switch {
	case log != nil:
	case o.Dir != "":
		s, err := app.OpenStoreDir(o.Dir, false)
		if err != nil {
			return nil, fmt.Errorf("wagent: %w", err)
		}
		log, own = s, true
	default:
		log, own = store.NewMemory(), true
	}
	providers := map[string]app.ProviderFactory{}
	for k, f := range o.Providers {
		providers[k] = f
	}
	if o.Provider != nil {
		providers["embedded"] = app.FixedProvider(o.Provider)
	}
	var rtOpts []wasmhost.Option
	if o.CacheDir != "" {
		rtOpts = append(rtOpts, wasmhost.WithCacheDir(o.CacheDir))
	}
	n, err := app.Open(ctx, app.Options{
		Log: log, CloseLog: own && o.Log == nil, Drive: true,
		Getenv: o.Getenv, Policy: o.Policy, ProjectRoots: o.ProjectRoots,
		Pipelines: o.Pipelines, Providers: providers, RuntimeOptions: rtOpts,
		Base: engine.Config{Durability: o.Durability},
	})
	if err != nil {
		if own {
			log.Close()
		}
		return nil, fmt.Errorf("wagent: %w", err)
	}
	return n, nil
}
