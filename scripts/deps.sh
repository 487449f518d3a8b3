#!/bin/sh
# deps.sh - make sure the Debian packages weft builds and tests with are
# present.  As root it installs what is missing with apt-get; otherwise it
# prints the exact command to run and fails.
#   scripts/deps.sh build    jemalloc, libunwind, Criterion (default)
#   scripts/deps.sh bench    + Go, Boost.Context/Fiber, gnuplot
set -e
need=""
have_hdr() { [ -e "/usr/include/$1" ] || [ -e "/usr/include/$(gcc -dumpmachine 2>/dev/null)/$1" ]; }
have_hdr jemalloc/jemalloc.h || need="$need libjemalloc-dev"
have_hdr libunwind.h || need="$need libunwind-dev"
have_hdr criterion/criterion.h || need="$need libcriterion-dev"
if [ "${1:-build}" = bench ]; then
	command -v go >/dev/null 2>&1 || need="$need golang-go"
	have_hdr boost/context/detail/fcontext.hpp || need="$need libboost-context-dev"
	have_hdr boost/fiber/all.hpp || need="$need libboost-fiber-dev"
	command -v gnuplot >/dev/null 2>&1 || need="$need gnuplot-nox"
	command -v taskset >/dev/null 2>&1 || need="$need util-linux"
fi
[ -z "$need" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "weft: installing$need" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq $need >/dev/null
else
	echo "weft: missing packages; run: sudo apt-get install -y$need" >&2
	exit 1
fi
