#!/bin/bash
# mosquitto.sh - the mosquitto MQTT broker (an event loop) and its
# clients (libmosquitto: mosquitto_pub -l reads stdin on main while a
# network thread of mosquitto_loop_start sends): 4 publishers x 5,000
# lines at QoS 1 and 1 x 2,000 at QoS 2 to one subscriber (-C: it exits
# after the count), a retained message read by a late subscriber, then
# SIGTERM.  Prints the subscriber's count and the sorted payloads' md5,
# the retained payload, the broker's status (the same on every good
# run).  NOT RUN yet: the package was not on the machine in session 12.
set -u
command -v mosquitto >/dev/null || { echo "mosquitto not installed"; exit 0; }
command -v mosquitto_pub >/dev/null || { echo "mosquitto clients not installed"; exit 0; }
d=$(mktemp -d)
port=$((18000 + RANDOM % 10000))
{
	printf 'listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n' "$port"
	printf 'log_dest file %s/m.log\n' "$d"
	for t in error warning notice information subscribe; do echo "log_type $t"; done
} >"$d/m.conf"
${RP_SRV:-} mosquitto -c "$d/m.conf" >"$d/m.out" 2>&1 &
s=$!
for _ in $(seq 600); do mosquitto_pub -p "$port" -h 127.0.0.1 -t ping -m x 2>/dev/null && break; kill -0 $s || exit 1; sleep 0.1; done
n=5000
mosquitto_sub -p "$port" -h 127.0.0.1 -q 2 -t 'w/#' -C $((4 * n + 2000)) -W 600 -v >"$d/sub" &
sub=$!
# the subscriber is in once the broker logs its subscription (log_type subscribe)
for _ in $(seq 600); do grep -q ' w/#' "$d/m.log" 2>/dev/null && break; sleep 0.1; done
pubs=()
for i in 1 2 3 4; do
	seq 1 $n | sed "s/^/p$i-/" | mosquitto_pub -p "$port" -h 127.0.0.1 -q 1 -t "w/$i" -l &
	pubs+=($!)
done
seq 1 2000 | sed 's/^/q2-/' | mosquitto_pub -p "$port" -h 127.0.0.1 -q 2 -t w/q2 -l
echo "pub q2 $?"
for p in "${pubs[@]}"; do wait "$p"; echo "pub $?"; done
wait $sub
echo "sub $? $(wc -l <"$d/sub") messages $(sort "$d/sub" | md5sum | cut -c1-32)"
mosquitto_pub -p "$port" -h 127.0.0.1 -q 1 -t r/1 -r -m retained-weft
mosquitto_sub -p "$port" -h 127.0.0.1 -t r/1 -C 1 -W 60
kill -TERM $s
wait $s
echo "status $?"
rm -rf "$d"
