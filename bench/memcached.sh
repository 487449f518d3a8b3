#!/usr/bin/env bash
# memcached.sh -- Debian's memcached (-t 4, libevent) driven by
# memaslap (Debian ships it as memcaslap, in libmemcached-tools), natively
# and under weft run in the same run: ops/s side by side at each
# connection count, the ratio weft/native, get misses and verification
# failures (data exact: both 0), and (with perf) the server's system
# calls per operation.  Runs alternate native, weft; the best of RUNS,
# and on stderr each pair's ratio with the load average, their median and
# spread.  The server runs on CPU SCPU and memaslap on CPU CCPU (taskset):
# on a 2-CPU machine shared with other work, a client and a server that
# migrate onto each other's CPU measure the scheduler, not weft (PIN=0:
# not pinned).
#
#   bench/memcached.sh   # BUILD=build PROCS=2 X=100000 CONNS="256 2000" RUNS=3 PIN=1
#
# Skips (exit 0) when memcached or memaslap/memcaslap is not installed
# (apt-get install memcached libmemcached-tools).
set -u
BUILD=${BUILD:-build}
PROCS=${PROCS:-2}
X=${X:-100000}
CONNS=${CONNS:-256 2000}
RUNS=${RUNS:-3}
port=${PORT:-11298}
. "$(dirname "$0")/pin.sh"
weft="$BUILD/bin/weft"
command -v memcached >/dev/null || { echo "memcached: memcached not installed, skipped"; exit 0; }
slap=$(command -v memaslap || command -v memcaslap) ||
	{ echo "memcached: memaslap (libmemcached-tools) not installed, skipped"; exit 0; }
[ -x "$weft" ] || { echo "memcached: $weft not built"; exit 1; }
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)"
perf=
if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1; then
	perf=perf
fi
dir=$(mktemp -d)
chmod 711 "$dir"
mkdir "$dir/run" # memcached writes its pid file as nobody
trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
user=()
if [ "$(id -u)" = 0 ]; then
	user=(-u nobody)
	chown nobody "$dir/run"
fi

# one run: $1 output, $2 connections, rest the launcher
run() {
	local out=$1 conns=$2
	shift 2
	local pre=()
	[ -n "$perf" ] && pre=(perf stat -x, -o "$out.perf" -e raw_syscalls:sys_enter -e task-clock --)
	rm -f "$dir/run/mc.pid"
	"${pre[@]}" "${spin[@]}" "$@" memcached "${user[@]}" -P "$dir/run/mc.pid" -l 127.0.0.1 -p "$port" -U 0 -t 4 \
		-c 8192 &
	local pid=$!
	for _ in $(seq 200); do
		(exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
		sleep 0.05
	done
	"${cpin[@]}" "$slap" -s 127.0.0.1:"$port" -T 2 -c "$conns" -x "$X" -v 0.01 >"$out.slap" 2>&1
	kill "$(cat "$dir/run/mc.pid" 2>/dev/null)" 2>/dev/null || kill "$pid" # the server, not perf
	wait "$pid" 2>/dev/null
	awk '/^Run time/ { for (i = 1; i < NF; i++) if ($i == "TPS:") print "tps", $(i + 1) }
	     /get_misses/ { print "misses", $2 } /verify_failed/ { print "failed", $2 }
	     /^Ops|Ops:/ { for (i = 1; i < NF; i++) if ($i == "Ops:") print "ops", $(i + 1) }' \
		"$out.slap" >"$out"
	if [ -n "$perf" ]; then
		local ops
		ops=$(awk '$1 == "ops" { print $2 }' "$out")
		awk -F, -v n="${ops:-0}" '/raw_syscalls/ { if (n > 0) printf "calls/op %.2f\n", $1 / n }
			/task-clock/ { if (n > 0) printf "cpu-us/op %.2f\n", $1 * 1000 / n }' \
			"$out.perf" >>"$out"
	fi
}

best() { # $1 file prefix, $2 key: highest tps, else the lowest (calls/op, cpu-us/op) or the highest (misses)
	cat "$1".? 2>/dev/null | awk -v k="$2" '$1 == k { v = $2 + 0; if (!seen || (k == "tps" ? v > b : k ~ /\/op$/ ? v < b : v > b)) b = v; seen = 1 }
		END { if (seen) print b; else print "-" }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }'; }

echo "memcached -t 4 under memaslap -T 2 -x $X (best of $RUNS), native vs weft run --procs $PROCS${spin:+, server on CPU $SCPU, client on CPU $CCPU}"
printf "%-6s %10s %10s %7s %14s %16s %14s %14s\n" conns native weft ratio "calls/op n/w" "cpu-us/op n/w" "misses n/w" "verify-fail n/w"
for c in $CONNS; do
	for r in $(seq "$RUNS"); do
		run "$dir/native.$c.$r" "$c"
		run "$dir/weft.$c.$r" "$c" "$weft" run --procs "$PROCS" --
		a=$(awk '$1 == "tps" { print $2 }' "$dir/native.$c.$r") b=$(awk '$1 == "tps" { print $2 }' "$dir/weft.$c.$r")
		echo "  pair $r: native ${a:--} weft ${b:--} ratio $(ratio "${a:-0}" "${b:-0}") (load $(cut -d' ' -f1 /proc/loadavg));" \
			"calls/op $(awk '$1 == "calls/op" { print $2 }' "$dir/native.$c.$r")/$(awk '$1 == "calls/op" { print $2 }' "$dir/weft.$c.$r")," \
			"server CPU us/op $(awk '$1 == "cpu-us/op" { print $2 }' "$dir/native.$c.$r")/$(awk '$1 == "cpu-us/op" { print $2 }' "$dir/weft.$c.$r")" >&2
		echo "$(ratio "${a:-0}" "${b:-0}")" >>"$dir/ratios.$c"
	done
	a=$(best "$dir/native.$c" tps) b=$(best "$dir/weft.$c" tps)
	printf "%-6s %10s %10s %7s %14s %16s %14s %14s\n" "$c" "$a" "$b" "$(ratio "$a" "$b")" \
		"$(best "$dir/native.$c" calls/op)/$(best "$dir/weft.$c" calls/op)" \
		"$(best "$dir/native.$c" cpu-us/op)/$(best "$dir/weft.$c" cpu-us/op)" \
		"$(best "$dir/native.$c" misses)/$(best "$dir/weft.$c" misses)" \
		"$(best "$dir/native.$c" failed)/$(best "$dir/weft.$c" failed)"
	echo "  median of the pairs' ratios: $(sort -n "$dir/ratios.$c" | awk '{ v[NR] = $1 } END { printf "%s (spread %s - %s)", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }')" >&2
done
