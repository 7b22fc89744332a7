#!/usr/bin/env bash
# scripts/setup.sh -- everything a fresh Debian 12 machine needs to build,
# install and test streamsketch.  Run as root (or as a user with sudo).
#
#   1. installs the Debian packages below (skipped when all are present;
#      STREAMSKETCH_APT=always forces apt-get update + install),
#   2. builds the extension in this tree (make) and installs it (make install).
#
# Idempotent: re-running it on a machine that is already set up only rebuilds
# what changed.  Sourced by scripts/demo.sh and scripts/test.sh.
set -euo pipefail

SS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_MAJOR=15
PG_BINDIR="/usr/lib/postgresql/${PG_MAJOR}/bin"
PG_CONFIG="${PG_BINDIR}/pg_config"

SS_PACKAGES=(
	build-essential
	"postgresql-${PG_MAJOR}"
	"postgresql-server-dev-${PG_MAJOR}"
	libmurmurhash-dev
	liblz4-dev
	libpq-dev
	libipc-run-perl
	python3
)
# python3-matplotlib (about 480 MB with its dependencies) is used only by the
# benchmark reports' plots: test/bench/benchlib.sh installs it when a
# benchmark runs, so neither the demo nor the tests pay for it.

ss_log() { printf '\n==> %s\n' "$*"; }

# Run a command as root (we are root on CI and on a fresh machine).
ss_as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		echo "error: '$*' needs root (run this script as root)" >&2
		return 1
	fi
}

ss_install_packages() {
	local missing=() p status
	for p in "${SS_PACKAGES[@]}"; do
		status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
		[ "$status" = "install ok installed" ] || missing+=("$p")
	done
	if [ "${#missing[@]}" -eq 0 ] && [ "${STREAMSKETCH_APT:-}" != always ]; then
		ss_log "Debian packages already installed"
		return 0
	fi
	ss_log "Installing Debian packages: ${missing[*]:-${SS_PACKAGES[*]}}"
	export DEBIAN_FRONTEND=noninteractive
	ss_as_root apt-get update -q
	ss_as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends "${SS_PACKAGES[@]}"
}

# STREAMSKETCH_PG_TREE=DIR: install into a private copy of the PostgreSQL
# binaries in DIR instead of the system (the installation is relocatable:
# its paths are relative to bin/), so that several work trees can be tested
# at once on one machine.  SS_PG_BINDIR then points into the copy.
ss_private_tree() {
	local tree="$1" d
	if [ ! -x "$tree$PG_BINDIR/postgres" ]; then
		ss_log "Copying the PostgreSQL binaries to $tree"
		for d in "$PG_BINDIR" "$("$PG_CONFIG" --pkglibdir)" "$("$PG_CONFIG" --sharedir)"; do
			mkdir -p "$tree$d"
			cp -a "$d/." "$tree$d/"
		done
	fi
	SS_PG_BINDIR="$tree$PG_BINDIR"
	export SS_PG_BINDIR
}

ss_build_install() {
	ss_log "Building streamsketch (make)"
	make -C "$SS_ROOT" -j"$(nproc)" PG_CONFIG="$PG_CONFIG"
	if [ -n "${STREAMSKETCH_PG_TREE:-}" ]; then
		ss_private_tree "$STREAMSKETCH_PG_TREE"
		ss_log "Installing streamsketch into $STREAMSKETCH_PG_TREE"
		make -C "$SS_ROOT" install PG_CONFIG="$PG_CONFIG" DESTDIR="$STREAMSKETCH_PG_TREE"
		chmod -R a+rX "$STREAMSKETCH_PG_TREE"
		return
	fi
	ss_log "Installing streamsketch (make install)"
	ss_as_root make -C "$SS_ROOT" install PG_CONFIG="$PG_CONFIG"
}

ss_setup() {
	ss_install_packages
	ss_build_install
}

# Executed (not sourced): do the whole set-up.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	ss_setup
fi
