#!/bin/sh
# Rebuilds the conformance kit's own test modules (ops that break one rule
# each) from their WAT sources and manifests. Run from the repository
# root; needs wat2wasm (Debian: wabt) and Go.
set -eu
cd "$(dirname "$0")/../../.."
for wat in wasmhost/abitest/testdata/*.wat; do
	base="${wat%.wat}"
	wat2wasm "$wat" -o "$base.wasm"
	go run ./guests/cmd/wagent-build -manifest "$base.manifest.json" -o "$base.wasm" "$base.wasm"
done
