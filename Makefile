# wagent: the entry point for building, testing and checking.
#
#   make demo    run an agent offline on the embedded defaults
#   make test    run the whole test suite (what CI runs)
#   make check   format, vet, tidy and generated modules up to date
#   make bench   run the benchmarks recorded in BENCHMARKS.md

GO       ?= go
PKGS     := ./...
BIN      := bin
TESTFLAGS ?= -count=1
BENCHTIME ?= 1s

.PHONY: all build test race check fmt vet tidy-check bench demo clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

test:
	$(GO) test $(TESTFLAGS) $(PKGS)

race:
	$(GO) test -race $(TESTFLAGS) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

check: vet tidy-check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

tidy-check:
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit"; exit 1; }

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

demo:
	$(GO) run ./examples/embed

clean:
	rm -rf $(BIN)
