#!/bin/bash
# nginx.sh - nginx (2 workers, a thread pool of 4 with "aio threads" and
# directio: file reads on the pool) serving a 1 MB file and a small one to
# ab (apache2-utils); then SIGQUIT (graceful stop).  Prints the file's
# md5 as served, requests completed and failed, the server's status (the
# same on every good run); requests per second and OS threads per worker
# on stderr.  RP_SRV: a launcher for the server alone.
set -u
command -v nginx >/dev/null || { echo "nginx not installed"; exit 0; }
d=$(mktemp -d)
port=$((18000 + RANDOM % 10000))
mkdir -p "$d/html" "$d/tmp"
head -c 1000000 /dev/zero | tr '\0' w >"$d/html/big.bin"
echo hello >"$d/html/index.html"
cat >"$d/nginx.conf" <<CONF
daemon off;
worker_processes 2;
error_log $d/error.log warn;
pid $d/nginx.pid;
thread_pool default threads=4 max_queue=65536;
events { worker_connections 4096; }
http {
	access_log off;
	sendfile off;
	aio threads;
	directio 4k;
	client_body_temp_path $d/tmp;
	proxy_temp_path $d/tmp;
	fastcgi_temp_path $d/tmp;
	uwsgi_temp_path $d/tmp;
	scgi_temp_path $d/tmp;
	server { listen 127.0.0.1:$port; root $d/html; }
}
CONF
${RP_SRV:-} nginx -c "$d/nginx.conf" -e "$d/error.log" &
s=$!
for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; kill -0 $s || exit 1; sleep 0.1; done
curl -s "http://127.0.0.1:$port/big.bin" | md5sum | cut -c1-32
for u in "-n 2000 -c 20 big.bin" "-k -n 20000 -c 50 index.html"; do
	set -- $u
	ab -q "${@:1:$#-1}" "http://127.0.0.1:$port/${!#}" >"$d/ab" 2>&1
	echo "ab $u: $(grep -E '^(Complete|Failed) req' "$d/ab" | tr -s ' ' | tr '\n' ' ')"
	echo "nginx ab $u: $(grep '^Requests per' "$d/ab" | tr -s ' ')" >&2
done
for p in $(pgrep -P $s); do echo "nginx worker $p: $(ls /proc/$p/task | wc -l) threads" >&2; done
kill -QUIT $s
wait $s
echo "status $?"
rm -rf "$d"
