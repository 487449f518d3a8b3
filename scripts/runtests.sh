#!/bin/sh
# runtests.sh SUITE... - run each Criterion suite, show its output, and
# close with one "N passed, N failed, N skipped" line summed over all
# suites (a test skipped because something it needs is missing is named
# with its reason, never silent).
# Exit status 1 if any test failed or crashed or a suite did not finish.
pass=0 fail=0 skip=0 bad=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "$@"; do
	echo "== $t"
	# shellcheck disable=SC2086
	env $ENV "$t" --jobs 2 --verbose >"$log" 2>&1
	rc=$?
	grep -v '^\[\(RUN \|PASS\)\]' "$log"
	skip=$((skip + $(grep -c '^\[SKIP\]' "$log")))
	line=$(grep 'Synthesis: Tested:' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		echo "weft: $t did not finish (exit $rc)"
		bad=1
		continue
	fi
	p=$(echo "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
	f=$(echo "$line" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
	c=$(echo "$line" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
	pass=$((pass + p))
	fail=$((fail + f + c))
	[ "$rc" -ne 0 ] && bad=1
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$bad" -eq 0 ]
