// Package app is wagent's application layer: the one composition root
// every way into wagent goes through (the CLI, the API server, workers,
// and Go programs through package wagent).
//
// A Node opens a store's sessions the same way whoever asks: it reads the
// settings a session recorded (Settings, a versioned schema that also
// records who chose them), builds their provider (a registry: openai,
// anthropic, script, and an embedder's own) and their pipeline (loaded
// once per file contents, or from bytes registered with AddPipeline), and
// keeps the secrets clients hand over in memory only. It drives sessions
// itself or leaves them to workers (Options.Wake, Node.Worker).
//
// Every request has a Principal: the local user (the owner's socket or
// in-process: trusted like their shell, with their config, keys and
// files), a remote client with the API token, a worker of a shared store,
// or an embedder's own. A Policy says what each may do: which files its
// sessions may read (the project roots), where the node's own API keys may
// go (trusted base URLs), how many sessions it may create, whether it sees
// only its own sessions, which registered pipelines it may name. Settings
// record their principal, so the rule holds for whoever opens the session
// later; an import cannot claim another principal.
//
// Errors a caller branches on are *Error values with a Reason (errors.As),
// never matched by their text.
//
// app imports the engine, the runtimes and the stores; nothing below it
// imports app, and package server, which serves a Node over HTTP, sits
// above it.
package app
