#!/bin/sh
# soak.sh - the soak (make soak, docs/reliability.md): the linked echo
# server (bench/weft/echo_server.c, one G per connection) and the
# preloaded thread-per-connection server (examples/echo_threads.c under
# weft run) each carry GIB GiB per configuration through the hooks, on
# 1, 2 and 4 Ps, driven by tests/soak/soakclient.c (churn, half-close,
# RST mid-message, stalls; every byte checked; the server's fds, live Gs
# and RSS sampled).  One line per configuration, then a verdict.
#
#   tests/soak/soak.sh BUILD GIB
# SOAK_PROCS ("1 2 4"), SOAK_THREADS (16 client connections at a time),
# SOAK_SERVERS ("linked preload"), SOAK_RSS_TOL (10, percent).
set -u
build=$1
gib=$2
procs=${SOAK_PROCS:-1 2 4}
threads=${SOAK_THREADS:-16}
servers=${SOAK_SERVERS:-linked preload}
# a short run has only a few samples after warm-up: RSS gets more room
rsstol=${SOAK_RSS_TOL:-$(awk "BEGIN { print ($gib < 1) ? 25 : 10 }")}
bytes=$(awk "BEGIN { printf \"%d\", $gib * 1073741824 }")
dir=$build/soak
mkdir -p "$dir"
echo "soak: $gib GiB per configuration, $threads connections at a time; $(nproc) CPUs," \
	"load $(cut -d' ' -f1-3 /proc/loadavg) at start; $(date -u '+%Y-%m-%d %H:%M UTC')"
fails=0
for s in $servers; do
	for p in $procs; do
		name=$s-${p}p
		out=$dir/$name.out
		err=$dir/$name.err
		: >"$out"
		: >"$err"
		if [ "$s" = linked ]; then
			WEFT_MAXPROCS=$p WEFT_DEBUG=schedtrace=1000 "$build/bench/weft/echo_server" \
				>"$out" 2>"$err" &
		else
			WEFT_DEBUG=schedtrace=1000 "$build/bin/weft" run --procs "$p" -- \
				"$build/examples/echo_threads" >"$out" 2>"$err" &
		fi
		pid=$!
		port=""
		for _ in $(seq 100); do
			port=$(sed -n 's/^listening on \([0-9]*\).*/\1/p' "$out")
			[ -n "$port" ] && break
			sleep 0.1
		done
		if [ -z "$port" ]; then
			echo "$name: the server did not start: $(head -c 500 "$err")"
			kill "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			fails=$((fails + 1))
			continue
		fi
		"$build/soak/soakclient" --port "$port" --bytes "$bytes" --threads "$threads" \
			--pid "$pid" --trace "$err" --rss-tol "$rsstol" --label "$name" 2>"$dir/$name.client"
		rc=$?
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		if grep -q "weft: fatal" "$err"; then
			echo "$name: the server died: $(grep -m1 'weft: fatal' "$err")"
			rc=1
		fi
		[ $rc -ne 0 ] && fails=$((fails + 1)) && grep -v "GiB verified" "$dir/$name.client" | head -5
	done
done
echo "soak: load $(cut -d' ' -f1-3 /proc/loadavg) at end; $fails configuration(s) failed" \
	"(logs in $dir)"
[ $fails -eq 0 ]
