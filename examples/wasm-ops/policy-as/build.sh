#!/bin/sh
# Rebuilds policy.wasm from policy.ts and its manifest. Run from anywhere;
# needs AssemblyScript 0.28.20 from npm and Go. The compiler is found as
# $WAGENT_ASC, else in the folder .ci/run installs it into
# ($WAGENT_GUEST_NPM, default ~/.cache/wagent/asc):
#
#   mkdir -p ~/.cache/wagent/asc && cd ~/.cache/wagent/asc &&
#   npm install --save-exact assemblyscript@0.28.20
#
# The output is byte-identical for the same asc version, which is checked.
# Without asc it says so and does nothing, so that `make guests` works on a
# machine without it; under CI (CI set) or with WAGENT_GUESTS_STRICT=1 a
# missing or different asc is an error, so that CI cannot pass without
# checking this module.
set -eu
cd "$(dirname "$0")"
want=0.28.20
npmdir="${WAGENT_GUEST_NPM:-${HOME:-/root}/.cache/wagent/asc}"
asc="${WAGENT_ASC:-$npmdir/node_modules/.bin/asc}"
have="$("$asc" --version 2>/dev/null || true)"
if [ "$have" != "Version $want" ]; then
	msg="policy-as: asc $want not found at $asc (found: ${have:-nothing}); install it: mkdir -p $npmdir && cd $npmdir && npm install --save-exact assemblyscript@$want"
	if [ -n "${CI:-}" ] || [ "${WAGENT_GUESTS_STRICT:-}" = 1 ]; then
		echo "error: $msg" >&2
		exit 1
	fi
	echo "skipped: $msg" >&2
	exit 0
fi
"$asc" policy.ts -O3s --enable simd --runtime stub --exportStart _initialize \
	--use abort=../../../guests/assemblyscript/wagent/abort -o policy.wasm
cd ../../..
go run ./guests/cmd/wagent-build -manifest examples/wasm-ops/policy-as/policy.manifest.json \
	-o examples/wasm-ops/policy-as/policy.wasm examples/wasm-ops/policy-as/policy.wasm
