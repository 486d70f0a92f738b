// Package wasmhost runs wagent operations compiled to WebAssembly: it loads
// a module, checks it against the ABI (hostabi/ABI.md) without running it,
// and adapts it to engine.Operation, so a .wasm op runs in the same
// pipeline as a native one.
//
// A process keeps one Runtime. It compiles each module once, caches the
// machine code on disk (DefaultCacheDir, or $WAGENT_CACHE_DIR), and pools
// instances per module, memory limit and grant set, whichever op or session
// asks:
//
//	rt, err := wasmhost.NewRuntime(ctx)
//	mod, err := rt.LoadFile(ctx, "ops/policy.wasm")        // checked, compiled
//	op, err := rt.NewOp(mod, wasmhost.Config{              // one pipeline entry
//		Config: json.RawMessage(`{"allow":["calc_total"]}`),
//		Limits: wasmhost.Limits{MemoryPages: 256, Timeout: 200 * time.Millisecond},
//		Grants: wasmhost.Grants{Mounts: []wasmhost.Mount{{HostDir: "./skills", GuestPath: "/skills"}}},
//	})
//	effects, err := op.Handle(ctx, view, reader)           // engine.Operation
//
// A module is validated as written, and held to bounds on everything it
// declares (hostabi/ABI.md §5), before anything compiles it; its
// config_schema is compiled and NewOp checks the op's config against it.
// A call that traps, runs past its deadline, grows its memory past the
// limit, recurses too deep, hands over too much or breaks the ABI returns
// an *hostabi.Fault of the matching kind; the instance is discarded and the
// next call gets a fresh one. Guests get no real clock, no randomness, no
// environment and no file system beyond the mounts they request and are
// granted (read-only, or from ABI 1.2 read-write), each confined like an
// os.Root, in which only regular files and directories open (a FIFO's open
// would wait for a writer) and no host call waits past the call's deadline
// or cancellation.
//
// From ABI 1.2 an op may also be granted outbound HTTP to named hosts
// (Grants.HTTP; every redirect and resolved address checked) and commands
// that match argv patterns (Grants.Exec; never a shell unless a grant says
// so, in a mount, bounded in time and output, and confined with Landlock
// unless the grant says Unconfined). What an op requests and is not
// granted is refused by NewOp; what it tries beyond its grant at call time
// is an error in the response it gets, and a line for watchers. Given
// Config.Checks (the pipeline gives them to the built-ins shell and fetch),
// Op.CheckGrants runs the same grant checks on a call's arguments before
// anyone is asked about it (engine.GrantChecker).
//
// Deadlines are enforced by instrumenting each module at load: a cheap
// check at every function entry and loop header, with a periodic return to
// Go so a looping guest never stalls the Go scheduler or garbage collector,
// and a bound on the stack. What is cached on disk is tagged with a key of
// the user's and checked before it is used. RATIONALE.md records why, with
// the measurements behind it.
package wasmhost
