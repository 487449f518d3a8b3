#!/usr/bin/env bash
# demo.sh -- make demo: an unmodified thread-per-connection server on weft.
#
# examples/echo_threads.c is a classic echo server: one pthread per
# connection, blocking read/write, built without weft and knowing nothing
# of it.  The demo runs it under the same load natively and under "weft
# run --procs 2" (its pthreads become green threads on two processors),
# DEMO_RUNS times each (default 3), alternating, and prints side by side
# the run of each with the median messages per second: on a machine
# shared with other work one run says little.  It also says how busy the
# machine was just before each run.  Then the same for
# examples/echo_stdio.c, the server written with stdio (fdopen, fgets,
# fputs, fflush) and loaded with lines (DEMO_SERVERS picks: default
# "echo_threads echo_stdio").
#
# Load: bench/loadgen, DEMO_CONNS concurrent connections (default 10000),
# each a closed loop of 64-byte messages, 1 s warm-up then DEMO_SECS
# (default 3) measured; bench/echo_server_run.sh pins the server to CPU 0
# and the load generator to CPU 1 and samples the server's CPU, threads
# (/proc/PID/status) and peak RSS (VmHWM).  Kernel memory is the rise of
# KernelStack + PageTables in /proc/meminfo while the server runs (per-
# thread kernel stacks and page tables; socket buffers, the same in both
# runs, are not counted).
#
# Environment: BUILD (default build), DEMO_CONNS, DEMO_SECS, DEMO_PROCS
# (default 2), DEMO_RUNS, DEMO_SERVERS.  The soft fd limit is raised to the hard limit.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
case ${BUILD:-build} in
/*) build=$BUILD ;;
*) build="$root/${BUILD:-build}" ;;
esac
conns=${DEMO_CONNS:-10000}
secs=${DEMO_SECS:-3}
procs=${DEMO_PROCS:-2}
runs=${DEMO_RUNS:-3}
servers=${DEMO_SERVERS:-echo_threads echo_stdio}
weft="$build/bin/weft"
run="$root/bench/echo_server_run.sh"

for f in $(for s in $servers; do echo "$build/examples/$s"; done) "$weft" "$build/bench/loadgen" \
	"$build/lib/libweft_preload.so"; do
	[ -e "$f" ] || { echo "demo: $f is missing (make demo builds it)" >&2; exit 2; }
done

# one descriptor per connection on each side, plus a few
ulimit -n "$(ulimit -Hn)" 2>/dev/null
nofile=$(ulimit -n)
if [ "$nofile" != unlimited ] && [ "$conns" -gt $((nofile - 64)) ]; then
	echo "demo: the fd limit is $nofile; running $((nofile - 64)) connections, not $conns" >&2
	conns=$((nofile - 64))
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-demo.XXXXXX") || exit 2
sampler=""
cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
	sampler=""
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Percent of all CPUs busy over the next second (nothing of ours runs).
busy() {
	local a b
	a=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6 }' /proc/stat)
	sleep 1
	b=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6 }' /proc/stat)
	awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
		t = (y[1] - x[1]) + (y[2] - x[2]); printf "%d", (t > 0 ? 100 * (y[1] - x[1]) / t : 0) }'
}

# KernelStack + PageTables now, in KiB
kmem() {
	awk '/^(KernelStack|PageTables):/ { s += $2 } END { print s }' /proc/meminfo
}

# Sample kmem until killed; write the highest to $1.
sample() {
	local max=0 v
	trap 'echo "$max" > "$1"; exit 0' TERM
	while :; do
		v=$(kmem)
		[ "$v" -gt "$max" ] && max=$v
		sleep 0.2
	done
}

# measure NAME CMD...: one echo_server_run.sh line in $tmp/NAME, the
# kernel memory rise in $tmp/NAME.kmem ($lines: -L for line messages)
measure() {
	local name=$1
	shift
	local base
	base=$(kmem)
	sample "$tmp/$name.max" &
	sampler=$!
	"$run" -n "$name" -c "$conns" -d "$secs" -w 1 -l "$build/bench/loadgen" $lines -- "$@" \
		>"$tmp/$name" 2>"$tmp/$name.err"
	local rc=$?
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null
	sampler=""
	echo $(($(cat "$tmp/$name.max" 2>/dev/null || echo "$base") - base)) >"$tmp/$name.kmem"
	if [ ! -s "$tmp/$name" ]; then
		echo "demo: the $name run failed:" >&2
		cat "$tmp/$name.err" >&2
		exit 1
	fi
	[ "$rc" -eq 0 ] || echo "demo: loadgen reported errors in the $name run (status $rc)" >&2
}

field() { # field FILE KEY
	tr ' ' '\n' <"$1" | sed -n "s/^$2=//p"
}

# demo SERVER: its runs and its table
demo() {
local sv=$1 server="$build/examples/$1" lines=""
case $sv in
echo_stdio)
	lines=-L
	echo "weft demo: examples/echo_stdio - one pthread per connection, fdopen/fgets/fputs/fflush,"
	echo "built without weft.  $conns connections, 64-byte lines, $secs s measured, $runs runs each."
	;;
*)
	echo "weft demo: examples/$sv - one pthread per connection, blocking read/write,"
	echo "built without weft.  $conns connections, 64-byte messages, $secs s measured, $runs runs each."
	;;
esac
loads=""
for r in $(seq "$runs"); do
	loads="$loads $(busy)%"
	echo "run $r of $runs: natively ..."
	measure "$sv.native.$r" "$server"
	loads="$loads $(busy)%"
	echo "run $r of $runs: under weft run --procs $procs ..."
	measure "$sv.weft.$r" "$weft" run --procs "$procs" -- "$server"
done

# median NAME: the run of NAME with the median messages per second
median() {
	local f
	for f in "$tmp/$1".[0-9]*; do
		case $f in *.kmem | *.max | *.err) continue ;; esac
		echo "$(field "$f" msgs_per_sec) $f"
	done | sort -n | awk '{ l[NR] = $2 } END { print l[int((NR + 1) / 2)] }'
}
each() { # each NAME: messages per second of every run, in order
	local r out=""
	for r in $(seq "$runs"); do out="$out $(field "$tmp/$1.$r" msgs_per_sec)"; done
	echo "$out"
}

n=$(median "$sv.native") w=$(median "$sv.weft")
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
ms() { awk -v u="$1" 'BEGIN { printf "%.1f", u / 1000 }'; }

echo
printf "%-28s %16s %22s %10s\n" "" "native" "weft run --procs $procs" "weft/native"
row() { printf "%-28s %16s %22s %10s\n" "$1" "$2" "$3" "$4"; }
row "connections served" "$(field "$n" connected)/$conns" "$(field "$w" connected)/$conns" ""
row "messages per second" "$(field "$n" msgs_per_sec)" "$(field "$w" msgs_per_sec)" \
	"$(ratio "$(field "$w" msgs_per_sec)" "$(field "$n" msgs_per_sec)")"
row "p99 latency (ms)" "$(ms "$(field "$n" p99_us)")" "$(ms "$(field "$w" p99_us)")" \
	"$(ratio "$(field "$w" p99_us)" "$(field "$n" p99_us)")"
row "server CPU per message (us)" "$(field "$n" cpu_us_per_msg)" "$(field "$w" cpu_us_per_msg)" \
	"$(ratio "$(field "$w" cpu_us_per_msg)" "$(field "$n" cpu_us_per_msg)")"
row "mismatched bytes" "$(field "$n" mismatched_bytes)" "$(field "$w" mismatched_bytes)" ""
row "server OS threads" "$(field "$n" threads)" "$(field "$w" threads)" ""
row "server peak RSS (MiB)" "$(mib "$(field "$n" rss_kib)")" "$(mib "$(field "$w" rss_kib)")" \
	"$(ratio "$(field "$w" rss_kib)" "$(field "$n" rss_kib)")"
row "kernel stacks+tables (MiB)" "$(mib "$(cat "$n.kmem")")" "$(mib "$(cat "$w.kmem")")" \
	"$(ratio "$(cat "$w.kmem")" "$(cat "$n.kmem")")"
echo
echo "Each side: the run with the median messages per second (all runs, in order:"
echo "native$(each "$sv.native"); weft$(each "$sv.weft"))."
echo "Before the runs, other work kept the machine's CPUs busy:$loads."
echo
if [ "$sv" = echo_stdio ]; then
	echo "Same binary, no source change: under weft fdopen gives a FILE whose reads and writes"
	echo "park the green thread instead of its OS thread.  docs/hooks.md explains how."
else
	echo "Same binary, no source change: under weft each pthread is a green thread that"
	echo "parks in read() instead of holding an OS thread.  docs/preload.md explains how."
fi
}

first=1
for sv in $servers; do
	[ $first = 1 ] || echo
	first=0
	demo "$sv"
done
