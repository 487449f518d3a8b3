#!/bin/bash
# unbound.sh - the unbound DNS resolver (4 threads on one UDP and one TCP
# socket, libevent) serving 200 local-data names: dig over UDP and TCP,
# then 50,000 UDP queries with 100 in flight (dnsblast.py), then SIGTERM.
# Prints the answers, the count of right and wrong ones and the server's
# status (the same on every good run); queries per second and the
# server's OS threads on stderr.  RP_SRV: a launcher for unbound alone.
set -u
command -v unbound >/dev/null || { echo "unbound not installed"; exit 0; }
command -v dig >/dev/null || { echo "dig not installed"; exit 0; }
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d)
port=$((18000 + RANDOM % 10000))
{
	printf 'server:\n interface: 127.0.0.1\n port: %d\n num-threads: 4\n' "$port"
	printf ' do-daemonize: no\n use-syslog: no\n logfile: ""\n chroot: ""\n username: ""\n'
	printf ' directory: "%s"\n pidfile: "%s/u.pid"\n access-control: 127.0.0.0/8 allow\n' "$d" "$d"
	printf ' local-zone: "weft.test." static\n'
	for i in $(seq 1 200); do
		printf ' local-data: "h%d.weft.test. 60 IN A 10.0.%d.%d"\n' "$i" $((i / 256)) $((i % 256))
	done
} >"$d/u.conf"
${RP_SRV:-} unbound -d -c "$d/u.conf" >"$d/u.log" 2>&1 &
s=$!
for _ in $(seq 600); do
	[ -n "$(dig @127.0.0.1 -p "$port" +short +time=1 +tries=1 h1.weft.test 2>/dev/null)" ] && break
	kill -0 $s || exit 1
	sleep 0.1
done
dig @127.0.0.1 -p "$port" +short h7.weft.test
dig @127.0.0.1 -p "$port" +tcp +short h200.weft.test
python3 "$here/dnsblast.py" 50000 100 "$port" 2>"$d/qps"
echo "unbound: $(cat "$d/qps"), $(ls /proc/$s/task | wc -l) threads" >&2
kill -TERM $s
wait $s
echo "status $?"
rm -rf "$d"
