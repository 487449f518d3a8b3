#!/bin/bash
# rocksdb.sh - RocksDB's tools (Debian's rocksdb-tools): db_bench if it
# is there (fillrandom, then readrandom with 4 threads), and ldb: 100,000
# keys loaded with a 64 KB memtable and 256 KB files (many flushes and
# compactions on RocksDB's background threads), half of them rewritten,
# a manual compaction, `checkconsistency`, then the scan's md5, a few
# gets and the key count (the same on every good run).  Times on stderr.
# NOT RUN yet: the package was not on the machine in session 12.
set -u
ldb=$(command -v rocksdb_ldb || command -v ldb) || { echo "rocksdb ldb not installed"; exit 0; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
opts=(--db="$d/db" --write_buffer_size=65536 --file_size=262144)
# key%06d ==> value of key i, version v
gen() { awk -v n="$1" -v step="$2" -v v="$3" 'BEGIN { for (i = 0; i < n; i += step) printf "key%06d ==> v%d-%d-%s\n", i, v, i * 7919 % 100003, "weft" }'; }
gen 100000 1 1 | "$ldb" "${opts[@]}" --create_if_missing load
echo "load $?"
gen 100000 2 2 | "$ldb" "${opts[@]}" load
echo "reload $?"
"$ldb" "${opts[@]}" compact
echo "compact $?"
"$ldb" "${opts[@]}" checkconsistency
echo "checkconsistency $?"
"$ldb" "${opts[@]}" scan | md5sum | cut -c1-32
"$ldb" "${opts[@]}" scan | wc -l
for k in key000000 key000001 key054321 key099999; do "$ldb" "${opts[@]}" get "$k"; done
if command -v db_bench >/dev/null; then
	db_bench --db="$d/bench" --benchmarks=fillrandom --num=200000 --threads=1 --write_buffer_size=65536 \
		--max_background_jobs=4 --compression_type=none >"$d/fill" 2>&1
	echo "db_bench fillrandom $?"
	db_bench --db="$d/bench" --use_existing_db=1 --benchmarks=readrandom,verifychecksum --num=200000 \
		--reads=50000 --threads=4 --compression_type=none >"$d/read" 2>&1
	echo "db_bench readrandom $? $(grep -c 'found' "$d/read") found-lines"
	grep -h -E '^(fillrandom|readrandom)' "$d/fill" "$d/read" >&2
fi
