#!/bin/sh
# check-layering.sh OBJDIR - the runtime never goes through the interposer.
#
# Every name a hook object defines (OBJDIR/hook/*.o, OBJDIR/hook/preload/*.o:
# the interposed libc calls and the shim's own functions) must not be
# called, nor referred to, by a runtime object (OBJDIR/runtime/*.o,
# OBJDIR/arch/*/*.o): inside libweft.so and libweft_preload.so such a call
# would bind to the hook, not to the C library.  The runtime uses its own
# system-call layer instead (runtime/sys.h, runtime/sys.c).
#
# Prints "OBJECT: NAME (defined by HOOKOBJECT)" per offending reference and
# exits 1 if there is any.  tests/test_link.c runs it on the build.
set -eu
export LC_ALL=C
dir=${1:?usage: check-layering.sh OBJDIR}

# Names that may be shared, each with its reason.  (None today: keep it
# that way unless a reason is written here.)
allow=""

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

hooks=$(ls "$dir"/hook/*.o "$dir"/hook/preload/*.o 2>/dev/null || true)
rt=$(ls "$dir"/runtime/*.o "$dir"/arch/*/*.o 2>/dev/null || true)
[ -n "$hooks" ] || { echo "$dir: no hook objects"; exit 1; }
[ -n "$rt" ] || { echo "$dir: no runtime objects"; exit 1; }

# "NAME OBJECT" for every global definition in a hook object
for o in $hooks; do
	nm -g --defined-only "$o" | awk -v o="${o#"$dir"/}" 'NF == 3 { print $3, o }'
done | sort -k1,1 -u >"$tmp/hooked"
for a in $allow; do
	printf '%s\n' "$a"
done | sort -u >"$tmp/allow"

bad=0
for o in $rt; do
	nm -u "$o" | awk '{ print $NF }' | sort -u | comm -23 - "$tmp/allow" >"$tmp/undef"
	join "$tmp/undef" "$tmp/hooked" >"$tmp/both" || true
	while read -r name by; do
		echo "${o#"$dir"/}: $name (defined by $by)"
		bad=1
	done <"$tmp/both"
done
exit $bad
