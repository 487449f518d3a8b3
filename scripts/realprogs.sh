#!/usr/bin/env bash
# scripts/realprogs.sh - real Debian programs natively and under weft run,
# output compared byte for byte (docs/preload.md, "Programs tried").
#
#   scripts/realprogs.sh [CASE...]     default: every case below
#   RP_PROCS="2 1"  RP_MB=200  RP_TIMEOUT=600  RP_DIR=/tmp/weft-rp
#
# Each case is a shell command run in RP_DIR (where the data files are):
# natively, then under "weft run --procs N" for each N in RP_PROCS.  Its
# stdout (usually a checksum) and exit status must be the native ones.
# One line per run: case, mode, status, seconds, same/DIFFERS; a
# differing stdout is kept in RP_DIR/CASE.MODE.out.  Exit status: the
# number of runs that differed.
#
# The servers and runtimes (java*, jshell, node-*, perl-threads, postgres,
# nginx, varnish, unbound, haproxy, varnishtest, rocksdb, mosquitto,
# ruby-threads, knot, erlang, sysbench) run programs and drivers from scripts/realprogs.d;
# each driver runs its server and its client, so the whole tree is under
# weft.  Their figures (tps, requests/s) go to the .err file; for a
# server alone under weft run a driver by hand with RP_SRV="weft run
# --procs 2 --" (node-http.sh, java-echo.sh, nginx.sh).  postgres needs
# root (the server runs as the postgres user); PG_SECS sets pgbench's
# length (default 20).
set -u
BUILD=${BUILD:-build}
weft=$(cd "$(dirname "$0")/.." && pwd)/$BUILD/bin/weft
[ -x "$weft" ] || { echo "realprogs: $weft not built"; exit 1; }
procs=${RP_PROCS:-2 1}
mb=${RP_MB:-200}
tmo=${RP_TIMEOUT:-600}
d=${RP_DIR:-/tmp/weft-rp}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$d"

# data: text (numbers and words, compressible) and a git clone of this repository
data() {
	[ -s "$d/text" ] || {
		seq 1 $((mb * 1024 * 1024 / 16)) | awk '{ print $1, $1 * 7919 % 1000003, "weft" }' |
			head -c $((mb * 1024 * 1024)) >"$d/text"
		shuf --random-source=<(yes) "$d/text" >"$d/shuf" 2>/dev/null || cp "$d/text" "$d/shuf"
	}
	[ -d "$d/repo" ] || git clone -q --no-local "$src" "$d/repo"
}

declare -A cmd
cmd[xz]='xz -T4 -3 -c text | tee text.xz | md5sum; xz -T4 -dc text.xz | md5sum'
cmd[zstd]='zstd -q -T4 -c text | tee text.zst | md5sum; zstd -q -T4 -dc text.zst | md5sum'
cmd[pigz]='pigz -p4 -c text | tee text.gz | md5sum; pigz -p4 -dc text.gz | md5sum'
cmd[pbzip2]='head -c 50000000 text | pbzip2 -p4 -c | tee text.bz2 | md5sum; pbzip2 -p4 -dc text.bz2 | md5sum'
cmd[sort]='sort --parallel=4 -S 64M -T . shuf | md5sum; sort --parallel=4 -n -k2 -S 200M shuf | md5sum'
cmd[git]='cd repo && git grep -n pthread_create | md5sum && git log --stat | md5sum &&
 git -c pack.threads=4 gc -q --aggressive && git fsck --no-progress 2>&1 | md5sum &&
 git rev-list --all --objects | git pack-objects --threads=4 -q --stdout | git index-pack --stdin -v 2>&1 | tail -1 | cut -c1-5'
cmd[make]='cd repo && make -s clean >/dev/null 2>&1; make -j4 -s build/lib/libweft.so build/bin/weft >/dev/null 2>&1; echo $?; md5sum build/obj/runtime/*.o | md5sum'
cmd[gcc-lto]='for i in $(seq 1 400); do echo "int f$i(int x){return x*$i;}"; done > lto.c;
 echo "int main(void){return f7(6) - 42;}" >> lto.c;
 gcc -O2 -flto=4 -flto-partition=max lto.c -o lto && ./lto; echo $?'
cmd[ld-gold]='cd repo && gcc -fuse-ld=gold -Wl,--threads -Wl,--thread-count=4 -shared -o ../gold.so build/obj/runtime/*.o build/obj/arch/*.o 2>&1 | head -3; echo $?'
cmd[python]='/usr/bin/python3 '"$src"'/tests/preload/realpy.py'
# servers and runtimes (scripts/realprogs.d: their programs and drivers)
rd=$src/scripts/realprogs.d
cmd[java]='java -version 2>&1 | head -1; rm -rf jt && javac -d jt '"$rd"'/Threads.java && java -cp jt Threads 10000'
cmd[java-echo]='rm -rf je && javac -d je '"$rd"'/Echo.java && '"$rd"'/java-echo.sh je 1000 100'
cmd[java-blocking]='rm -rf jb && javac -d jb '"$rd"'/Blocking.java && java -cp jb Blocking'
cmd[jshell]='printf "int x = 6 * 7;\nSystem.out.println(\"answer \" + x);\n/exit\n" | jshell -q 2>&1 | grep -ao "answer [0-9]*"'
cmd[node-pool]='node '"$rd"'/pool.js'
cmd[node-http]=''"$rd"'/node-http.sh 20000 50'
cmd[perl-threads]='perl '"$rd"'/threads.pl 32'
cmd[postgres]=''"$rd"'/pg.sh'
cmd[nginx]=''"$rd"'/nginx.sh'
cmd[varnish]=''"$rd"'/varnish.sh'
cmd[unbound]=''"$rd"'/unbound.sh'
cmd[haproxy]=''"$rd"'/haproxy.sh'
cmd[varnishtest]=''"$rd"'/varnishtest.sh'
cmd[rocksdb]=''"$rd"'/rocksdb.sh'
cmd[mosquitto]=''"$rd"'/mosquitto.sh'
cmd[ruby-threads]='ruby '"$rd"'/threads.rb'
cmd[sigpipe]='bash '"$rd"'/sigpipe.sh'
cmd[knot]=''"$rd"'/knot.sh'
cmd[sysbench]=''"$rd"'/sysbench.sh'
cmd[erlang]='command -v erlc >/dev/null || { echo "erlang not installed"; exit 0; }; cp '"$rd"'/Ring.erl . && erlc Ring.erl && erl +S 8:8 +SDio 16 +A 8 -noshell -s Ring main'

cases=${*:-xz zstd pigz pbzip2 sort git make gcc-lto ld-gold python java java-echo java-blocking jshell node-pool node-http perl-threads postgres nginx varnish unbound haproxy varnishtest rocksdb mosquitto ruby-threads sigpipe knot erlang sysbench}
# the data only for the cases that read it
for c in $cases; do
	case $c in xz | zstd | pigz | pbzip2 | sort | git | make | ld-gold) data; break ;; esac
done
bad=0
printf "%-13s %-8s %6s %8s %s\n" case mode status secs stdout
for c in $cases; do
	[ -n "${cmd[$c]:-}" ] || { echo "realprogs: no case $c"; bad=$((bad + 1)); continue; }
	for mode in native $procs; do
		pre=()
		[ "$mode" = native ] || pre=("$weft" run --procs "$mode" --)
		t0=$(date +%s.%N)
		(cd "$d" && timeout -k 10 "$tmo" "${pre[@]}" sh -c "${cmd[$c]}") >"$d/$c.$mode.out" 2>"$d/$c.$mode.err"
		st=$?
		t1=$(date +%s.%N)
		if [ "$mode" = native ]; then
			nst=$st
			same=native
		elif [ "$st" = "$nst" ] && cmp -s "$d/$c.native.out" "$d/$c.$mode.out"; then
			same=same
		else
			same=DIFFERS
			bad=$((bad + 1))
		fi
		printf "%-13s %-8s %6s %8.1f %s\n" "$c" "$mode" "$st" "$(echo "$t1 - $t0" | bc)" "$same"
	done
done
exit $bad
