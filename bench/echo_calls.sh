#!/usr/bin/env bash
# echo_calls.sh -- system calls per message of examples/echo_threads,
# counted by the kernel (perf's raw_syscalls:sys_enter and per-call
# tracepoints over the server), natively or preloaded:
#
#   bench/echo_calls.sh [PROCS] [CONNS] [native]   # defaults 2 1 (weft run)
#
# The server runs on CPU 0, loadgen on CPU 1 (64-byte messages, 6 s with
# 1 s warm-up); perf counts 2 s in the middle; messages = the server's
# write + sendto calls.  Prints one line of calls per message by name
# (task-clock: the server's CPU ms per message) and loadgen's rate.
# Needs perf and root (tracepoints); BUILD as for make (default build).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
b=$root/${BUILD:-build}
procs=${1:-2} conns=${2:-1} mode=${3:-weft}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$mode" = native ]; then
	taskset -c 0 "$b/examples/echo_threads" >"$tmp/out" 2>"$tmp/err" </dev/null &
else
	taskset -c 0 "$b/bin/weft" run --procs "$procs" -- "$b/examples/echo_threads" \
		>"$tmp/out" 2>"$tmp/err" </dev/null &
fi
spid=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/^listening on \([0-9][0-9]*\).*/\1/p' "$tmp/out" | head -n1)
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || { echo "echo_calls: no port" >&2; cat "$tmp/err" >&2; kill "$spid"; exit 1; }
timeout 60 taskset -c 1 "$b/bench/loadgen" -p "$port" -c "$conns" -d 6 -w 1 -s 64 -P "$spid" \
	>"$tmp/lg" 2>&1 &
lpid=$!
sleep 3
ev="-e raw_syscalls:sys_enter -e context-switches -e task-clock"
for n in read recvfrom write sendto epoll_wait epoll_pwait epoll_pwait2 epoll_ctl fcntl futex \
	clock_nanosleep arch_prctl rt_tgsigqueueinfo rt_sigreturn rt_sigpending ppoll poll; do
	ev="$ev -e syscalls:sys_enter_$n"
done
# shellcheck disable=SC2086
perf stat -x, $ev -p "$spid" -- sleep 2 2>"$tmp/perf"
wait "$lpid"
kill -TERM "$spid"
wait "$spid" 2>/dev/null
awk -F, '{ c[$3] = $1 } END {
	m = c["syscalls:sys_enter_write"] + c["syscalls:sys_enter_sendto"]
	printf "msgs=%d", m
	for (k in c) if (m > 0 && c[k] + 0 > 0) { n = k; sub("syscalls:sys_enter_", "", n); printf " %s=%.3f", n, c[k] / m }
	printf "\n" }' "$tmp/perf"
grep -o "msgs_per_sec=[0-9.]*\|mismatched_bytes=[0-9]*" "$tmp/lg" | tr '\n' ' '
echo
