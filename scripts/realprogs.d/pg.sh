#!/bin/sh
# pg.sh - PostgreSQL 15 end to end: initdb, pg_ctl start, pgbench -i,
# pgbench -c 16 -j 2 (TPC-B-like, then -S select-only), consistency
# checks (every balance equals the history's deltas; amcheck of every
# index), pg_ctl stop.  Prints one line per step with its status (the
# same on every good run); tps and the server log's errors go to stderr.
# Run as root (the server runs as the postgres user, through setpriv).
#   PG_SECS=20 PG_DIR=/tmp/weft-pg PG_PORT=5499 PG_SCALE=10
# scripts/realprogs.sh case postgres (under weft run, the whole tree).
set -u
secs=${PG_SECS:-20}
d=${PG_DIR:-/tmp/weft-pg.$$}
port=${PG_PORT:-5499}
scale=${PG_SCALE:-10}
bin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
as="setpriv --reuid=postgres --regid=postgres --init-groups"
rm -rf "$d"
mkdir -p "$d"
chown postgres "$d"
$as "$bin/initdb" -D "$d/data" -U postgres --no-sync -E UTF8 --locale=C >"$d/initdb.log" 2>&1
echo "initdb $?"
$as "$bin/pg_ctl" -D "$d/data" -l "$d/server.log" -w -t 300 \
	-o "-p $port -k $d -c listen_addresses= -c fsync=off -c max_connections=40" start >/dev/null
echo "start $?"
pgb() { $as "$bin/pgbench" -h "$d" -p "$port" "$@" postgres; }
sql() { $as "$bin/psql" -h "$d" -p "$port" -U postgres -At -c "$1" postgres; }
pgb -i -q -s "$scale" >"$d/init.log" 2>&1
echo "pgbench-init $?"
for mode in rw ro; do
	flag=
	[ $mode = ro ] && flag="-S -n" # -n: keep the history the rw run wrote
	pgb -c 16 -j 2 -T "$secs" $flag >"$d/$mode.log" 2>&1
	st=$?
	echo "pgbench-$mode $st failed $(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$d/$mode.log")"
	echo "pg $mode: $(grep -E '^tps' "$d/$mode.log" | head -1)" >&2
done
sql "select (select sum(abalance) from pgbench_accounts) = (select sum(delta) from pgbench_history),
	(select sum(tbalance) from pgbench_tellers) = (select sum(delta) from pgbench_history),
	(select count(*) from pgbench_accounts) = $scale * 100000"
sql "create extension if not exists amcheck" >/dev/null
sql "select count(*) from (select bt_index_check(c.oid, true) from pg_index i join pg_class c
	on c.oid = i.indexrelid join pg_am a on a.oid = c.relam where a.amname = 'btree') x" >/dev/null
echo "amcheck $?"
$as "$bin/pg_ctl" -D "$d/data" -w -t 300 -m fast stop >/dev/null
echo "stop $?"
echo "pg server log: $(grep -cE 'ERROR|FATAL|PANIC|terminated by signal' "$d/server.log") error lines" >&2
grep -E 'ERROR|FATAL|PANIC|terminated by signal' "$d/server.log" | head -5 >&2
[ -n "${PG_KEEP:-}" ] || rm -rf "$d"
