# Shared set-up of the streamsketch benchmarks (sourced by bcms_bench.sh and
# filters_bench.sh from the repository root, with WORK set):
#   bench_prepare NAME
# checks the prerequisites, creates $WORK afresh (stopping the server of a
# killed earlier run), copies the PostgreSQL binaries into a private tree
# $WORK/pg, builds the extension from this work tree and installs it there
# only, and exports SSBENCH_EXT (commit, dirty flag, md5 of
# the module under test) for the results.

bench_prepare() {
	local name=$1
	if [ "$(id -u)" != 0 ]; then
		echo "$name: run as root (memory cgroup, drop_caches, su postgres)" >&2
		exit 1
	fi
	command -v pg_config >/dev/null || { echo "pg_config not found" >&2; exit 1; }
	# the plots need matplotlib, which scripts/setup.sh does not install
	# (neither the demo nor the tests use it)
	if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
		echo "$name: installing python3-matplotlib for the plots" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-matplotlib >/dev/null ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-matplotlib >/dev/null; } ||
			{ echo "$name: could not install python3-matplotlib" >&2; exit 1; }
	fi
	[ -f "$(pg_config --pkglibdir)/pg_prewarm.so" ] || { echo "pg_prewarm (postgresql-15 contrib) is missing" >&2; exit 1; }

	if [ -d "$WORK" ]; then
		# a previous run that was killed: stop its server before removing it
		if [ -f "$WORK/data/postmaster.pid" ]; then
			su postgres -s /bin/sh -c "$WORK/pg$(pg_config --bindir)/pg_ctl -D $WORK/data -m immediate stop" >/dev/null 2>&1 || true
		fi
		rm -rf "$WORK"
	fi
	mkdir -p "$WORK/pg"

	# A private copy of the PostgreSQL binaries: the installation is relocatable
	# (paths are relative to bin/), so the extension installed below with
	# DESTDIR is the one the benchmark loads, whatever other trees install later.
	local BINDIR PKGLIBDIR SHAREDIR d
	BINDIR=$(pg_config --bindir)
	PKGLIBDIR=$(pg_config --pkglibdir)
	SHAREDIR=$(pg_config --sharedir)
	for d in "$BINDIR" "$PKGLIBDIR" "$SHAREDIR"; do
		mkdir -p "$WORK/pg$(dirname "$d")"
		cp -a "$d" "$WORK/pg$d"
	done
	rm -rf "$WORK/pg$PKGLIBDIR/bitcode" "$WORK/pg$PKGLIBDIR"/streamsketch* "$WORK/pg$SHAREDIR"/extension/streamsketch*

	# Build and install into the private tree only (retry: other
	# developers edit this tree concurrently and may be mid-edit).
	local built=0 attempt
	for attempt in 1 2 3 4 5; do
		if make -s >"$WORK/build.log" 2>&1 && make -s install DESTDIR="$WORK/pg" >>"$WORK/build.log" 2>&1; then
			built=1
			break
		fi
		echo "build failed (attempt $attempt), retrying in 60 s; see $WORK/build.log" >&2
		tail -5 "$WORK/build.log" >&2
		sleep 60
	done
	[ $built = 1 ] || { echo "could not build the extension" >&2; exit 1; }
	local SO HEAD DIRTY
	SO="$WORK/pg$PKGLIBDIR/streamsketch.so"
	HEAD=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
	DIRTY=$(git -C "$REPO" status --porcelain -- src sql Makefile 2>/dev/null | grep -q . && echo true || echo false)
	export SSBENCH_EXT="{\"head\": \"$HEAD\", \"dirty\": $DIRTY, \"so_md5\": \"$(md5sum "$SO" | cut -c1-12)\"}"
	chown -R postgres "$WORK"
}
