// Package event is the schema of a session's log and its fold: the event
// types and their data (DESIGN.md §3), the State a log folds into and the
// invariants the fold holds a log to, snapshots of the fold, the checks a
// fork point or an imported log must pass, and the call keys and digests
// that name calls.
//
// A log is read here, never written: the machine (package engine) decides
// and appends transitions, the driver (package engine/session) runs it.
// Whatever only reads a log (a renderer, a replay, the server's views, a
// worker's history) imports this package and not the machine.
//
// Import rule: event imports only store and hostabi from this module,
// and otherwise the standard library. It sits below the machine in the
// layers of DESIGN.md §12 (store, hostabi → event → engine →
// engine/session → …), and deps_test.go checks it.
//
// Event types are extended, never repurposed: a type or field a newer
// wagent writes is kept by an older fold but not understood, and a fold
// change that reads the same events differently changes FoldDigest, so
// that snapshots written by another fold are ignored.
package event
