#!/bin/sh
# Rebuilds deny-word.wasm from its WAT source and manifest. Run from the
# repository root; needs wat2wasm (Debian: wabt) and Go.
set -eu
cd "$(dirname "$0")"
wat2wasm deny-word.wat -o deny-word.wasm
cd ../../..
go run ./guests/cmd/wagent-build -manifest examples/wasm-ops/deny-word/deny-word.manifest.json \
	-o examples/wasm-ops/deny-word/deny-word.wasm examples/wasm-ops/deny-word/deny-word.wasm
