#!/usr/bin/env bash
# bench/turnmodel.sh - bench/turnmodel.c's thread-per-connection server,
# natively and under weft run, driven by its native closed-loop client:
# request latency (mean, p50, p95, p99) and the server's CPU per request,
# for each mode in turn (docs/design.md, "Turns"; docs/benchmarks.md).
#
#   bench/turnmodel.sh [CONNS...]      default: 512
#   TM_MODES="native weft turn=100 turn=0"   (turn=N: weft with WEFT_DEBUG=turn=N)
#   TM_WORK=40 (us of CPU per request)  TM_SECS=5  TM_PROCS=2
#
# One line per run: mode conns req/s mean p50 p95 p99 (us) cpu/req (us)
# os_threads.  Not pinned: the client shares the CPUs, as sysbench does
# in bench/mariadb.sh with MDB_PIN=0.
set -u
BUILD=${BUILD:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/$BUILD/bench/turnmodel
weft=$root/$BUILD/bin/weft
[ -x "$bin" ] || { echo "turnmodel: build $bin first (make $BUILD/bench/turnmodel)"; exit 1; }
modes=${TM_MODES:-native weft turn=100 turn=0}
work=${TM_WORK:-40}
secs=${TM_SECS:-5}
procs=${TM_PROCS:-2}
conns=${*:-512}
d=$(mktemp -d /tmp/weft-turnmodel.XXXXXX)
spid=
stop() {
	[ -n "$spid" ] || return 0
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	spid=
}
trap 'stop; rm -rf "$d"' EXIT
ulimit -n 65536 2>/dev/null
echo "turnmodel: ${work} us per request, ${secs}s, weft run --procs $procs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-10s %6s %8s %8s %8s %8s %8s %8s %7s\n" mode conns req/s mean_us p50_us p95_us p99_us cpu/req threads
for n in $conns; do
	for m in $modes; do
		rm -f "$d/sock"
		case $m in
		native) "$bin" server "$d/sock" "$work" 2>"$d/server.err" & ;;
		weft) "$weft" run --procs "$procs" -- "$bin" server "$d/sock" "$work" 2>"$d/server.err" & ;;
		turn=*) env WEFT_DEBUG="$m" "$weft" run --procs "$procs" -- "$bin" server "$d/sock" "$work" \
			2>"$d/server.err" & ;;
		*) echo "turnmodel: unknown mode $m"; continue ;;
		esac
		spid=$!
		for _ in $(seq 200); do [ -S "$d/sock" ] && break; sleep 0.05; done
		"$bin" client "$d/sock" "$n" "$secs" >"$d/client.out" 2>&1 &
		cpid=$!
		sleep 1
		cpu0=$(awk '{ print $14 + $15 }' /proc/"$spid"/stat 2>/dev/null)
		maxt=0
		while kill -0 "$cpid" 2>/dev/null; do
			t=$(awk '/^Threads:/ { print $2 }' /proc/"$spid"/status 2>/dev/null)
			[ -n "$t" ] && [ "$t" -gt "$maxt" ] && maxt=$t
			sleep 0.5
		done
		cpu1=$(awk '{ print $14 + $15 }' /proc/"$spid"/stat 2>/dev/null)
		wait "$cpid"
		stop
		read -r rps mean p50 p95 p99 <"$d/client.out"
		cpu=$(awk -v a="${cpu0:-0}" -v b="${cpu1:-0}" -v r="${rps:-0}" -v s="$secs" -v hz="$(getconf CLK_TCK)" \
			'BEGIN { if (r > 0) printf "%.1f", (b - a) / hz * 1e6 / (r * s); else print "-" }')
		printf "%-10s %6s %8s %8s %8s %8s %8s %8s %7s\n" "$m" "$n" "${rps:-FAIL}" "${mean:--}" "${p50:--}" \
			"${p95:--}" "${p99:--}" "$cpu" "$maxt"
		[ -n "${p99:-}" ] || { cat "$d/client.out"; tail -3 "$d/server.err"; }
	done
done
