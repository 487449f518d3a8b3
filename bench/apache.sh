#!/usr/bin/env bash
# apache.sh -- Debian's apache2 (mpm_worker, 4 children x 25 threads,
# keep-alive off, 127.0.0.1 only) under ab, natively and under weft run,
# side by side: requests per second and, with perf, the server's system
# calls per request (every process of the server, counted by the kernel's
# raw_syscalls:sys_enter tracepoint; ab not included).  Runs alternate
# native, weft; each pair's ratios with the load average go to stderr,
# then the median ratio and its spread.  The server runs on CPU SCPU and
# ab on CPU CCPU (taskset; PIN=0: not pinned).
#
#   bench/apache.sh                 # BUILD=build, PROCS=2, N=20000, C=50, RUNS=3, PIN=1
#   SYSCALLS=1 bench/apache.sh      # also the most frequent calls per request (TOP=10)
#
# Skips (exit 0) when apache2 or ab is absent; syscall counts need perf
# and root (the children run as www-data anyway).
set -u
BUILD=${BUILD:-build}
PROCS=${PROCS:-2}
N=${N:-20000}
C=${C:-50}
RUNS=${RUNS:-3}
port=${PORT:-8097}
. "$(dirname "$0")/pin.sh"
weft="$BUILD/bin/weft"
for p in /usr/sbin/apache2 ab; do
	command -v "$p" >/dev/null || { echo "apache: $p not installed, skipped"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "apache: needs root (children as www-data), skipped"; exit 0; }
[ -x "$weft" ] || { echo "apache: $weft not built"; exit 1; }
perf=
if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1; then
	perf=perf
fi
. "$(dirname "$0")/apache-lib.sh"
apache_setup "$port" 1024 'StartServers 4
ServerLimit 4
ThreadLimit 25
ThreadsPerChild 25
MinSpareThreads 25
MaxSpareThreads 100
MaxRequestWorkers 100
KeepAlive Off'

up() {
	for _ in $(seq 200); do
		ab -q -n 1 "http://127.0.0.1:$port/" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	return 1
}

# one run: $1 label, rest the launcher prefix; prints "label rps calls"
run() {
	local label=$1
	shift
	local out="$dir/perf.$label"
	rm -f "$dir/httpd.pid"
	if [ -n "$perf" ]; then
		perf stat -o "$out" -e raw_syscalls:sys_enter -e task-clock ${SYSCALLS:+-e 'syscalls:sys_enter_*'} -- \
			"${spin[@]}" "$@" /usr/sbin/apache2 -f "$dir/httpd.conf" -DFOREGROUND &
	else
		"${spin[@]}" "$@" /usr/sbin/apache2 -f "$dir/httpd.conf" -DFOREGROUND &
	fi
	local launcher=$!
	up || { echo "apache: did not start ($label)"; kill "$launcher"; return 1; }
	ab -q -n 2000 -c "$C" "http://127.0.0.1:$port/" >/dev/null 2>&1 # warm every child
	# the counted part: perf counts from the start, so subtract a run of
	# the same warm-up alone is not possible; count everything, divide by
	# every request made (1 + 2000 + N)
	local rps
	rps=$("${cpin[@]}" ab -q -n "$N" -c "$C" "http://127.0.0.1:$port/" 2>&1 |
		awk '/Failed requests/ { f = $3 } /Requests per second/ { r = $4 } END { if (f != 0) r = r " (" f " failed)"; print r }')
	kill -TERM "$(cat "$dir/httpd.pid")"
	wait "$launcher" 2>/dev/null
	local calls=- cpu=-
	if [ -n "$perf" ]; then
		calls=$(awk -v n=$((N + 2001)) '/raw_syscalls:sys_enter/ { gsub(",", "", $1); printf "%.1f", $1 / n }' "$out")
		cpu=$(awk -v n=$((N + 2001)) '/task-clock/ { gsub(",", "", $1); printf "%.0f", $1 * 1000 / n }' "$out")
	fi
	echo "$label $rps $calls $cpu"
	if [ -n "${SYSCALLS:-}" ] && [ -n "$perf" ]; then
		echo "  $label, calls per request:" >&2
		grep 'syscalls:sys_enter_' "$out" | grep -v ' 0 ' | sed 's/,//g' | sort -rn | head -"${TOP:-10}" |
			awk -v n=$((N + 2001)) '{ sub("syscalls:sys_enter_", "", $2); printf "    %-24s %8.2f\n", $2, $1 / n }' >&2
	fi
}

echo "apache2 mpm_worker, keep-alive off, ab -n $N -c $C; weft run --procs $PROCS${spin:+; server on CPU $SCPU, ab on CPU $CCPU}"
printf "%-8s %12s %12s %7s %14s %14s %7s %12s %6s\n" run native_rps weft_rps ratio native_calls/req weft_calls/req ratio cpu-us/req load
for r in $(seq "$RUNS"); do
	a=$(run native)
	b=$(run weft "$weft" run --procs "$PROCS" --)
	set -- $a
	nr=$2 nc=${3:-} nu=${4:-}
	set -- $b
	wr=$2 wc=${3:-} wu=${4:-}
	ratio=$(awk -v a="$nr" -v b="$wr" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')
	cratio=$(awk -v a="$nc" -v b="$wc" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')
	printf "%-8s %12s %12s %7s %14s %14s %7s %12s %6s\n" "$r" "$nr" "$wr" "$ratio" "$nc" "$wc" "$cratio" \
		"$nu/$wu" "$(cut -d' ' -f1 /proc/loadavg)"
	echo "$ratio" >>"$dir/ratios.rps"
	echo "$cratio" >>"$dir/ratios.calls"
done
med() { sort -n "$1" | awk '{ v[NR] = $1 } END { printf "%s (spread %s - %s)", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'; }
echo "median weft/native req/s $(med "$dir/ratios.rps"); calls/req $(med "$dir/ratios.calls")"
