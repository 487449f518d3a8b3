#!/bin/bash
# varnishtest.sh - Varnish's own test driver on the .vtc files in
# realprogs.d/vtc (two at once, -j 2): varnishtest makes a thread per
# fake client and server, starts varnishd (its manager, the cache child,
# cc for each VCL) and checks answers and counters.  Prints varnishtest's
# report without its times (nothing when every test passes with -q) and
# its status.
set -u
command -v varnishtest >/dev/null || { echo "varnishtest not installed"; exit 0; }
here=$(cd "$(dirname "$0")" && pwd)
varnishtest -q -j 2 -t 600 "$here"/vtc/*.vtc >"${TMPDIR:-/tmp}/vt.$$" 2>&1
st=$?
sed 's/([0-9.]*)$//' "${TMPDIR:-/tmp}/vt.$$"
rm -f "${TMPDIR:-/tmp}/vt.$$"
echo "status $st"
