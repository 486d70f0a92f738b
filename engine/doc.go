// Package engine is wagent's core: a re-entrant state machine over a
// session's persisted log.
//
// The log is the state. A Machine folds it once (Open) and then one event
// at a time as it appends; it never re-reads the whole log. Each transition
// (Advance) is exactly one of:
//
//   - a host move: open a turn and claim input from the inbox, open or close
//     a step, close the turn, record that a call is about to run;
//   - a hook: the ops that declare it are asked in pipeline order and the
//     first that does not skip wins; its effects are validated and turned
//     into events;
//   - native inference: the provider is asked for the step's answer.
//
// The events of a transition are appended in one atomic append with the
// expected head, published to watchers after the append, and the machine
// starts again from the top. Nothing that matters lives in a variable: a
// machine (and every op) can be thrown away after any transition and
// rebuilt from the store, and it will append the same log.
//
// # A turn
//
//	turn/start + claim      host: all of next-step plus one next-turn item
//	prompt | command        ops admit, rewrite or reject the claimed batch
//	step/start              host
//	request/header          contribute: every op adds tools, prompt parts,
//	                        top-of-mind lines; any may end the turn (limit)
//	assistant/message       inference; or assistant/attempt, then
//	                        request-error: retry (same step) or end in error
//	tool …                  decisions, tool/call, the owner runs it, tool/result
//	step/end                host; then the next step, or
//	turn-stopping           the model answered without calls: an op may
//	                        steer (next-step input) or let the turn end
//	step/end + turn/end     host
//
// # Rules ops can rely on
//
//   - A list of only note and log effects counts as a skip: deciding a hook
//     takes a decisive effect. The notes are still recorded.
//   - An op's effects are checked as a whole. One bad effect (wrong hook,
//     unknown kind, a call that is not pending, a result for a call another
//     op owns) refuses the whole list: none of it is appended, an op/fault
//     names the op and the reason, and the next op is asked.
//   - An op that faults (error, trap, timeout, bad output) is recorded as
//     op/fault and treated as skipping; after MaxFaultsPerTurn faults in a
//     turn it is not asked again until the next turn. A guard op (its
//     manifest says Guard, like approval) fails closed: the calls it was
//     deciding are denied.
//   - Tools run one call at a time: when every op declaring the tool hook
//     has been asked and none acted (so a guard anywhere in the pipeline
//     sees every call first), the host records tool/call (durable before
//     the tool runs); then the owning op is asked with View.Tool.Run set and
//     answers with the result. A crash in between leaves exactly one call whose
//     outcome is unknown, which Recover answers as such.
//   - While an approval request waits for a decision, the machine yields
//     (Waiting) with nothing running. Decide records a person's answer from
//     any process; the next Run goes on.
//
// The engine imports no network, wasm or storage library: providers, the
// wasm runtime and the store backends are behind small interfaces
// (provider.Provider, Operation, store.Log).
package engine
