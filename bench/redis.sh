#!/usr/bin/env bash
# redis.sh -- Debian's redis-server driven by redis-benchmark, natively
# and under weft run, in the same run: ops/s per command side by side,
# the ratio weft/native, and (with perf) the server's system calls per
# request.  Runs alternate native, weft, native, weft... so a machine
# whose load changes meanwhile hurts both alike; the best of RUNS counts,
# and on stderr each pair's ratios with the load average, and per test
# the median ratio with its spread.  The server runs on CPU SCPU and
# redis-benchmark on CPU CCPU (taskset; PIN=0: not pinned).
#
#   bench/redis.sh        # BUILD=build PROCS=2 N=100000 C=50 RUNS=3 PIN=1
#
# Skips (exit 0) when redis-server or redis-benchmark is not installed.
set -u
BUILD=${BUILD:-build}
PROCS=${PROCS:-2}
N=${N:-100000}
C=${C:-50}
RUNS=${RUNS:-3}
TESTS=${TESTS:-set,get,incr,lpush}
port=${PORT:-6399}
. "$(dirname "$0")/pin.sh"
weft="$BUILD/bin/weft"
for p in redis-server redis-benchmark redis-cli; do
	command -v "$p" >/dev/null || { echo "redis: $p not installed, skipped"; exit 0; }
done
[ -x "$weft" ] || { echo "redis: $weft not built"; exit 1; }
perf=
if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1; then
	perf=perf
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# one run: $1 label, rest the launcher; writes $dir/<label>.<run> lines
# "TEST ops/s" and a last line "calls/req N"
run() {
	local out=$1
	shift
	local pre=()
	[ -n "$perf" ] && pre=(perf stat -x, -o "$out.perf" -e raw_syscalls:sys_enter -e task-clock --)
	"${pre[@]}" "${spin[@]}" "$@" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --logfile "$dir/redis.log" &
	local pid=$!
	for _ in $(seq 200); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && break
		sleep 0.05
	done
	"${cpin[@]}" redis-benchmark -p "$port" -q -t "$TESTS" -n "$N" -c "$C" 2>&1 | tr '\r' '\n' |
		awk '/requests per second/ { sub(":", "", $1); print $1, $2 }' >"$out"
	local keys
	keys=$(redis-cli -p "$port" dbsize 2>/dev/null)
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
	wait "$pid" 2>/dev/null
	echo "keys $keys" >>"$out"
	if [ -n "$perf" ]; then
		local ntests
		ntests=$(($(echo "$TESTS" | tr ',' '\n' | wc -l)))
		awk -F, -v n=$((N * ntests)) '/raw_syscalls/ { printf "calls/req %.2f\n", $1 / n }
			/task-clock/ { printf "cpu-us/req %.2f\n", $1 * 1000 / n }' \
			"$out.perf" >>"$out"
	fi
}

echo "redis-server under redis-benchmark -n $N -c $C (best of $RUNS), native vs weft run --procs $PROCS${spin:+, server on CPU $SCPU, client on CPU $CCPU}"
for r in $(seq "$RUNS"); do
	run "$dir/native.$r"
	run "$dir/weft.$r" "$weft" run --procs "$PROCS" --
	load=$(cut -d' ' -f1 /proc/loadavg)
	line="  pair $r (load $load):"
	for t in $(echo "$TESTS" | tr 'a-z,' 'A-Z '); do
		a=$(awk -v k="$t" '$1 == k { print $2 }' "$dir/native.$r")
		b=$(awk -v k="$t" '$1 == k { print $2 }' "$dir/weft.$r")
		q=$(awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')
		line="$line $t $q"
		echo "$q" >>"$dir/ratios.$t"
	done
	echo "$line" >&2
done
for t in $(echo "$TESTS" | tr 'a-z,' 'A-Z '); do
	echo "  $t median ratio: $(sort -n "$dir/ratios.$t" | awk '{ v[NR] = $1 } END { printf "%s (spread %s - %s)", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }')" >&2
done
# best ops/s of the runs per test, calls/req of the best... simply the lowest
best() { # $1 native|weft, $2 key: highest value (ops/s) or, for calls/req, lowest
	cat "$dir/$1".[0-9]* | awk -v k="$2" '$1 == k { v = $2 + 0; if (!seen || (k ~ /\/req$/ ? v < b : v > b)) b = v; seen = 1 }
		END { if (seen) print b; else print "-" }'
}
printf "%-10s %12s %12s %7s\n" test native weft ratio
for t in $(echo "$TESTS" | tr 'a-z,' 'A-Z '); do
	a=$(best native "$t") b=$(best weft "$t")
	printf "%-10s %12s %12s %7s\n" "$t" "$a" "$b" \
		"$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')"
done
if [ -n "$perf" ]; then
	for k in calls/req cpu-us/req; do
		a=$(best native $k) b=$(best weft $k)
		printf "%-10s %12s %12s %7s\n" $k "$a" "$b" \
			"$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')"
	done
fi
echo "keys left at the end: native $(best native keys), weft $(best weft keys)"
