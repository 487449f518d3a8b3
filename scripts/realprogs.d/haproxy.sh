#!/bin/bash
# haproxy.sh - haproxy 2.6 in master-worker mode (-W: a master process
# that forks the worker and re-executes itself on SIGUSR2), the worker
# with `nbthread 4` (an epoll loop per thread, and thread_isolate's
# spinning rendezvous for the runtime API), in front of a python3
# http.server backend, driven by ab (apache2-utils): a 200 KB file
# through the proxy (md5 as served, ab -n 2000 -c 20), a small answer
# the proxy makes itself (ab -k -n 20000 -c 50); the runtime API on the
# stats socket (`show info`'s thread count, the frontend's request and
# 2xx counters, `show threads`' thread count, `set maxconn global`, a
# server added, used and deleted); a
# reload (SIGUSR2 to the master: it re-executes itself and forks a new
# worker, the old one finishes) and ab -k -n 5000 -c 20 on the new
# worker; then SIGUSR1 (soft stop: the workers leave, then the master).
# Prints what is the same on every good run; requests per second and
# the worker's OS threads on stderr.  RP_SRV: a launcher for haproxy
# alone.
set -u
command -v haproxy >/dev/null || { echo "haproxy not installed"; exit 0; }
command -v socat >/dev/null || { echo "socat not installed"; exit 0; }
d=$(mktemp -d)
port=$((18000 + RANDOM % 10000))
bport=$((port + 1))
mkdir -p "$d/www"
seq 1 40000 | head -c 200000 >"$d/www/f.txt"
(cd "$d/www" && exec python3 -m http.server "$bport" --bind 127.0.0.1 >/dev/null 2>&1) &
b=$!
s=
bye() {
	[ -n "$s" ] && kill -KILL "$s" 2>/dev/null
	kill "$b" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$d"
	exit "${1:-1}"
}
for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$bport/f.txt" && break; sleep 0.1; done
cat >"$d/h.cfg" <<CFG
global
	nbthread 4
	stats socket $d/stats.sock mode 600 level admin expose-fd listeners
	maxconn 2000
defaults
	mode http
	timeout connect 10s
	timeout client 60s
	timeout server 60s
frontend fe
	bind 127.0.0.1:$port
	http-request return status 200 content-type text/plain string "hello from haproxy" if { path /hello }
	default_backend be
backend be
	balance roundrobin
	server s1 127.0.0.1:$bport
CFG
# api CMD: one runtime API command on the worker's stats socket
api() { echo "$1" | socat -t 30 - "UNIX-CONNECT:$d/stats.sock"; }
# worker: the pid the worker's `show info` gives ("" until it answers)
worker() { api "show info" 2>/dev/null | sed -n 's/^Pid: //p'; }
${RP_SRV:-} haproxy -W -f "$d/h.cfg" >"$d/haproxy.log" 2>&1 &
s=$!
for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$port/hello" && break; kill -0 $s || bye; sleep 0.1; done
curl -s "http://127.0.0.1:$port/f.txt" | md5sum | cut -c1-32
curl -s "http://127.0.0.1:$port/hello"
echo
for u in "-n 2000 -c 20 f.txt" "-k -n 20000 -c 50 hello"; do
	set -- $u
	ab -q "${@:1:$#-1}" "http://127.0.0.1:$port/${!#}" >"$d/ab" 2>&1
	echo "ab $u: $(grep -E '^(Complete|Failed) req' "$d/ab" | tr -s ' ' | tr '\n' ' ')"
	echo "haproxy ab $u: $(grep '^Requests per' "$d/ab" | tr -s ' ')" >&2
done
w1=$(worker)
[ -n "$w1" ] || { echo "no worker pid"; bye; }
echo "worker threads (show info): $(api "show info" | sed -n 's/^Nbthread: //p')"
# fe: the frontend's 2xx answers, the column found by name in show
# stat's CSV header (not its sessions, which ab -k's reconnections make
# vary natively too, nor req_tot: 22,005 against 22,003 once on 1 P,
# every answer right - see docs/preload.md, session 12)
fe() {
	api "show stat" | awk -F, 'NR == 1 { sub(/^# /, ""); for (i = 1; i <= NF; i++) c[$i] = i; next }
		$1 == "fe" && $2 == "FRONTEND" { print "'"$1"'fe 2xx answers", $c["hrsp_2xx"] }'
}
fe ""
echo "show threads: $(api "show threads" | grep -c -E '^[ >*]*Thread +[0-9]')"
api "set maxconn global 1500"
# a server added and deleted at run time (both under thread_isolate: the
# other threads stop at a rendezvous), s1 in maintenance meanwhile
api "add server be/s2 127.0.0.1:$bport"
api "enable server be/s2"
api "disable server be/s1"
echo "via s2: $(curl -s "http://127.0.0.1:$port/f.txt" | md5sum | cut -c1-32)"
api "enable server be/s1"
api "disable server be/s2"
api "shutdown sessions server be/s2"
api "del server be/s2"
echo "maxconn now: $(api "show info" | sed -n 's/^Maxconn: //p')"
echo "haproxy worker $w1: $(ls /proc/$w1/task | wc -l) threads" >&2
# reload: a new worker (a new pid) answers on the same socket path
kill -USR2 $s
w2=$w1
for _ in $(seq 600); do
	w2=$(worker)
	[ -n "$w2" ] && [ "$w2" != "$w1" ] && break
	kill -0 $s || bye
	sleep 0.1
done
[ "$w2" != "$w1" ] && echo "reloaded: a new worker" || echo "reload: no new worker"
curl -s "http://127.0.0.1:$port/hello"
echo
ab -q -k -n 5000 -c 20 "http://127.0.0.1:$port/hello" >"$d/ab" 2>&1
echo "ab after reload: $(grep -E '^(Complete|Failed) req' "$d/ab" | tr -s ' ' | tr '\n' ' ')"
echo "haproxy ab after reload: $(grep '^Requests per' "$d/ab" | tr -s ' ')" >&2
fe "new worker: "
kill -USR1 $s
wait $s
echo "status $?"
s=
grep -i -E 'alert|emerg' "$d/haproxy.log" | sed 's/^\[[^]]*\] *//; s/([0-9]*)//g' | sort | uniq -c >&2
bye 0
