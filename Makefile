# wagent: the entry point for building, testing and checking.
#
#   make demo    run an agent offline on the embedded defaults
#   make test    run the whole test suite (what CI runs)
#   make check   format, vet, tidy and generated modules up to date
#   make bench   run the benchmarks recorded in BENCHMARKS.md
#   make e2e     the web console in headless Chromium, the MCP suites again under the
#                race detector, the MCP benchmarks once, and the 3-worker kill test (CI too)
#
# test, e2e and check install what they need first (scripts/deps.sh: the npm
# MCP servers, AssemblyScript), pinned, into ~/.cache/wagent, only when
# missing; Node.js and npm are the one thing they ask for.

GO       ?= go
PKGS     := ./...
BIN      := bin
TESTFLAGS ?= -count=1
BENCHTIME ?= 1s

WAGENT_BUILD := $(GO) run ./guests/cmd/wagent-build

.PHONY: all build test e2e race check fmt vet tidy-check guests guests-check bench bench-wasm demo clean deps-test deps-e2e deps-guests

all: build

# VERSION names the build in wagent version: the commit (and whether the
# tree had changes); go install …@VERSION stamps the module's version
# itself.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/wagent ./cmd/wagent

# test runs the suite, then the engine's and the store's concurrency tests
# (hammers, conflicting appenders) again under the race detector; for the
# JetStream store only those, as its whole suite under -race takes a minute;
# for the workers the safety net (two writers at one head, the hammer, the
# fence) and the lease handover.
test: deps-test
	$(GO) test $(TESTFLAGS) $(PKGS)
	$(GO) test -race $(TESTFLAGS) ./engine/ ./store/ ./store/badger/
	$(GO) test -race $(TESTFLAGS) -run 'Hammer|Race|Watch|Concurrent' ./store/jetstream/
	$(GO) test -race $(TESTFLAGS) -run 'Hammer|TwoWriters|Fence|Workers|DeadWorker|SameInstant|Paused' ./worker/

# e2e runs the slower end-to-end suites:
#  - the web console's browser tests (build tag e2e): headless Chromium
#    from Debian (apt-get install chromium; $$WAGENT_CHROMIUM names
#    another) driven by chromedp against an owner in the test process.
#    They fail, never skip, without a browser. Each test's screenshots land
#    in $(E2E_OUT)/_artifacts/ (the log names each file);
#  - the MCP server suites (the real npm servers that deps-e2e installs,
#    and Go fakes) under the race detector, and the MCP benchmarks once,
#    so that the figures in BENCHMARKS.md keep a command that works;
#  - 300 sessions over three wagent worker processes on a cluster of three
#    nats-server processes (built from the module), with workers and
#    servers SIGKILLed and workers SIGSTOPped past their lease at random
#    moments (build tag e2e; -workers.sessions=N for more, -workers.seed=S
#    to repeat a schedule the log printed);
#  - the store on Debian's nats-server 2.9.10 (deps-e2e installs it;
#    $$WAGENT_OLD_NATS_SERVER names another): refused in one line;
#  - go install github.com/wagent/wagent/cmd/wagent@latest from the
#    committed files served by a file proxy (build tag e2e), then wagent
#    version.
E2E_OUT ?= e2e-out
e2e: deps-e2e
	mkdir -p $(E2E_OUT)
	$(GO) test -tags e2e $(TESTFLAGS) -v -run '^TestBrowser' -artifacts -outputdir $(abspath $(E2E_OUT)) ./server/console/
	$(GO) test -race $(TESTFLAGS) ./tools/mcp/ ./pipeline/
	$(GO) test $(TESTFLAGS) -run 'MCP' ./cmd/wagent/
	$(GO) test -run '^$$' -bench 'MCPCall' -benchtime 200x ./tools/mcp/
	$(GO) test -run '^$$' -bench 'MCPStart' -benchtime 5x ./tools/mcp/
	$(GO) test -tags e2e $(TESTFLAGS) -v -run '^TestE2EWorkers' ./cmd/wagent/
	$(GO) test -tags e2e $(TESTFLAGS) -run '^TestGoInstallFromTheModule' ./cmd/wagent/
	$(GO) test -tags e2e $(TESTFLAGS) -run '^TestE2EOldServer' ./store/jetstream/

# deps-* install what a target's tests need when it is missing (a second
# run installs nothing), or say in one line what to install by hand.
deps-test:
	@sh scripts/deps.sh shells
	@sh scripts/deps.sh test
deps-e2e:
	@sh scripts/deps.sh e2e
deps-guests:
	@sh scripts/deps.sh guests

race: deps-test
	$(GO) test -race $(TESTFLAGS) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# guests rebuilds every committed wasm module from its source. The output
# is byte-identical for the same Go and wabt versions (Debian's wabt), asc
# version (npm assemblyscript@0.28.20, which the build script checks) and
# clang and wasi-libc (Debian's clang-14, lld-14, wasi-libc). Without asc or
# clang the AssemblyScript and C examples are skipped with a message;
# guests-check, and any build under CI, fails instead.
guests:
	sh testdata/hostile/build.sh
	sh wasmhost/abitest/testdata/build.sh
	sh examples/wasm-ops/policy-as/build.sh
	sh examples/wasm-ops/policy-c/build.sh
	$(WAGENT_BUILD) -o builtins/builtins.wasm ./guests/builtins/module
	$(WAGENT_BUILD) -o builtins/core.wasm ./guests/builtins/core
	$(WAGENT_BUILD) -o examples/wasm-ops/calculator/calculator.wasm ./examples/wasm-ops/calculator
	sh examples/wasm-ops/deny-word/build.sh
	$(WAGENT_BUILD) -o testdata/ops/slowtool.wasm ./testdata/ops/slowtool
	$(WAGENT_BUILD) -o testdata/ops/calcv2.wasm ./testdata/ops/calcv2
	$(WAGENT_BUILD) -o guests/examples/policy/policy.wasm ./guests/examples/policy

# guests-check fails when a committed module does not match its source.
guests-check: deps-guests
	@WAGENT_GUESTS_STRICT=1 $(MAKE) --no-print-directory guests
	@git diff --quiet -- '*.wasm' || { echo "committed wasm modules differ from their sources: run 'make guests' and commit:"; git diff --stat -- '*.wasm'; exit 1; }

check: vet tidy-check guests-check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# vet runs every analyzer on every package but one: wasmhost/internal/rootfs
# implements wazero's File, whose Seek returns an Errno rather than an error,
# which stdmethods reports; that package is vetted without it.
VET_ROOTFS := ./wasmhost/internal/rootfs
vet:
	$(GO) vet $$($(GO) list $(PKGS) | grep -v '/wasmhost/internal/rootfs$$')
	$(GO) vet -stdmethods=false $(VET_ROOTFS)
	$(GO) vet -tags e2e ./server/console/ ./cmd/wagent/

tidy-check:
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit"; exit 1; }

bench: deps-test
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

# bench-wasm runs only issue 21's benchmarks of the real wasm pipeline
# (P1, P6, P11 in builtins; P4 and the host's part of P5 in wasmhost; P5
# in cmd/wagent), with the counts BENCHMARKS.md records; bench runs them
# too, at BENCHTIME. WAGENT_BASELINE_BIN=path/to/an/older/wagent adds a
# warm start-up alternating with that build.
bench-wasm:
	$(GO) test -run '^$$' -bench 'WasmPipelineTransition' -benchtime 200x ./builtins/
	$(GO) test -run '^$$' -bench 'WasmPipeline(Thousand|Idle)' -benchtime 1x ./builtins/
	$(GO) test -run '^$$' -bench 'GuestPolicyCall|EmptyCall' -benchtime 1s ./wasmhost/
	$(GO) test -run '^$$' -bench 'BundleStart|BundleCompile' -benchtime 3x ./wasmhost/
	$(GO) test -run '^$$' -bench '^BenchmarkStartup$$' -benchtime 3x ./cmd/wagent/

# demo runs an agent offline: the scripted model, the demo pipeline (a
# guard, a WAT policy op, the Go calculator, retry, a step budget), then
# prints the session log. Nothing is kept: the store is a temporary folder.
demo: build
	@home=$$(mktemp -d); trap 'rm -rf "$$home"' EXIT; \
	echo '$$ wagent run --pipeline examples/demo/pipeline.yaml --script examples/demo/script.yaml "What is (2 + 40) * 3?"'; \
	WAGENT_HOME=$$home ./$(BIN)/wagent run --session demo --pipeline examples/demo/pipeline.yaml --script examples/demo/script.yaml "What is (2 + 40) * 3?" && \
	echo && echo '$$ wagent log demo' && \
	WAGENT_HOME=$$home ./$(BIN)/wagent log demo

clean:
	rm -rf $(BIN)
