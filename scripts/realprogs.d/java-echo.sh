#!/bin/sh
# java-echo.sh CLASSDIR [CONNS] [MSGS] - Echo.java's server, its client
# (CONNS threads x MSGS messages), a SIGQUIT thread dump of the server
# (it must go on serving), then SIGTERM.  Prints the clients' lines,
# whether the dump came, and the server's status (143: SIGTERM).
set -u
cd "$1" || exit 1
n=${2:-1000}
m=${3:-100}
${RP_SRV:-} java -cp . Echo server 0 >srv.out 2>srv.err &
s=$!
i=0
until grep -q listening srv.out 2>/dev/null; do
	kill -0 $s 2>/dev/null || { echo "server did not start"; exit 1; }
	sleep 0.1
done
port=$(sed -n "s/^listening //p" srv.out)
java -cp . Echo client $port "$n" "$m"
kill -QUIT $s
i=0
until grep -q '^"Reference Handler"' srv.out; do
	i=$((i + 1)); [ $i -lt 600 ] || break
	sleep 0.1
done
grep -q '^Full thread dump' srv.out && echo "thread dump yes" || echo "thread dump no"
java -cp . Echo client $port 10 10
kill $s
wait $s
echo "server status $?"
