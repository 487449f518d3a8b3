#!/bin/sh
# run.sh - check tools/weft-gdb.py: debug tests/gdb/prog.c (built by
# make as PROG, and with -fsplit-stack as PROG-SPLIT) with gdb in batch
# mode, live and from a core file, and check what info weft and weft bt
# print.  Exit 0 passed, 1 failed, 77 skipped (no gdb, or no ptrace).
#
#   tests/gdb/run.sh build/tests/gdb_prog [build/tests/gdb_prog_split]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$here/../..
prog=$1
split=${2:-}
if ! command -v gdb >/dev/null 2>&1; then
	echo "run.sh: gdb not installed: skipped"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # file regex what
	if ! grep -E -q -- "$2" "$1"; then
		echo "run.sh: $(basename "$1"): no match for /$2/ ($3)"
		fail=1
	fi
}
gdbrun() { # out args...
	out=$1
	shift
	WEFT_MAXPROCS=2 timeout 120 gdb -batch -nx -ex "source $top/tools/weft-gdb.py" "$@" \
		>"$out" 2>&1
}

# live process: the Gs of prog.c, then a core file of it
gdbrun "$tmp/live" -x "$here/weft.gdb" -ex "gcore $tmp/core" --args "$prog"
if grep -q -E "ptrace: Operation not permitted|Could not trace the inferior" "$tmp/live"; then
	echo "run.sh: gdb may not trace processes here: skipped"
	exit 77
fi
l=$tmp/live
check "$l" '^ +1 +running +M[0-9]+ \(LWP [0-9]+\)' "the main G runs on an M"
check "$l" '^ +[0-9]+ +waiting +chan receive +receiver +gdb_receiver_func$' "receiver"
check "$l" '^ +[0-9]+ +waiting +sleep +sleeper +weft_sleep$' "sleeper (tail call)"
check "$l" '^ +[0-9]+ +waiting +mutex +locker +gdb_locker_func$' "locker"
check "$l" '^ +[0-9]+ +running +spinner +M[0-9]+ \(LWP [0-9]+\)' "spinner runs"
check "$l" '^5 green threads' "count"
check "$l" '^green thread [0-9]+ \[waiting\]:' "weft bt header"
check "$l" '#[0-9]+ .*weft_chan_recv \(' "receiver bt: the runtime call"
check "$l" '#[0-9]+ .*gdb_receiver_func \(.*tests/gdb/prog.c:[0-9]+' "receiver bt: its function, file and line"
check "$l" '#[0-9]+ .*gentry \(' "receiver bt: down to gentry"
check "$l" '#[0-9]+ .*weft_sleep \(' "sleeper bt"
check "$l" '^green thread [0-9]+ is running on M[0-9]+ \(LWP [0-9]+\):' "spinner: running"
check "$l" '#0 +(0x[0-9a-f]+ in )?gdb_spinner_func \(' "spinner bt: its thread's"
# registers put back: the stopped thread's own backtrace is intact
sed -n '/^== own bt/,$p' "$l" >"$tmp/own"
check "$tmp/own" '^#0 +gdb_ready \(' "registers restored after weft bt"

# the core file: no registers to borrow, the frame-pointer walk instead
if [ -s "$tmp/core" ]; then
	gdbrun "$tmp/corerun" -ex "info weft" \
		-ex 'python gdb.execute("weft bt %d" % int(gdb.parse_and_eval("receiver_id")))' \
		"$prog" "$tmp/core"
	c=$tmp/corerun
	check "$c" '^ +[0-9]+ +waiting +chan receive +receiver +gdb_receiver_func$' "core: info weft"
	check "$c" '^#[0-9]+ +0x[0-9a-f]+ in weft_chan_recv \(\) at .*chan.c:[0-9]+' "core: bt runtime"
	check "$c" '^#[0-9]+ +0x[0-9a-f]+ in gdb_receiver_func \(\) at .*prog.c:[0-9]+' "core: bt user"
else
	echo "run.sh: gcore wrote no core file"
	fail=1
fi

# a segmented G parked 100 frames deep, across several segments
if [ -n "$split" ]; then
	PROG_DEEP=100 gdbrun "$tmp/split" -x "$here/weft.gdb" --args "$split"
	s=$tmp/split
	check "$s" '^ +[0-9]+ +waiting +chan receive +deep +gdb_park_deep \[segmented\]$' "split: info weft"
	sed -n '/^== bt deep/,/^== own bt/p' "$s" >"$tmp/deep"
	check "$tmp/deep" 'in __morestack \(\)' "split: bt crosses segments"
	check "$tmp/deep" 'gdb_deep_func \(depth=0\)|gdb_park_deep' "split: bt from the bottom"
	n=$(grep -c 'gdb_deep_func (' "$tmp/deep")
	if [ "$n" -lt 101 ]; then
		echo "run.sh: split: $n gdb_deep_func frames, want 101"
		fail=1
	fi
	check "$tmp/deep" '#[0-9]+ .*gentry \(' "split: bt down to gentry"
fi

if [ $fail != 0 ]; then
	echo "run.sh: FAILED; gdb said:"
	cat "$tmp/live"
	[ -n "$split" ] && cat "$tmp/split"
	exit 1
fi
echo "run.sh: tools/weft-gdb.py: all checks passed"
exit 0
