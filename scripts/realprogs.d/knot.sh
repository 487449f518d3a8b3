#!/bin/bash
# knot.sh - the Knot DNS authoritative server (knotd: 4 UDP, 4 TCP and 2
# background workers, liburcu) serving a zone of 1,000 records: kdig over
# UDP and TCP, dnsperf 50,000 UDP queries (20 clients, at most 20,000 a
# second) and 50,000 over TCP (50 clients), knotc zone-status and
# zone-reload over the control socket, knotc stop.  Prints the answers,
# the queries completed, lost and NOERROR, and the server's status (the
# same on every good run); queries per second and the server's OS
# threads on stderr.  RP_SRV: a launcher for knotd alone.
set -u
command -v knotd >/dev/null || { echo "knotd not installed"; exit 0; }
command -v dnsperf >/dev/null || { echo "dnsperf not installed"; exit 0; }
d=$(mktemp -d)
port=$((18000 + RANDOM % 10000))
{
	echo '$ORIGIN weft.test.'
	echo '$TTL 300'
	echo '@ SOA ns hostmaster 1 3600 600 86400 300'
	echo '@ NS ns'
	echo 'ns A 127.0.0.1'
	for i in $(seq 1 500); do
		echo "h$i A 10.0.$((i / 256)).$((i % 256))"
		echo "h$i TXT \"host $i\""
	done
} >"$d/weft.test.zone"
for i in $(seq 1 500); do echo "h$i.weft.test A"; echo "h$i.weft.test TXT"; done >"$d/q.txt"
mkdir "$d/db"
cat >"$d/knot.conf" <<CONF
server:
    listen: 127.0.0.1@$port
    rundir: $d
    udp-workers: 4
    tcp-workers: 4
    background-workers: 2
database:
    storage: $d/db
log:
  - target: stderr
    any: info
zone:
  - domain: weft.test
    file: $d/weft.test.zone
CONF
${RP_SRV:-} knotd -c "$d/knot.conf" >"$d/k.log" 2>&1 &
s=$!
for _ in $(seq 600); do
	[ -n "$(kdig @127.0.0.1 -p "$port" +short +time=1 +retry=0 ns.weft.test 2>/dev/null)" ] && break
	kill -0 $s || exit 1
	sleep 0.1
done
kdig @127.0.0.1 -p "$port" +short h7.weft.test A
kdig @127.0.0.1 -p "$port" +tcp +short h9.weft.test TXT
perf() { # $1: udp or tcp
	local o
	o=$(dnsperf -s 127.0.0.1 -p "$port" -m "$1" -d "$d/q.txt" -n 50 -c "$2" ${3:+-Q $3} 2>&1)
	echo "$1: $(echo "$o" | grep -oE 'Queries (completed|lost): +[0-9]+|NOERROR [0-9]+' | tr -s ' ' | tr '\n' ' ')"
	echo "knot $1: $(echo "$o" | grep -oE 'Queries per second: +[0-9.]+' | tr -s ' ')" >&2
}
perf udp 20 20000
perf tcp 50
knotc -s "$d/knot.sock" zone-status weft.test | grep -oE 'role: [a-z]+ \| serial: [0-9]+'
knotc -s "$d/knot.sock" zone-reload weft.test
echo "knot: $(ls /proc/$s/task | wc -l) threads" >&2
knotc -s "$d/knot.sock" stop
wait $s
echo "status $?"
grep -iE 'error|warning' "$d/k.log" | sed "s/^[^ ]* //; s|$d|DIR|g" | sort | uniq -c
rm -rf "$d"
