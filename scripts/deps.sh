#!/bin/sh
# deps.sh - make sure the Debian packages a make target needs are present.
# As root it installs what is missing with apt-get; otherwise it prints the
# exact command to run and fails.  The Makefile runs it before it decides
# anything that depends on an installed file (see "Dependencies" there).
#
#   scripts/deps.sh TIER...    install what these tiers need
#   scripts/deps.sh --paths    print, as make assignments, where the build's
#                              libraries are (after an install)
#
# Tiers (each includes build):
#   build     make: libjemalloc-dev, libunwind-dev
#   test      make test: + libcriterion-dev, gdb, curl, python3
#   demo      make demo: nothing more
#   valgrind  make test-valgrind: + valgrind
#   bench     make bench: + golang-go, Boost.Context/Fiber, gnuplot, taskset, python3
set -e
triple=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)

# The first of the library's usual places that exists.
libpath() {
	for d in "/usr/lib/$triple" /usr/lib /usr/local/lib; do
		[ -e "$d/$1" ] && { echo "$d/$1"; return 0; }
	done
	return 1
}

if [ "${1:-}" = --paths ]; then
	j=$(libpath libjemalloc_pic.a) || { echo "weft: libjemalloc_pic.a not found (libjemalloc-dev)" >&2; exit 1; }
	u=$(libpath libunwind.so) || { echo "weft: libunwind.so not found (libunwind-dev)" >&2; exit 1; }
	echo "JEMALLOC_A := $j"
	echo "UNWIND_SO := $u"
	exit 0
fi

need=""
have_hdr() { [ -e "/usr/include/$1" ] || [ -e "/usr/include/$triple/$1" ]; }
have_cmd() { command -v "$1" >/dev/null 2>&1; }
want() { case " $need " in *" $1 "*) ;; *) need="$need $1" ;; esac; }

[ $# -gt 0 ] || set -- build
for tier in "$@"; do
	have_hdr jemalloc/jemalloc.h && libpath libjemalloc_pic.a >/dev/null || want libjemalloc-dev
	have_hdr libunwind.h || want libunwind-dev
	case $tier in
	build | demo) ;;
	test)
		have_hdr criterion/criterion.h || want libcriterion-dev
		have_cmd gdb || want gdb
		have_cmd curl || want curl
		have_cmd python3 || want python3
		;;
	valgrind) have_cmd valgrind || want valgrind ;;
	bench)
		have_cmd go || want golang-go
		have_hdr boost/context/detail/fcontext.hpp || want libboost-context-dev
		have_hdr boost/fiber/all.hpp || want libboost-fiber-dev
		have_cmd gnuplot || want gnuplot-nox
		have_cmd taskset || want util-linux
		have_cmd python3 || want python3
		;;
	*)
		echo "weft: deps.sh: unknown tier '$tier' (build, test, demo, valgrind, bench)" >&2
		exit 2
		;;
	esac
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "weft: installing$need" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $need >/dev/null
else
	echo "weft: missing packages; run as root:" >&2
	echo "  apt-get update && apt-get install -y --no-install-recommends$need" >&2
	exit 1
fi
