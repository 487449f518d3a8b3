#!/usr/bin/env bash
# bench/mariadb.sh - MariaDB (thread per connection) driven by sysbench,
# natively, under weft run, and with MariaDB's own thread pool, side by side
# (issue 13's target).  Skips cleanly when mariadbd or sysbench is missing.
#
#   bench/mariadb.sh [THREADS...]        default: 16 512
#   MDB_TEST=oltp_point_select MDB_SECS=10 MDB_PROCS=2 MDB_MODES="native weft pool"
#
# Modes: native; weft (weft run, its default: each thread its own TLS);
# weft-nokeep (the same with WEFT_DEBUG=g0keep=0: the scheduler on its own
# TLS, two FS loads per trip through it); weft-idlepoll (WEFT_DEBUG=pollgap=0:
# only idle Ps and sysmon poll the netpoller, as before session 10); weft-turn
# (WEFT_DEBUG=turn=$MDB_TURN, default 200: a connection's G that finds its next
# request there gives way once it has run that many us; docs/design.md,
# "Turns"); weft-noturn (WEFT_DEBUG=turn=0: never); weft-defer
# (WEFT_DEBUG=busydefer=$MDB_DEFER, default 10000: a G stuck in a call weft
# does not see waits up to that many us for a spare P while the server's
# other Ms fill its CPUs; docs/design.md); shared (weft run with
# WEFT_TLS=shared); wnative (weft run with WEFT_PTHREADS=native: real
# threads on weft's pthread locks); pool (thread_handling=pool-of-threads).
# MDB_WEFT_DEBUG: WEFT_DEBUG for the weft modes (e.g. kwait=0).
# MDB_SCHEDTRACE=1: the weft modes run with schedtrace, and the line shows
# per transaction the G switches (G->G, G->scheduler, scheduler->G), the
# FS base loads and the turns, from the server's last SCHED line.  MDB_STRACE=1: the
# server runs under strace -c -f and the line shows its system calls per
# transaction (strace slows it: compare the counts, not the tps).
#
# MDB_SYSCALLS=1: perf stat counts the server's system calls (all, and the
# main kinds) over the run, without slowing it as strace does; the line
# shows them per transaction.  MDB_SYSLIST: the kinds (names as in
# syscalls:sys_enter_NAME), instead of the default list.
# MDB_PIN=1 (the default; PIN, SCPU, CCPU as bench/pin.sh): the server on
# CPU 0 and sysbench on CPU 1 (taskset), for every mode, and weft with one
# P (MDB_PROCS, default 1 pinned, 2 with MDB_PIN=0).  Why pinned: sysbench
# on the server's machine is a client the kernel schedules against the
# server, per thread: its 16-1,000 threads on the same two CPUs take CPU
# from a weft server's few OS threads far more than from a native server's
# one thread per connection (docs/benchmarks.md, MariaDB, session 6: the
# weft server waited 150-390 us per transaction for a CPU).  A client on
# another machine takes none; pinned, each side has a CPU of its own.
# MDB_LOGS=DIR: each run's server log kept as DIR/MODE-THREADS.log (the
# schedtrace lines of MDB_SCHEDTRACE=1 among them).
# MDB_WARMUP=S: also the server's CPU per transaction after sysbench's
# first S seconds (connection set-up and MariaDB's allocators warming up
# inflate a short run's; sysbench's per-second counts give the
# transactions after S, the server's CPU is read when second S is
# reported).
# MDB_PERF=1: perf record (cpu-clock) on the server over the run, and the
# line is followed by its top symbols (object, symbol, share of samples).
#
# MDB_HIST=1: sysbench's latency histogram, and the line is followed by
# its average and percentiles 50 to 99.9 and its largest latency (a
# server that is fair to its clients and one that starves a few can have
# the same p95 at different averages: Little's law ties the average to the
# tps, the spread is the scheduler's).
#
# MDB_IDLE=S (default 3): after the run the server is left idle S seconds
# and its OS threads counted again (weft's idle Ms retire after 1 s:
# docs/design.md, "Idle Ms retire").  MDB_CLONES=1: perf stat counts the
# server's clone/clone3 calls over the run (threads it started).
#
# One line per run: mode threads tps errors p95_ms os_threads (the most
# seen, sampled every 0.5 s), end (at the run's last sample) and idle
# (after MDB_IDLE s idle); the server's
# first line of its crash report is shown when it dies.  Then the server's
# CPU per transaction and, from every server thread's /proc schedstat over
# the run, its time on a CPU and its time runnable but waiting for one
# (the kernel's run queue) per transaction, summed over its threads: a
# server with 30 threads natively gets a larger share of a loaded machine
# than one with a few Ms (docs/benchmarks.md, MariaDB).  Unix socket only
# (no TCP), bounded in time.
set -u
BUILD=${BUILD:-build}
secs=${MDB_SECS:-10}
test=${MDB_TEST:-oltp_point_select}
PIN=${MDB_PIN:-${PIN:-1}}
. "$(dirname "$0")/pin.sh"
procs=${MDB_PROCS:-$([ ${#spin[@]} -gt 0 ] && echo 1 || echo 2)}
modes=${MDB_MODES:-native weft pool}
threads=${*:-16 512}
for c in mariadbd mariadb-install-db sysbench; do
	command -v "$c" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin
	command -v "$c" >/dev/null 2>&1 || { echo "mariadb: skipped ($c not installed: apt-get install mariadb-server sysbench)"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "mariadb: skipped (needs root to run mariadbd as root)"; exit 0; }
weft=$(cd "$(dirname "$0")/.." && pwd)/$BUILD/bin/weft
wdebug=${MDB_WEFT_DEBUG:-}
turn=${MDB_TURN:-200}
warm=${MDB_WARMUP:-0}
[ "${MDB_SCHEDTRACE:-0}" = 1 ] && wdebug=${wdebug:+$wdebug,}schedtrace=1000
d=$(mktemp -d /tmp/weft-mdb.XXXXXX)
spid=
stop() {
	[ -n "$spid" ] || return 0
	kill "$spid" 2>/dev/null
	( sleep 60; kill -9 "$spid" 2>/dev/null ) &
	local killer=$!
	wait "$spid" 2>/dev/null
	kill "$killer" 2>/dev/null
	spid=
}
trap 'stop; rm -rf "$d"' EXIT
mariadb-install-db --no-defaults --user=root --datadir="$d/data" --auth-root-authentication-method=normal \
	--skip-test-db >"$d/install.log" 2>&1 || { echo "mariadb: install-db failed"; cat "$d/install.log"; exit 1; }

# schedstat PID: run ns, run-queue wait ns, slices, summed over its threads
schedstat() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ r += $1; w += $2; n += $3 } END { print r, w, n }'; }

start() { # start MODE
	local pre=() extra=()
	case $1 in
	weft) pre=(env WEFT_DEBUG="$wdebug" "$weft" run --procs "$procs" --) ;;
	weft-nokeep) pre=(env WEFT_DEBUG="${wdebug:+$wdebug,}g0keep=0" "$weft" run --procs "$procs" --) ;;
	weft-idlepoll) pre=(env WEFT_DEBUG="${wdebug:+$wdebug,}pollgap=0" "$weft" run --procs "$procs" --) ;;
	weft-turn) pre=(env WEFT_DEBUG="${wdebug:+$wdebug,}turn=$turn" "$weft" run --procs "$procs" --) ;;
	weft-noturn) pre=(env WEFT_DEBUG="${wdebug:+$wdebug,}turn=0" "$weft" run --procs "$procs" --) ;;
	weft-defer) pre=(env WEFT_DEBUG="${wdebug:+$wdebug,}busydefer=${MDB_DEFER:-10000}" "$weft" run --procs "$procs" --) ;;
	shared) pre=(env WEFT_TLS=shared "$weft" run --procs "$procs" --) ;;
	wnative) pre=(env WEFT_PTHREADS=native "$weft" run --procs "$procs" --) ;;
	pool) extra=(--thread-handling=pool-of-threads) ;;
	esac
	"${spin[@]}" "${pre[@]}" mariadbd --no-defaults --user=root --datadir="$d/data" --socket="$d/sock" \
		--skip-networking --max-connections=3000 --skip-log-bin \
		--innodb-buffer-pool-size=256M --skip-name-resolve --max-prepared-stmt-count=1000000 \
		"${extra[@]}" >"$d/server.log" 2>&1 &
	spid=$!
	for _ in $(seq 600); do
		[ -S "$d/sock" ] && mariadb-admin --no-defaults -uroot --socket="$d/sock" ping >/dev/null 2>&1 && return 0
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	echo "mariadb: $1 server did not start"; tail -20 "$d/server.log"; return 1
}
sb() { "${cpin[@]}" sysbench "$test" --db-driver=mysql --mysql-socket="$d/sock" --mysql-user=root \
	--mysql-db=sbtest --tables=4 --table-size=10000 "$@"; }

start native || exit 1
mariadb --no-defaults -uroot --socket="$d/sock" -e 'create database sbtest' || exit 1
sb prepare >/dev/null || exit 1
stop
echo "mariadb: $test ${secs}s, weft run --procs $procs${spin:+, server on CPU $SCPU, sysbench on CPU $CCPU}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-8s %8s %10s %8s %8s %8s %5s %5s\n" mode threads tps errors p95_ms threads_os end idle
for n in $threads; do
	for m in $modes; do
		start "$m" || continue
		tpid=
		rm -f "$d/strace.out"
		if [ "${MDB_STRACE:-0}" = 1 ]; then
			strace -f -c -o "$d/strace.out" -p "$spid" 2>/dev/null &
			tpid=$!
			sleep 1
		fi
		cpu0=$(awk '{ print $14 + $15 }' /proc/"$spid"/stat 2>/dev/null)
		ss0=$(schedstat "$spid")
		sb --threads="$n" --time="$secs" --report-interval=$([ "$warm" -gt 0 ] && echo 1 || echo 0) \
			$([ "${MDB_HIST:-0}" = 1 ] && echo --histogram=on) run >"$d/run.out" 2>&1 &
		cpid=$!
		cpuw=
		ppid=
		rm -f "$d/perf.out"
		if [ "${MDB_SYSCALLS:-0}" = 1 ] && command -v perf >/dev/null; then
			perf stat -x, -o "$d/perf.out" -e raw_syscalls:sys_enter$(printf ',syscalls:sys_enter_%s' \
				${MDB_SYSLIST:-recvfrom sendto poll ppoll epoll_wait epoll_pwait2 futex arch_prctl tgkill \
				sched_yield clock_nanosleep io_uring_enter}) -p "$spid" 2>/dev/null &
			ppid=$!
		fi
		kpid=
		rm -f "$d/clones.out"
		if [ "${MDB_CLONES:-0}" = 1 ] && command -v perf >/dev/null; then
			perf stat -x, -o "$d/clones.out" -e syscalls:sys_enter_clone,syscalls:sys_enter_clone3 \
				-p "$spid" 2>/dev/null &
			kpid=$!
		fi
		rpid=
		if [ "${MDB_PERF:-0}" = 1 ] && command -v perf >/dev/null; then
			perf record -q -e cpu-clock -F 4000 -o "$d/perf-$m-$n.data" -p "$spid" 2>/dev/null &
			rpid=$!
		fi
		maxt=0
		endt=-
		while kill -0 "$cpid" 2>/dev/null; do
			t=$(awk '/^Threads:/ { print $2 }' /proc/"$spid"/status 2>/dev/null)
			[ -n "$t" ] && endt=$t
			[ -n "$t" ] && [ "$t" -gt "$maxt" ] && maxt=$t
			# at sysbench's report of second S (its clock starts once
			# every client has connected), within the 0.2 s of a look
			[ "$warm" -gt 0 ] && [ -z "$cpuw" ] && grep -q "^\[ *${warm}s \]" "$d/run.out" &&
				cpuw=$(awk '{ print $14 + $15 }' /proc/"$spid"/stat 2>/dev/null)
			sleep "$([ "$warm" -gt 0 ] && echo 0.2 || echo 0.5)"
		done
		wait "$cpid"
		[ -n "$kpid" ] && { kill -INT "$kpid"; wait "$kpid"; }
		[ -n "$ppid" ] && { kill -INT "$ppid"; wait "$ppid"; }
		[ -n "$rpid" ] && { kill -INT "$rpid"; wait "$rpid"; }
		cpu1=$(awk '{ print $14 + $15 }' /proc/"$spid"/stat 2>/dev/null)
		ss1=$(schedstat "$spid")
		[ -n "$tpid" ] && { kill -INT "$tpid"; wait "$tpid"; }
		tps=$(awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' "$d/run.out")
		err=$(awk '/ignored errors:/ { print $3 }' "$d/run.out")
		p95=$(awk '/95th percentile:/ { print $3 }' "$d/run.out")
		alive=yes
		kill -0 "$spid" 2>/dev/null || alive="DIED"
		idlet=-
		if [ "$alive" = yes ] && [ "${MDB_IDLE:-3}" -gt 0 ]; then
			sleep "${MDB_IDLE:-3}"
			idlet=$(awk '/^Threads:/ { print $2 }' /proc/"$spid"/status 2>/dev/null)
		fi
		printf "%-8s %8s %10s %8s %8s %8s %5s %5s %s\n" "$m" "$n" "${tps:-FAIL}" "${err:--}" "${p95:--}" "$maxt" \
			"$endt" "${idlet:--}" \
			"$([ "$alive" = yes ] || echo "server died: $(grep -m1 -i 'signal\|assert' "$d/server.log")")"
		# MDB_CLONES=1: threads the server started over the run
		[ -s "$d/clones.out" ] &&
			awk -F, -v s="$secs" '$1 ~ /^[0-9]+$/ { n += $1 } END { printf "         threads started (clone, clone3) over the run: %d, %.1f per second\n", n, n / s }' "$d/clones.out"
		[ -n "$tps" ] || tail -5 "$d/run.out"
		# MDB_HIST=1: the spread of the latencies, from sysbench's
		# histogram ("value | *** count" lines, value in ms)
		[ "${MDB_HIST:-0}" = 1 ] && awk '
			/^ +[0-9.]+ \|/ { v[n] = $1; c[n] = $NF; tot += $NF; n++ }
			/avg:/ && !avg { avg = $2 }
			END { if (!tot) exit
				split("50 90 95 99 99.9", q, " "); l = ""
				for (k = 1; k <= 5; k++) { want = tot * q[k] / 100; s = 0
					for (i = 0; i < n; i++) { s += c[i]; if (s >= want) break }
					l = l sprintf(" p%s %s", q[k], v[i]) }
				printf "         latency ms: avg %s%s max %s\n", avg, l, v[n - 1] }' "$d/run.out"
		tx=$(awk '/transactions:/ { print $2 }' "$d/run.out")
		# the server's CPU (user + system, clock ticks) per transaction
		[ -n "${cpu0:-}" ] && [ -n "${cpu1:-}" ] && [ "${tx:-0}" -gt 0 ] &&
			awk -v a="$cpu0" -v b="$cpu1" -v tx="$tx" -v hz="$(getconf CLK_TCK)" \
				'BEGIN { printf "         server CPU per transaction: %.1f us\n", (b - a) / hz * 1e6 / tx }'
		# MDB_WARMUP=S: the same after S seconds (transactions from the
		# per-second reports: "[ 7s ] thds: N tps: T ...")
		[ -n "${cpuw:-}" ] && [ -n "${cpu1:-}" ] &&
			awk -v a="$cpuw" -v b="$cpu1" -v w="$warm" -v hz="$(getconf CLK_TCK)" '
				/^\[ *[0-9]+s \]/ { t = $2; sub(/s/, "", t); if (t + 0 > w) tx += $7 }
				END { if (tx > 0) printf "         server CPU per transaction after %ds: %.1f us\n", w, (b - a) / hz * 1e6 / tx }' "$d/run.out"
		# schedstat (ns on a CPU, ns waiting on a run queue, slices), summed
		# over the threads alive at each end (threads that ended between are
		# not counted: the server keeps its threads for the run)
		[ -n "${ss0:-}" ] && [ -n "${ss1:-}" ] && [ "${tx:-0}" -gt 0 ] &&
			echo "$ss0 $ss1" | awk -v tx="$tx" '{ printf "         server threads per transaction: %.1f us on a CPU, %.1f us waiting for one, %.2f slices\n", ($4 - $1) / 1e3 / tx, ($5 - $2) / 1e3 / tx, ($6 - $3) / tx }'
		# MDB_SYSCALLS=1: per transaction (perf stat -x: count,,event,...)
		[ -s "$d/perf.out" ] && [ "${tx:-0}" -gt 0 ] &&
			awk -F, -v tx="$tx" '$1 ~ /^[0-9]+$/ { sub(/.*:(sys_enter_)?/, "", $3); l = l sprintf(" %s %.2f", $3, $1 / tx) }
				END { print "         system calls per transaction:" l }' "$d/perf.out"
		stop
		[ -n "${MDB_LOGS:-}" ] && mkdir -p "$MDB_LOGS" && cp "$d/server.log" "$MDB_LOGS/$m-$n.log"
		# MDB_STRACE=1: the server's system calls per transaction (strace -c -f,
		# which slows it: compare the counts, not the tps)
		[ "${MDB_STRACE:-0}" = 1 ] && [ -s "$d/strace.out" ] &&
			awk -v tx="${tx:-0}" 'tx > 0 && $NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $4 / tx >= 0.05 {
				printf "         %-16s %8.2f per transaction (%.2f failed)\n", $NF, $4 / tx,
					(NF == 6 ? $5 : 0) / tx }' "$d/strace.out"
		# MDB_PERF=1: where the server's CPU went (perf's cpu-clock
		# samples, by object and symbol), the first 25 lines
		[ -s "$d/perf-$m-$n.data" ] &&
			perf report -q -i "$d/perf-$m-$n.data" --no-children --sort dso,sym 2>/dev/null |
			awk 'NF && $1 ~ /%$/' | head -25 | sed 's/^/         /'
		# per transaction, from the last SCHED line (counts since start)
		grep SCHED "$d/server.log" | tail -1 | awk -v tx="${tx:-0}" '
			tx > 0 && match($0, /switches=[0-9]+\/[0-9]+\/[0-9]+ fsloads=[0-9]+/) {
				split(substr($0, RSTART, RLENGTH), f, /[=\/ ]/)
				t = match($0, /turns=[0-9]+/) ? sprintf(", turns %.3f", substr($0, RSTART + 6, RLENGTH - 6) / tx) : ""
				printf "         per transaction: switches G->G %.2f G->sched %.2f sched->G %.2f, FS loads %.2f%s\n",
					f[2] / tx, f[3] / tx, f[4] / tx, f[6] / tx, t }'
	done
done
