#!/usr/bin/env bash
# apache_signals.sh -- graceful restart (SIGUSR1) and stop (SIGTERM) of
# Debian's apache2 (mpm_worker, 10 children x 100 threads, 127.0.0.1
# only), natively or under a launcher:
#
#   bench/apache_signals.sh                                   # natively
#   bench/apache_signals.sh build/bin/weft run --procs 2 --   # under weft
#
# Needs apache2, ab, curl (apt-get install -y apache2 apache2-utils curl bc)
# and root (the children run as www-data).  Loads it (ab, keep-alive),
# sends SIGUSR1 and prints the seconds until every old child is gone,
# loads it again, sends SIGTERM and prints the seconds until the parent
# has exited, then how often the error log says a child "still did not
# exit" (apache's own complaint when children ignore SIGTERM).
set -u
port=${PORT:-8089}
. "$(dirname "$0")/apache-lib.sh"
apache_setup "$port" 4096 'StartServers 10
ServerLimit 10
ThreadLimit 100
ThreadsPerChild 100
MinSpareThreads 100
MaxSpareThreads 1000
MaxRequestWorkers 1000
KeepAlive On'

up() {
	for _ in $(seq 100); do
		curl -s -o /dev/null "http://127.0.0.1:$port/" && return 0
		sleep 0.1
	done
	return 1
}
load() {
	ab -q -k -n 5000 -c 50 "http://127.0.0.1:$port/" 2>&1 |
		grep -E "Failed requests|Requests per second"
}

"$@" /usr/sbin/apache2 -f "$dir/httpd.conf" -DFOREGROUND &
launcher=$!
up || { echo "apache did not start"; exit 2; }
sleep 1
parent=$(cat "$dir/httpd.pid")
load
old=$(pgrep -P "$parent")
t0=$(date +%s.%N)
kill -USR1 "$parent"
while :; do
	left=0
	for c in $old; do kill -0 "$c" 2>/dev/null && left=$((left + 1)); done
	[ "$left" -eq 0 ] && break
	if (($(echo "$(date +%s.%N) - $t0 > 30" | bc))); then
		echo "graceful: $left old children still there after 30 s"
		break
	fi
	sleep 0.05
done
echo "graceful restart: $(echo "$(date +%s.%N) - $t0" | bc) s"
up
load
t0=$(date +%s.%N)
kill -TERM "$parent"
while kill -0 "$parent" 2>/dev/null; do
	if (($(echo "$(date +%s.%N) - $t0 > 30" | bc))); then
		echo "stop: still running after 30 s"
		kill -KILL "$parent"
		break
	fi
	sleep 0.05
done
echo "stop: $(echo "$(date +%s.%N) - $t0" | bc) s"
wait "$launcher" 2>/dev/null
echo "\"still did not exit\" in the log: $(grep -c "still did not exit" "$dir/error.log")"
