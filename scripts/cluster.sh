#!/usr/bin/env bash
# scripts/cluster.sh -- helpers for a throwaway PostgreSQL cluster, sourced by
# scripts/demo.sh and scripts/test.sh.
#
# initdb refuses to run as root, so when we are root the cluster (and every
# client run against it) runs as the `postgres` OS user created by the
# postgresql-common package.  The cluster listens only on a Unix socket in its
# own directory (listen_addresses = ''), so it never collides with another
# server on the machine whatever the port number.

SS_PG_BINDIR="${SS_PG_BINDIR:-/usr/lib/postgresql/15/bin}"

# The OS user that owns clusters and runs the tests.
ss_pg_user() {
	if [ "$(id -u)" -eq 0 ]; then echo postgres; else id -un; fi
}

# Run a command as that user, with the PostgreSQL 15 binaries first in PATH
# and any NAME=VALUE arguments given before the command put in its
# environment:  ss_as_pg [VAR=value ...] cmd args...
ss_as_pg() {
	local path="$SS_PG_BINDIR:/usr/local/bin:/usr/bin:/bin"
	if [ "$(id -u)" -eq 0 ]; then
		# from /: the current directory may be one postgres cannot enter
		(cd / && runuser -u postgres -- env PATH="$path" HOME=/tmp "$@")
	else
		env PATH="$path" "$@"
	fi
}

# ss_cluster_start DIR PORT [postgresql.conf line ...]
# Creates a fresh cluster in DIR/data (removing any old DIR), starts it with
# its socket in DIR, and exports PGHOST/PGPORT/PGDATABASE/PGUSER for clients.
# Only where it listens and how it logs are set here: every other setting is
# PostgreSQL's default unless given as an argument.
ss_cluster_start() {
	local dir="$1" port="$2" line
	shift 2
	if [ -f "$dir/data/postmaster.pid" ]; then
		ss_as_pg pg_ctl -D "$dir/data" stop -m immediate -w >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	chmod 0755 "$dir"
	if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$dir"; fi
	ss_as_pg initdb -D "$dir/data" -A trust -U "$(ss_pg_user)" -E UTF8 \
		--locale=C -N >"$dir/initdb.log" 2>&1 || {
		cat "$dir/initdb.log"
		return 1
	}
	{
		echo "# added by scripts/cluster.sh"
		echo "port = $port"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$dir'"
		echo "lc_messages = 'C'"
		echo "log_line_prefix = '%m [%p] %q%a '"
		echo "log_min_messages = warning"
		for line in "$@"; do echo "$line"; done
	} | ss_as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
	ss_as_pg pg_ctl -D "$dir/data" -l "$dir/postgresql.log" -w -t 120 start \
		>/dev/null || {
		cat "$dir/postgresql.log"
		return 1
	}
	export PGHOST="$dir" PGPORT="$port" PGDATABASE=postgres
	PGUSER="$(ss_pg_user)"
	export PGUSER
}

# ss_cluster_stop DIR -- stops the cluster (fast, then immediate).
ss_cluster_stop() {
	local dir="$1"
	[ -f "$dir/data/postmaster.pid" ] || return 0
	ss_as_pg pg_ctl -D "$dir/data" stop -m fast -w -t 60 >/dev/null 2>&1 ||
		ss_as_pg pg_ctl -D "$dir/data" stop -m immediate -w >/dev/null 2>&1 ||
		true
}
