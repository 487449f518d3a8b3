#!/bin/sh
# runtests.sh SUITE... - run each Criterion suite, show its output, and
# close with one "N passed, N failed, N skipped" line summed over all
# suites, after a "skipped: suite::test ..." line naming them
# (tests/runner.h prints a "[SKIP] suite::test: why" line for each).
# A test that fails is run once more alone (its suite's --filter): one that
# passes then is counted as passed and named on a "flaky:" line (a failure
# that depends on what ran beside it is still a finding to explain, but not
# a broken build); one that fails again is named on the "failed:" line.
# Exit status 1 if any test failed or crashed or a suite did not finish.
pass=0 fail=0 bad=0 skipped="" failed="" flaky=""
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
	# Criterion's "Failing" counts the crashed ones too
	skipped="$skipped $(sed -n 's/^\[SKIP\] \([^ :]*::[^ :]*\).*/\1/p' "$log" | sort -u | tr '\n' ' ')"
	for name in $(sed -n 's/^\[FAIL\] \([^ :]*::[^ :]*\).*/\1/p' "$log" | sort -u); do
		echo "== $t: $name failed; once more, alone"
		# shellcheck disable=SC2086
		if env $ENV "$t" --jobs 1 --filter "$(echo "$name" | sed 's|::|/|')" >"$log.1" 2>&1 &&
		   grep -q 'Synthesis: Tested: 1 | Passing: 1 ' "$log.1"; then
			flaky="$flaky $name"
			p=$((p + 1))
			f=$((f - 1))
		else
			cat "$log.1"
			failed="$failed $name"
		fi
		rm -f "$log.1"
	done
	pass=$((pass + p))
	fail=$((fail + f))
	# a suite whose failures all passed alone exits non-zero: that is
	# counted above, not here
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && [ -z "$(grep "^\[FAIL\]" "$log")" ] && bad=1
done
[ -n "$flaky" ] && echo "flaky (failed beside the others, passed alone):$flaky"
[ -n "$failed" ] && echo "failed:$failed"
# shellcheck disable=SC2086
set -- $skipped
# the closing line stands alone, as CI's readers want it; the skipped
# tests are named on the line before
[ $# -gt 0 ] && echo "skipped: $*"
echo "$pass passed, $fail failed, $# skipped"
[ "$fail" -eq 0 ] && [ "$bad" -eq 0 ]
