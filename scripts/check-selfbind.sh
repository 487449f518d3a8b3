#!/bin/sh
# check-selfbind.sh LIB... - list every dynamic relocation of each shared
# object against a function the object defines itself: a call of its own
# that ld.so would bind with a symbol lookup at every load.  The Makefile
# links with -Bsymbolic-functions so that there is none (docs/design.md,
# "Building"); data symbols are not counted (they stay interposable).
# Prints "LIB: SYMBOL" per relocation; exit 1 if any.  tests/test_link.c
# runs it on the libraries weft builds.
set -eu
export LC_ALL=C
bad=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for lib in "$@"; do
	[ -f "$lib" ] || { echo "$lib: no such file"; bad=1; continue; }
	# the functions it defines (nm's T, W and i: text, weak, ifunc)
	nm -D --defined-only "$lib" | awk '$2 ~ /^[TWi]$/ { sub(/@.*/, "", $3); print $3 }' |
		sort -u >"$tmp/funcs"
	# the symbols its dynamic relocations name (not the relative ones)
	readelf -r -W "$lib" | awk 'NF >= 5 && $3 ~ /^R_/ && $3 !~ /RELATIVE/ {
		sub(/@.*/, "", $5); print $5 }' | sort -u >"$tmp/relocs"
	for s in $(comm -12 "$tmp/funcs" "$tmp/relocs"); do
		echo "$lib: $s"
		bad=1
	done
done
exit $bad
