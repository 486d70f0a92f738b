#!/bin/sh
# Rebuilds the committed wasm modules of issue 6 from their sources:
# the hostile corpus (testdata/hostile), the hand-written WAT op
# (testdata/wat) and the example Go guest (guests/examples/policy).
# Run from the repository root. Needs wat2wasm (Debian: wabt) and Go; the
# output is byte-identical for the same wabt and Go versions.
set -eu
cd "$(dirname "$0")/../.."
build="go run ./guests/cmd/wagent-build"

for wat in testdata/hostile/*.wat; do
	base="${wat%.wat}"
	# A module that is invalid on purpose says so on its first line
	# (";; wat2wasm: --no-check"): wat2wasm would refuse to assemble it.
	flags="$(sed -n '1s/^;; wat2wasm: //p' "$wat")"
	wat2wasm $flags "$wat" -o "$base.wasm"
	# Hostile manifests are embedded as written (-raw), bad ones included.
	if [ -f "$base.manifest.json" ]; then
		$build -manifest "$base.manifest.json" -raw -o "$base.wasm" "$base.wasm"
	fi
done
for dir in testdata/hostile/go/*/; do
	name="$(basename "$dir")"
	$build -o "testdata/hostile/go_$name.wasm" "./$dir"
done

for wat in testdata/wat/*.wat; do
	base="${wat%.wat}"
	wat2wasm "$wat" -o "$base.wasm"
	$build -manifest "$base.manifest.json" -o "$base.wasm" "$base.wasm"
done

$build -o guests/examples/policy/policy.wasm ./guests/examples/policy
