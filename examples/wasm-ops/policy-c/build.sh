#!/bin/sh
# Rebuilds policy.wasm from policy.c and its manifest. Run from anywhere;
# needs clang-14, lld-14 and wasi-libc (Debian: apt-get install clang-14
# lld-14 wasi-libc) and Go. The output is byte-identical for the same
# clang and wasi-libc.
#
# Without the tools it says so and does nothing, so that `make guests`
# works on a machine without them; under CI (CI set) or with
# WAGENT_GUESTS_STRICT=1 a missing tool is an error, so that CI cannot
# pass without checking this module.
set -eu
cd "$(dirname "$0")"
cc="${WAGENT_CLANG:-clang-14}"
if ! command -v "$cc" >/dev/null 2>&1 || ! command -v wasm-ld-14 >/dev/null 2>&1 || [ ! -f /usr/lib/wasm32-wasi/libc.a ]; then
	msg="policy-c: $cc, wasm-ld-14 or wasi-libc is missing (apt-get install clang-14 lld-14 wasi-libc)"
	if [ -n "${CI:-}" ] || [ "${WAGENT_GUESTS_STRICT:-}" = 1 ]; then
		echo "error: $msg" >&2
		exit 1
	fi
	echo "skipped: $msg" >&2
	exit 0
fi
# Compiled and linked in two steps: clang, linking, runs binaryen's
# wasm-opt afterwards when one is installed, which would make the output
# depend on whether binaryen is; wasm-ld alone does not.
obj=$(mktemp)
trap 'rm -f "$obj"' EXIT
"$cc" --target=wasm32-wasi -Oz -msimd128 -mbulk-memory -Wall -Werror -c -o "$obj" policy.c
wasm-ld-14 -m wasm32 -L/usr/lib/wasm32-wasi /usr/lib/wasm32-wasi/crt1-reactor.o \
	--entry _initialize --strip-debug "$obj" -lc -o policy.wasm
cd ../../..
go run ./guests/cmd/wagent-build -manifest examples/wasm-ops/policy-c/policy.manifest.json \
	-o examples/wasm-ops/policy-c/policy.wasm examples/wasm-ops/policy-c/policy.wasm
