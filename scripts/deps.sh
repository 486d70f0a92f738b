#!/bin/sh
# deps.sh installs what the tests need, pinned, into caches outside the
# module, and only what is missing: a second run installs nothing. The
# Makefile runs it before the targets that need it; .ci/run has no install
# step of its own for these.
#
#   scripts/deps.sh shells   zsh and fish, for the completion tests (make
#                            test): from Debian when run as root
#   scripts/deps.sh test     the real MCP servers from npm (make test), into
#                            $WAGENT_TEST_NPM (default ~/.cache/wagent/npm);
#                            the versions are internal/npmtest/packages.txt
#   scripts/deps.sh e2e      the same, and a check for Chromium (make e2e);
#                            the NATS server is built from the Go module, and
#                            Debian's old one (2.9.10) installed when root
#   scripts/deps.sh guests   AssemblyScript, to rebuild the AssemblyScript
#                            example op (make check), into $WAGENT_GUEST_NPM
#                            (default ~/.cache/wagent/asc)
#
# Node.js and npm are the one thing it asks for: without them it says how to
# get them, in one line, and fails.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${HOME:-/root}/.cache/wagent"

fail() {
	echo "deps: $*" >&2
	exit 1
}

need_node() {
	for c in node npm; do
		command -v "$c" >/dev/null 2>&1 ||
			fail "$1 needs Node.js and npm, and '$c' is not on PATH: install them (Debian: apt-get install nodejs npm) and run it again"
	done
}

# installed DIR NAME@VERSION: whether NAME is in DIR at VERSION.
installed() {
	pj="$1/node_modules/${2%@*}/package.json"
	[ -f "$pj" ] || return 1
	have=$(node -e 'process.stdout.write(String(require(process.argv[1]).version))' "$pj" 2>/dev/null) || return 1
	[ "$have" = "${2##*@}" ]
}

# npm_install WHAT DIR NAME@VERSION...: installs into DIR those of the
# packages that are missing or at another version.
npm_install() {
	what=$1 dir=$2
	shift 2
	need_node "$what"
	missing=
	for spec in "$@"; do
		installed "$dir" "$spec" || missing="$missing $spec"
	done
	[ -n "$missing" ] || return 0
	mkdir -p "$dir" || fail "cannot create $dir: point ${3:-the cache} somewhere writable"
	# Two installs into one folder at once would corrupt it: the second
	# waits, then finds what the first installed.
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$dir/.wagent-deps.lock"
		flock 9
		missing=
		for spec in "$@"; do
			installed "$dir" "$spec" || missing="$missing $spec"
		done
		[ -n "$missing" ] || return 0
	fi
	[ -f "$dir/package.json" ] || echo '{"name":"wagent-deps","private":true}' >"$dir/package.json"
	echo "deps: $what: installing$missing into $dir with npm"
	# shellcheck disable=SC2086 # $missing is a list of package specs
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error --save-exact $missing) ||
		fail "npm could not install$missing into $dir: check that npm reaches its registry (npm config get registry) and run it again"
	for spec in $missing; do
		installed "$dir" "$spec" || fail "$spec is not in $dir after npm install: remove $dir and run it again"
	done
}

test_packages() {
	grep -v '^[[:space:]]*\(#\|$\)' "$root/internal/npmtest/packages.txt"
}

npm_test() {
	# shellcheck disable=SC2046 # one package spec a line, no spaces
	npm_install "make test (the real MCP servers)" "${WAGENT_TEST_NPM:-$cache/npm}" $(test_packages)
}

need_chromium() {
	if [ -n "${WAGENT_CHROMIUM:-}" ]; then
		[ -x "$WAGENT_CHROMIUM" ] || fail "WAGENT_CHROMIUM=$WAGENT_CHROMIUM is not a program to run: name Chromium's binary, or unset it to use chromium from PATH"
		return 0
	fi
	command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
		fail "make e2e needs Chromium for the web console's browser tests: install it (Debian: apt-get install chromium fonts-dejavu-core) or name one with WAGENT_CHROMIUM"
}

# need_old_nats: a nats-server older than the store needs (Debian's
# 2.9.10), for the test that the store refuses it in one line. Installed
# from Debian when this runs as root with apt-get; $WAGENT_OLD_NATS_SERVER
# names another binary.
need_old_nats() {
	if [ -n "${WAGENT_OLD_NATS_SERVER:-}" ]; then
		[ -x "$WAGENT_OLD_NATS_SERVER" ] || fail "WAGENT_OLD_NATS_SERVER=$WAGENT_OLD_NATS_SERVER is not a program to run: name an old nats-server binary, or unset it to use Debian's"
		return 0
	fi
	[ -x /usr/sbin/nats-server ] && return 0
	if [ "$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "deps: make e2e (the old-server check): installing nats-server from Debian"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null ||
			{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null; } ||
			fail "apt-get could not install nats-server: install it by hand, or name an old one with WAGENT_OLD_NATS_SERVER, and run it again"
		return 0
	fi
	fail "make e2e needs Debian's nats-server (2.9.10) for the old-server check: install it (apt-get install nats-server) or name an old one with WAGENT_OLD_NATS_SERVER"
}

# need_shells: zsh and fish, whose completion scripts make test parses and
# runs (bash is there already). Installed from Debian when this runs as
# root with apt-get; otherwise it says what to install.
need_shells() {
	missing=
	for sh in zsh fish; do
		command -v "$sh" >/dev/null 2>&1 || missing="$missing $sh"
	done
	[ -n "$missing" ] || return 0
	if [ "$(id -u 2>/dev/null)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "deps: make test (the completion scripts): installing$missing from Debian"
		# shellcheck disable=SC2086 # a list of package names
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null ||
			{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; } ||
			fail "apt-get could not install$missing: install them by hand and run it again"
		return 0
	fi
	fail "make test needs$missing for the shell completion tests: install them (Debian: apt-get install$missing) and run it again"
}

case "${1:-}" in
test) npm_test ;;
shells) need_shells ;;
e2e)
	need_chromium
	need_old_nats
	npm_test
	;;
guests) npm_install "the AssemblyScript example op" "${WAGENT_GUEST_NPM:-$cache/asc}" assemblyscript@0.28.20 ;;
*)
	echo "usage: scripts/deps.sh test|shells|e2e|guests" >&2
	exit 2
	;;
esac
