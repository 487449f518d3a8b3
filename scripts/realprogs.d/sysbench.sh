#!/bin/bash
# sysbench.sh - sysbench's own workloads (LuaJIT, a pthread per worker):
# threads (64 threads yielding and taking 4 mutexes, 20,000 events),
# mutex (32 threads, 20,000 locks each of 64 mutexes), memory (8 threads,
# 2 GiB), fileio (16 threads, random reads and writes with an fsync every
# 100 requests, 100,000 events on 8 files of 8 MiB).  Prints each test's
# event count (fixed by its options); its time on stderr.
set -u
command -v sysbench >/dev/null || { echo "sysbench not installed"; exit 0; }
run() { # name, options
	local n=$1
	shift
	local o
	o=$(sysbench "$@" --time=0 run 2>&1)
	echo "$n: $(echo "$o" | grep -oE 'total number of events: +[0-9]+' | tr -s ' ')"
	echo "sysbench $n: $(echo "$o" | grep -oE 'total time: +[0-9.]+s' | tr -s ' ')" >&2
}
run threads threads --threads=64 --thread-yields=200 --thread-locks=4 --events=20000
run mutex mutex --threads=32 --mutex-num=64 --mutex-locks=20000
run memory memory --threads=8 --memory-total-size=2G
fio="fileio --threads=16 --file-test-mode=rndrw --file-total-size=64M --file-num=8"
sysbench $fio prepare >/dev/null 2>&1
run fileio $fio --events=100000
sysbench $fio cleanup >/dev/null 2>&1
