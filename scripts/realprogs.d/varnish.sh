#!/bin/bash
# varnish.sh - varnishd 7 (a manager and a cache child; worker threads
# from pools, one per session in progress; it compiles its VCL with cc
# and dlopens it) in front of a python3 http.server backend, driven by ab
# (apache2-utils): a 200 KB file through the cache, without and with
# keep-alive; then SIGTERM.  Prints the file's md5 as served (a miss, then
# a hit), requests completed and failed, the manager's status (the same on
# every good run); requests per second and the cache child's OS threads on
# stderr.  RP_SRV: a launcher for varnishd alone.
set -u
command -v varnishd >/dev/null || { echo "varnishd not installed"; exit 0; }
d=$(mktemp -d)
port=$((18000 + RANDOM % 10000))
bport=$((port + 1))
mkdir -p "$d/www"
seq 1 40000 | head -c 200000 >"$d/www/f.txt"
(cd "$d/www" && exec python3 -m http.server "$bport" --bind 127.0.0.1 >/dev/null 2>&1) &
b=$!
for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$bport/f.txt" && break; sleep 0.1; done
${RP_SRV:-} varnishd -F -a "127.0.0.1:$port" -b "127.0.0.1:$bport" -n "$d/inst" -s malloc,64m \
	>"$d/varnish.log" 2>&1 &
s=$!
for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$port/f.txt" && break; kill -0 $s || exit 1; sleep 0.1; done
curl -s "http://127.0.0.1:$port/f.txt" | md5sum | cut -c1-32
curl -s "http://127.0.0.1:$port/f.txt" | md5sum | cut -c1-32
for u in "-n 5000 -c 50 f.txt" "-k -n 20000 -c 100 f.txt"; do
	set -- $u
	ab -q "${@:1:$#-1}" "http://127.0.0.1:$port/${!#}" >"$d/ab" 2>&1
	echo "ab $u: $(grep -E '^(Complete|Failed) req' "$d/ab" | tr -s ' ' | tr '\n' ' ')"
	echo "varnish ab $u: $(grep '^Requests per' "$d/ab" | tr -s ' ')" >&2
done
for p in $(pgrep -P $s); do echo "varnish child $p: $(ls /proc/$p/task | wc -l) threads" >&2; done
kill -TERM $s
wait $s
echo "status $?"
kill $b
wait $b 2>/dev/null
rm -rf "$d"
