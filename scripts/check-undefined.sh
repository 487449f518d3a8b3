#!/bin/sh
# check-undefined.sh LIB... - list every undefined dynamic symbol of each
# shared object that none of the libraries it declares NEEDED defines (nor
# ld.so, which libc relies on).  Prints "LIB: SYMBOL" per symbol; exit 1 if
# any.  Weak references are allowed to stay undefined.  tests/test_link.c
# runs it on the libraries weft builds (issue 11: never again a run-time
# "symbol lookup error").
set -eu
bad=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for lib in "$@"; do
	[ -f "$lib" ] || { echo "$lib: no such file"; bad=1; continue; }
	: >"$tmp/defined"
	# NEEDED names, resolved to paths as the dynamic linker would (ldd),
	# plus the dynamic linker itself
	needed=$(objdump -p "$lib" | awk '$1 == "NEEDED" { print $2 }')
	ldd "$lib" >"$tmp/ldd"
	for n in $needed; do
		p=$(awk -v n="$n" '$1 == n && $3 ~ /^\// { print $3 }
			$1 ~ "/" n "$" { print $1 }' "$tmp/ldd" | head -n 1)
		[ -n "$p" ] || { echo "$lib: NEEDED $n not found"; bad=1; continue; }
		nm -D --defined-only "$p" >>"$tmp/defined"
	done
	interp=$(awk '$1 ~ /ld-linux/ { print ($3 ~ /^\//) ? $3 : $1 }' "$tmp/ldd" | head -n 1)
	[ -n "$interp" ] && nm -D --defined-only "$interp" >>"$tmp/defined"
	awk '{ sub(/@.*/, "", $3); print $3 }' "$tmp/defined" | sort -u >"$tmp/def"
	nm -D --undefined-only "$lib" | awk '$1 == "U" { sub(/@.*/, "", $2); print $2 }' |
		sort -u >"$tmp/undef"
	for s in $(comm -23 "$tmp/undef" "$tmp/def"); do
		echo "$lib: $s"
		bad=1
	done
done
exit $bad
