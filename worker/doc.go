// Package worker runs wagent sessions on any number of processes and
// machines that share one store (any worker may step any session it can
// append to with the expected head; a lease keeps one driver per session,
// and the expected-head append makes a second one harmless): wagent worker is a
// Worker, wagent serve --nats and wagent run --detach wake sessions
// through a Bus.
//
// # Wake-ups
//
// A wake-up says "this session may have something to do". Whoever makes a
// session need a drive (a prompt sent, a decision recorded, a cancel with
// input kept, a resume) publishes one after its change is durable in the
// log: Bus.Wake, a message on the work-queue stream WAGENT_WAKE, subject
// wagent.wake.now.TOKEN. The stream keeps one message per subject, so
// wake-ups for a session coalesce into one. Every worker pulls from one
// durable consumer, only as many messages as it has free slots; a message
// is acknowledged after the drive it started, so one whose worker died is
// delivered again (the ack wait is a lease's TTL, and a live worker says
// "in progress" each time it renews).
//
// # One writer at a time
//
// A worker that takes a wake-up first takes the session's lease: a key in
// the KV bucket WAGENT_LEASE, created only if absent, whose bucket TTL
// removes it unless the worker rewrites it (compare-and-set on its
// revision, every third of the TTL). It then opens the session as a new
// incarnation, writer id NAME/lease-EPOCH (the epoch is the revision that
// created the lease, so later leases have higher epochs), advances it
// until it yields (idle, or waiting for a person), lets go of the lease,
// and acknowledges. A wake-up that finds the lease held is handed back
// with a delay until the lease would expire: a live holder reads the
// session's head after it lets go and wakes the session again if anything
// arrived after its last look, so nothing waits for a lease to expire
// unless its holder died.
//
// The lease keeps a second worker away; the store's expected-head append
// makes a second one harmless to the log's consistency; and a fence makes
// it harmless to the single-writer history too. An incarnation sends no
// append once its lease is gone by its own clock (a fifth of the TTL
// before the server would drop it), nor once the log shows another
// writer's session/writer after its own, or a worker writer with a later
// epoch. So in every log each writer has one contiguous span, lease epochs
// increase along it, and each tool/call names the writer of its span;
// CheckWriters verifies exactly that.
//
// A worker that dies mid-tool leaves a tool/call without a result. The
// next incarnation answers it TOOL_OUTCOME_UNKNOWN, or runs it again if
// the tool is idempotent (package engine); non-idempotent tools never run
// twice.
//
// # Retries due later
//
// The engine waits out a scheduled retry before the next request
// (engine.Config.Sleep). A worker waits in place only for a retry due
// within Options.WaitInPlace (2s); for a later one it publishes a delayed
// wake-up, Bus.WakeAt, and lets the session go. A delayed wake-up is a
// JetStream message schedule (nats-server 2.12 and later): a message on
// wagent.wake.at.TOKEN with Nats-Schedule: @at TIME and
// Nats-Schedule-Target: wagent.wake.now.TOKEN, which the server turns into
// an ordinary wake-up when the time comes. It is stored and replicated
// like any message, so it survives every worker being gone meanwhile, and
// a later one for the session replaces it. The worker that takes it waits
// out the last moments in place and makes the request.
//
// # Cancellations
//
// A cancellation is recorded by whoever receives it (a server, wagent
// cancel), with the expected head like any append; Bus.Interrupt then
// tells the worker driving the session, which stops its model request or
// retry wait at once, lets the session go and wakes it again (for input
// the cancellation kept). A worker that misses the message finds the
// cancellation in the log at its next append and decides again from it.
//
// # Failures
//
// Store requests that fail for a reason that may pass (a timeout, a
// server away, a leader election) are tried again while the lease lasts;
// an append that timed out but landed is found by the engine as its own
// when it catches up. A drive that fails anyway hands its wake-up back
// with a growing delay. A session whose log the engine refuses, or that
// was deleted, drops its wake-up. Stopping a worker (its context ending)
// stops taking wake-ups, gives the running drives Options.Grace, then cuts
// them off, lets go of their leases and hands their wake-ups back at once.
package worker
