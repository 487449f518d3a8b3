#!/usr/bin/env bash
# echo_server_run.sh -- measure one echo server under loadgen.
#
#   bench/echo_server_run.sh [-n NAME] [-c CONNS] [-d SECS] [-w WARMUP]
#                            [-s MSGSIZE] [-l LOADGEN] [-L] [--] SERVER_CMD [ARG...]
#
# Starts SERVER_CMD pinned to CPU 0 (it must print "listening on PORT" on
# stdout, pick its own port, and must exec rather than fork: its PID is
# the one measured; use "env VAR=x prog" to set variables).  Runs loadgen
# pinned to CPU 1 against it; loadgen samples the server's /proc/PID/stat
# (utime+stime), Threads and VmHWM at the edges of the measured interval.
# Then kills the server and prints one line:
#
#   server=NAME conns=N connected=N msgs_per_sec=R p50_us=L p99_us=L
#   cpu_us_per_msg=C threads=T rss_kib=K mismatched_bytes=M errors=E
#
# Defaults: 1000 connections, 3 s measured, 1 s warm-up, 64-byte
# messages, loadgen from $BUILD/bench/loadgen (BUILD defaults to build,
# relative to the repository root).  Exit status is loadgen's; 2 when the
# server did not start.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
name="" conns=1000 secs=3 warm=1 size=64 lines=
loadgen="$root/${BUILD:-build}/bench/loadgen"

usage() {
	echo "usage: $0 [-n NAME] [-c CONNS] [-d SECS] [-w WARMUP] [-s MSGSIZE]" \
		"[-l LOADGEN] [-L] [--] SERVER_CMD [ARG...]" >&2
	exit 2
}

while getopts "n:c:d:w:s:l:L" opt; do
	case $opt in
	n) name=$OPTARG ;;
	c) conns=$OPTARG ;;
	d) secs=$OPTARG ;;
	w) warm=$OPTARG ;;
	s) size=$OPTARG ;;
	l) loadgen=$OPTARG ;;
	L) lines=-L ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
[ -x "$loadgen" ] || { echo "$0: no loadgen at $loadgen" >&2; exit 2; }
[ -n "$name" ] || name=$(basename "$1")

# Both sides may need one descriptor per connection.
ulimit -n "$(ulimit -Hn)" 2>/dev/null

tmp=$(mktemp -d "${TMPDIR:-/tmp}/echo_run.XXXXXX") || exit 2
spid=""

# Stop the server we started (TERM, then KILL) and clean up.
# shellcheck disable=SC2317  # invoked from the EXIT trap
cleanup() {
	if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then
		kill -TERM "$spid" 2>/dev/null
		for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
			kill -0 "$spid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	fi
	spid=""
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# taskset execs the command, so $! is the server itself.
taskset -c 0 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null &
spid=$!

port=""
for _ in $(seq 100); do		# at most ~10 s
	port=$(sed -n 's/^listening on \([0-9][0-9]*\).*/\1/p' "$tmp/out" | head -n1)
	[ -n "$port" ] && break
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$port" ]; then
	echo "$0: $name did not report a port" >&2
	cat "$tmp/err" >&2
	exit 2
fi

# loadgen bounds itself (30 s connect budget + warm-up + run); timeout
# is a backstop.
limit=$(awk -v w="$warm" -v d="$secs" 'BEGIN { printf "%d", w + d + 60 }')
line=$(timeout -k 5 "$limit" taskset -c 1 "$loadgen" -p "$port" \
	-c "$conns" -d "$secs" -w "$warm" -s "$size" -P "$spid" $lines)
rc=$?

field() {
	printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

if [ -z "$line" ]; then
	echo "$0: loadgen produced no result (status $rc)" >&2
	[ "$rc" -ne 0 ] || rc=1
	exit "$rc"
fi
msgs=$(field msgs)
cpu=$(field server_cpu_us)
per=$(awk -v c="$cpu" -v m="$msgs" \
	'BEGIN { if (m > 0 && c >= 0) printf "%.2f", c / m; else print "nan" }')
echo "server=$name conns=$conns connected=$(field connected)" \
	"msgs_per_sec=$(field msgs_per_sec) p50_us=$(field p50_us)" \
	"p99_us=$(field p99_us) cpu_us_per_msg=$per" \
	"threads=$(field server_threads) rss_kib=$(field server_vmhwm_kib)" \
	"mismatched_bytes=$(field mismatched_bytes) errors=$(field errors)"
exit "$rc"
