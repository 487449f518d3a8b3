#!/bin/sh
# node-http.sh [REQUESTS] [CONCURRENCY] - http.js served by node, loaded
# by ab (apache2-utils) without and with keep-alive (RP_SRV: a launcher for
# the server alone, e.g. "weft run --procs 2 --"); prints the requests
# completed and failed (the same on every good run), requests per second
# on stderr.
set -u
n=${1:-20000}
c=${2:-50}
out=$(mktemp)
${RP_SRV:-} node "$(dirname "$0")/http.js" 0 >"$out" &
s=$!
i=0
until grep -q listening "$out" 2>/dev/null; do
	kill -0 $s 2>/dev/null || { echo "server did not start"; exit 1; }
	sleep 0.1
done
port=$(sed -n "s/^listening //p" "$out")
for k in "" -k; do
	ab -q $k -n "$n" -c "$c" "http://127.0.0.1:$port/" >"$out.ab" 2>&1
	echo "ab$k $? $(grep -E '^(Complete|Failed) requests' "$out.ab" | tr -s ' ' | tr '\n' ' ')"
	echo "node-http ab$k: $(grep '^Requests per second' "$out.ab")" >&2
done
kill $s
wait $s
echo "server status $?"
rm -f "$out" "$out.ab"
