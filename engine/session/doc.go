// Package session drives sessions' machines: a Session takes input
// through its verbs (Send, Steer, Inject, Enqueue) while the agent works,
// drains queued prompts in one running period, records cancellations
// (Cancel, CancelInput) and people's decisions (Decide), runs chores while
// it is idle, and tells its watchers what happens (Notification: status,
// inbox changes, the machine's live events). A Host runs many sessions
// over one store.
//
// The machine (package engine) decides and appends every transition; a
// Session only chooses when it runs and with what context, and appends
// input through the machine's engine.Inbox, so that input can arrive while
// the machine is busy. What a Session shows of a folded log (event.Summary,
// event.WaitingCall) is package event's.
//
// Import rule: session sits above the machine in the layers of DESIGN.md
// §12 (event → engine → engine/session → wasmhost, pipeline, tools → …):
// it imports engine, event, store and hostabi, never a runtime, a store
// backend or a network; engine never imports it. deps_test.go checks it.
package session
