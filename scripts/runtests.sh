#!/bin/sh
# runtests.sh SUITE... - run each Criterion suite, show its output, and
# close with one "N passed, N failed, N skipped" line summed over all
# suites, after a "skipped: suite::test ..." line naming them
# (tests/runner.h prints a "[SKIP] suite::test: why" line for each).
# Exit status 1 if any test failed or crashed or a suite did not finish.
pass=0 fail=0 bad=0 skipped=""
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "$@"; do
	echo "== $t"
	# shellcheck disable=SC2086
	env $ENV "$t" --jobs 2 >"$log" 2>&1
	rc=$?
	cat "$log"
	line=$(grep 'Synthesis: Tested:' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		echo "weft: $t did not finish (exit $rc)"
		bad=1
		continue
	fi
	p=$(echo "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
	f=$(echo "$line" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
	c=$(echo "$line" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
	skipped="$skipped $(sed -n 's/^\[SKIP\] \([^ :]*::[^ :]*\).*/\1/p' "$log" | sort -u | tr '\n' ' ')"
	pass=$((pass + p))
	fail=$((fail + f + c))
	[ "$rc" -ne 0 ] && bad=1
done
# shellcheck disable=SC2086
set -- $skipped
# the closing line stands alone, as CI's readers want it; the skipped
# tests are named on the line before
[ $# -gt 0 ] && echo "skipped: $*"
echo "$pass passed, $fail failed, $# skipped"
[ "$fail" -eq 0 ] && [ "$bad" -eq 0 ]
