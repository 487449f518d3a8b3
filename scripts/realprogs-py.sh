#!/usr/bin/env bash
# scripts/realprogs-py.sh - CPython's own test modules (Debian's
# libpython3.11-testsuite) natively and under weft run, one module at a
# time: every test case that passes natively and fails, errors or hangs
# under weft is printed (docs/preload.md, "Programs tried").
#
#   scripts/realprogs-py.sh [MODULE...]   default: the thread/IO-heavy list below
#   RP_PROCS="2 1"  RP_TIMEOUT=900  RP_DIR=/tmp/weft-rp-py  PY=/usr/bin/python3  RP_USE=network (regrtest -u)
#   WEFT=path/to/weft (default: $BUILD/bin/weft; a copy keeps a run apart from rebuilds)
#   RP_MATCH="-m pattern ..." (regrtest selection, e.g. a subset of a big module)
#
# One line per run: module, mode, exit status, seconds, and the counts of
# test cases ok / FAIL / ERROR / skipped (from unittest's -v lines); then
# the cases whose result differs from the native run.
set -u
BUILD=${BUILD:-build}
weft=${WEFT:-$(cd "$(dirname "$0")/.." && pwd)/$BUILD/bin/weft}
[ -x "$weft" ] || { echo "realprogs-py: $weft not built"; exit 1; }
py=${PY:-/usr/bin/python3}
"$py" -c 'import test.support' 2>/dev/null || { echo "realprogs-py: skipped (apt-get install libpython3.11-testsuite)"; exit 0; }
procs=${RP_PROCS:-2 1}
tmo=${RP_TIMEOUT:-900}
d=${RP_DIR:-/tmp/weft-rp-py}
mkdir -p "$d"
mods=${*:-test_threading test_thread test_threadsignals test_socket test_selectors test_subprocess
	test_signal test_select test_poll test_epoll test_os test_io test_fileio test_queue
	test_concurrent_futures test_socketserver test_ssl test_time test_fork1 test_wait3 test_wait4}

# result lines of unittest -v: "test_x (mod.Class.test_x) ... ok" -> "mod.Class.test_x ok"
# (also "... 0.52s ok": a test's own time printed before its verdict);
# a case whose line the test's own output broke ("... <a warning>" then "ok"
# alone on a later line) takes the next verdict line that stands alone; the
# closing "ERROR: test_x (mod.Class.test_x)" / "FAIL: ..." lines count too
# and win over "ok"
results() {
	awk '
	function verdict(v) {
		sub(/^[0-9]+\.[0-9]+s /, "", v) # test_concurrent_futures prints its time first
		if (v ~ /^(ok|FAIL|ERROR)$/) return v
		if (v ~ /^skipped/) return "skipped"
		if (v ~ /^expected failure/) return "xfail"
		if (v ~ /^unexpected success/) return "usuccess"
		return ""
	}
	function put(k, v) { if (!(k in r) || v == "FAIL" || v == "ERROR") r[k] = v }
	match($0, /^[a-zA-Z_0-9]+ \([^)]*\)/) && index($0, " ... ") {
		k = substr($0, RSTART, RLENGTH); sub(/^[^(]*\(/, "", k); sub(/\)$/, "", k)
		v = verdict(substr($0, index($0, " ... ") + 5))
		if (v != "") { put(k, v); pending = "" } else pending = k
		next
	}
	/^(ERROR|FAIL): [a-zA-Z_0-9]+ \([^)]*\)/ {
		k = $0; sub(/^[^(]*\(/, "", k); sub(/\).*/, "", k); put(k, $1 == "ERROR:" ? "ERROR" : "FAIL"); next
	}
	pending != "" && verdict($0) != "" && $0 !~ / / || pending != "" && $0 ~ /^(skipped|expected failure|unexpected success)/ {
		put(pending, verdict($0)); pending = ""
	}
	END { for (k in r) print k, r[k] }' "$1" | sort
}

bad=0
printf "%-26s %-6s %4s %7s %5s %4s %5s %5s\n" module mode rc secs ok FAIL ERROR skip
for m in $mods; do
	for mode in native $procs; do
		pre=()
		[ "$mode" = native ] || pre=("$weft" run --procs "$mode" --)
		t0=$(date +%s.%N)
		(cd "$d" && timeout -k 10 "$tmo" "${pre[@]}" "$py" -m test -v -u "${RP_USE:-network}" --timeout $((tmo - 30)) ${RP_MATCH:-} "$m") \
			>"$d/$m.$mode.log" 2>&1
		st=$?
		t1=$(date +%s.%N)
		results "$d/$m.$mode.log" >"$d/$m.$mode.res"
		printf "%-26s %-6s %4s %7.1f %5s %4s %5s %5s\n" "$m" "$mode" "$st" "$(echo "$t1 - $t0" | bc)" \
			"$(grep -c ' ok$' "$d/$m.$mode.res")" "$(grep -c ' FAIL$' "$d/$m.$mode.res")" \
			"$(grep -c ' ERROR$' "$d/$m.$mode.res")" "$(grep -c ' skipped$' "$d/$m.$mode.res")"
		if [ "$mode" != native ]; then
			# passed natively, not ok under weft (or missing: the run died or hung there)
			join <(grep ' ok$' "$d/$m.native.res" | cut -d' ' -f1) <(sort "$d/$m.$mode.res") -a1 |
				awk -v m="$mode" '$2 != "ok" { print "   procs " m ": " $1 " " ($2 == "" ? "NOT RUN" : $2) }' |
				tee -a "$d/findings" | head -20
			[ "$st" = 0 ] || [ "$(cat "$d/$m.native.rc")" != 0 ] || bad=$((bad + 1))
		else
			echo "$st" >"$d/$m.native.rc"
		fi
	done
done
exit $bad
