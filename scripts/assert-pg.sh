#!/usr/bin/env bash
# scripts/assert-pg.sh -- an assert-enabled PostgreSQL 15 for the `assert`
# suite of scripts/test.sh, built from Debian 12's own postgresql-15 source
# package (whatever 15.x it has): --enable-cassert makes the server check
# what Debian's build does not (buffer pins, lock and memory-context
# invariants, Assert()s of every macro the extension calls), which is how
# PostgreSQL's own developers and committers run.  Sourced by
# scripts/test.sh; needs root for apt.
#
#   ss_assert_pg DIR   builds and installs into DIR (prefix) unless DIR
#                      already holds such a build; sets SS_ASSERT_PG_CONFIG

SS_ASSERT_PACKAGES=(bison flex dpkg-dev)

# deb-src lines for bookworm, if apt has none: `apt-get source` needs them.
ss_assert_apt_sources() {
	local f=/etc/apt/sources.list.d/streamsketch-deb-src.sources
	if grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		return 0
	fi
	ss_log "Adding Debian's source package index ($f)"
	ss_as_root tee "$f" >/dev/null <<'EOF'
# added by streamsketch's scripts/assert-pg.sh: the test suite builds an
# assert-enabled PostgreSQL from Debian's postgresql-15 source package
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	ss_as_root apt-get update -q
}

ss_assert_pg() {
	local dir="$1" src
	SS_ASSERT_PG_CONFIG="$dir/bin/pg_config"
	# (not `pg_config | grep -q`: under pipefail, grep's early exit fails it)
	if [ -x "$SS_ASSERT_PG_CONFIG" ] &&
		[[ "$("$SS_ASSERT_PG_CONFIG" --configure)" == *--enable-cassert* ]] &&
		[ -x "$dir/lib/postgresql/pgxs/src/test/isolation/pg_isolation_regress" ]; then
		ss_log "Assert-enabled PostgreSQL: $("$SS_ASSERT_PG_CONFIG" --version) in $dir"
		return 0
	fi
	ss_assert_apt_sources || return 1
	ss_as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends "${SS_ASSERT_PACKAGES[@]}" || return 1
	src="$dir.src"
	rm -rf "$src"
	mkdir -p "$src"
	ss_log "Fetching Debian's postgresql-15 source into $src"
	# Only the upstream tarball is unpacked: Debian's patches fix the
	# library directory at /usr/lib/postgresql/15/lib whatever the prefix,
	# so `make install` of a patched tree would overwrite the packaged
	# server's modules.  The newest version apt lists may have no source on
	# the mirror (a security update's): try each it knows, newest first.
	local v ok=
	for v in "" $(apt-cache showsrc postgresql-15 2>/dev/null |
		sed -n 's/^Version: //p' | sort -rV | uniq); do
		if (cd "$src" && apt-get source -q --download-only \
			"postgresql-15${v:+=$v}" >>"$src/apt-source.log" 2>&1); then
			ok=1
			break
		fi
	done
	[ -n "$ok" ] || {
		cat "$src/apt-source.log"
		return 1
	}
	(cd "$src" && tar -xf postgresql-15_*.orig.tar.*) || return 1
	src=$(find "$src" -mindepth 1 -maxdepth 1 -type d -name 'postgresql-15*' | head -n 1)
	[ -n "$src" ] || return 1
	ss_log "Building an assert-enabled $(basename "$src") into $dir (configure, make)"
	(
		cd "$src" &&
			./configure --prefix="$dir" --enable-cassert --enable-debug \
				--without-icu --without-readline --without-zlib \
				--without-llvm CFLAGS='-O1 -g' \
				>"$src/configure.log" 2>&1 &&
			# never install over the packaged server
			! grep -q '/usr/lib/postgresql' src/Makefile.global &&
			make -s -j"$(nproc)" >"$src/make.log" 2>&1 &&
			make -s install >>"$src/make.log" 2>&1 &&
			make -s -C src/test/isolation install >>"$src/make.log" 2>&1
	) || {
		tail -n 40 "$src/configure.log" "$src/make.log" 2>/dev/null
		return 1
	}
	chmod -R a+rX "$dir"
}
