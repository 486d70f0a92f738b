// Package engine is wagent's core: a re-entrant state machine over a
// session's persisted log.
//
// Three packages share the work, in layers (DESIGN.md §12): package event
// is the log's schema and its fold (the event types, State, snapshots,
// the fork and import checks, call keys), below the machine; this package
// is the machine (Machine: decide, commit, hooks, tools, compaction), the
// inbox its appends go through (Inbox), and the writes of a whole log
// (Create, Fork, Import); package engine/session is the driver above it
// (Session, Host: the inbox verbs, the phase driver, notifications).
// engine imports event, never engine/session; whatever only reads a log
// imports event alone.
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
//	[compaction]            compact: an op asks for a summary (the last
//	                        answer's size, or context_length); the summary
//	                        request's own request/header (with compaction
//	                        set), then context/compacted with its usage
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
//   - An op's answer is taken whole or not at all. One bad effect (wrong
//     hook, unknown kind, a call that is not pending, a decision from an op
//     that is not a guard) refuses the whole list, its notes included: an
//     op/fault names the op and the reason, and the next op is asked. Log
//     lines and fault notices reach watchers only after the append.
//   - No answer can wedge a session: every move is sized against the
//     store's limits before it is appended, and an answer that would not
//     fit becomes an op/fault of kind limit (for a tool, an error result
//     the model can read). A long inbox is admitted in parts that fit.
//   - An op that faults (error, trap, timeout, bad output) is recorded as
//     op/fault and treated as skipping; after MaxFaultsPerTurn faults in a
//     turn it is not asked again until the next turn.
//   - Guards decide, owners run, in that order. Only guards (manifest
//     guard: true) may decide calls (allow, deny, ask a person); each
//     guard decides for itself, and a call runs only when every guard of
//     the pipeline passed it (allowed it, or skipped: no objection) and
//     none denied it. A guard that faults, answers invalidly or is
//     quarantined denies the calls it was asked about (fails closed).
//     Ops that are not guards are asked at the tool hook only about calls
//     no op owns, and may answer only those, with results (the
//     unknown-tool op). An owner is asked to run a call (View.Tool.Run set)
//     only after its tool/call is durable, and its result is refused at
//     any other time. The fold refuses a log that breaks these rules.
//   - A step makes at most Config.MaxAttempts model requests (default
//     10), whatever the request-error ops say.
//   - While an approval request waits for a decision, the machine yields
//     (Waiting) with nothing running. Decide records a person's answer from
//     any process; the next Run goes on.
//
// # Tool sources
//
// An op may front a source whose tools change while it runs (an MCP
// server restarts, or says its list changed) while its manifest stays
// the same: a manifest tool entry ending in "*" is a namespace
// ("files__*"), and the op owns every tool under it. NewPipeline refuses
// namespaces that overlap another op's tool or namespace, so a tool still
// has one owner. At contribute the source offers the tools it has now; a
// contribution may say per tool which server it comes from and what it
// does (hostabi.ToolSpec.Server and Annotations). The step's header
// freezes both: a read-only or idempotent hint makes the call idempotent
// for crash handling (run again instead of TOOL_OUTCOME_UNKNOWN), and
// guards see the server and hints on each pending call, as does an
// event.WaitingCall, so rules and prompts can use them. The source's
// calls take the same path as any owner's: guards decide, tool/call is
// durable, then the owner runs it.
//
// A started call runs with a context that the turn's cancellation does
// not end, so its result is always recorded; TurnDone tells the owner the
// turn was cancelled, and an owner that can stop a call cleanly (an MCP
// server told notifications/cancelled) answers at once with a result
// saying so.
//
// # Incarnations and crashes
//
// Each machine is an incarnation with a writer id (Config.Writer): its
// first transition opens with session/writer, and every tool/call names
// it. Starting a tool is one transition: the intent is made durable, the
// owner runs the call, the result is appended. So a call found started
// with no result was cut off by a crash or a lost writer; the next
// transition answers it TOOL_OUTCOME_UNKNOWN (the model sees it and can
// check the world), or runs it again when its tool is idempotent. Nothing
// else needs repair: a turn a crash interrupted goes on where the log
// says (a claimed batch is admitted, a request is made again, a retry
// waits out what is left of its delay). A compaction's summary request
// is like a tool in this: its request/header is appended before it is
// sent and its answer after, so a summary that never came is in the log
// as a header without a context/compacted, and the next transition asks
// the compact ops again. run, resume, step, a server and a
// worker all go through Advance, so there is no recovery step a caller
// could forget.
//
// # Forks, imports and replays
//
// A log can be copied up to a turn boundary into a new session (Fork,
// recorded as session/forked right after the copy) or written whole from
// elsewhere (Import); both are folded first (event.ForkPoint,
// event.CheckLog), so a session is never made of a log the fold refuses.
// An import also hands the host's event.SettingsCheck each settings the
// log records, so that no session is made
// of settings the host's Resolver would refuse on open. Package replay
// re-drives a recorded log through a machine with another pipeline,
// feeding it the recorded answers and results, and compares the
// decisions.
//
// The engine imports no network, wasm or storage library: providers, the
// wasm runtime and the store backends are behind small interfaces
// (provider.Provider, Operation, store.Log).
package engine
