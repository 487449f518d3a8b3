#!/usr/bin/env bash
# fresh-debian.sh - the README's two commands, exactly as written, in a fresh
# Debian 12 root: what a new user gets (make fresh-check; .ci/run runs it).
#
# A minimal bookworm root (debootstrap minbase plus build-essential, git,
# ca-certificates, python3, procps: nothing of weft's own dependencies) is
# made once and cached outside the repository ($FRESH_CACHE, default
# /var/cache/weft-fresh).  Each check clones the repository ($FRESH_REF,
# default HEAD: what is committed, not the work tree) into a throw-away
# overlay of that root and runs, as root inside it:
#
#     make demo
#     make test
#
# It fails unless make demo exits 0 with its table and make test ends with
# "N passed, 0 failed".  The package mirror is read from the host's apt
# configuration now, never written into the repository.  Every mount lives in
# a private mount namespace and every process in a private PID namespace, so
# an interrupted check leaves nothing behind (the throw-away directory is
# removed on exit).  Needs root; installs debootstrap if missing.
set -euo pipefail

die() { echo "fresh-debian: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, mounts)"

top=$(cd "$(dirname "$0")/.." && git rev-parse --show-toplevel)
ref=${FRESH_REF:-HEAD}
cache=${FRESH_CACHE:-/var/cache/weft-fresh}
suite=bookworm
base=$cache/$suite-minbase
log=${FRESH_LOG:-$top/build/fresh-debian.log}
pkgs=build-essential,git,ca-certificates,python3,procps
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

commit=$(git -C "$top" rev-parse --verify "$ref^{commit}") || die "no commit $ref"

# The host's Debian mirror for $suite (deb822 .sources first, then one-line
# .list files), skipping the security archive.
mirror() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v s="$suite" '
			/^[ \t]*$/ { u = ""; t = "" }
			/^URIs:/ { u = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) t = 1 }
			u != "" && t && u !~ /security/ { print u; exit }' "$f"
	done | head -n 1
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v s="$suite" '$1 == "deb" && $0 !~ /security/ {
			for (i = 2; i < NF; i++) if ($i ~ /^[a-z]+:\/\// && $(i + 1) == s) { print $i; exit } }' "$f"
	done | head -n 1
}

# The host's apt sources and Acquire settings (proxy, validity checks), as
# they are now, into a root.
copy_apt_config() {
	local root=$1 f
	rm -f "$root"/etc/apt/sources.list "$root"/etc/apt/sources.list.d/*
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] && cp "$f" "$root$f"
	done
	for f in /etc/apt/apt.conf.d/*; do
		[ -f "$f" ] && grep -q 'Acquire' "$f" && cp "$f" "$root$f"
	done
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	cp /etc/hosts "$root/etc/hosts" 2>/dev/null || true
}

make_base() {
	command -v debootstrap >/dev/null 2>&1 || {
		echo "fresh-debian: installing debootstrap" >&2
		apt-get update -qq >/dev/null && apt-get install -y -qq debootstrap >/dev/null
	}
	local m
	m=$(mirror | head -n 1)
	[ -n "$m" ] || die "no Debian $suite mirror in the host's apt configuration"
	echo "fresh-debian: making the $suite root from $m (once; cached in $base)" >&2
	rm -rf "$base.tmp"
	mkdir -p "$cache"
	debootstrap --variant=minbase --include="$pkgs" "$suite" "$base.tmp" "$m" \
		>"$cache/debootstrap.log" 2>&1 || {
		tail -n 20 "$cache/debootstrap.log" >&2
		die "debootstrap failed (log: $cache/debootstrap.log)"
	}
	rm -rf "$base.tmp/var/cache/apt/archives/"*.deb
	mv "$base.tmp" "$base"
}

[ -x "$base/usr/bin/make" ] || make_base

work=$(mktemp -d /var/tmp/weft-fresh.XXXXXX)
cleanup() {
	# the namespaces went with their last process; only files are left
	[ -n "${child:-}" ] && kill "$child" 2>/dev/null && wait "$child" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/upper" "$work/ovl" "$work/root"
git clone -q --no-hardlinks "$top" "$work/clone"
git -C "$work/clone" checkout -q "$commit"

# Inside private mount and PID namespaces: the root is an overlay of the
# cached base (a copy where overlayfs is not available), with /proc, /dev and
# /sys of its own; the clone goes to /root/weft.
inner() {
	set -euo pipefail
	mount --make-rprivate /
	local root=$work/root
	if ! mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/upper,workdir=$work/ovl" "$root" 2>/dev/null; then
		echo "fresh-debian: no overlayfs here; copying the root" >&2
		cp -a "$base/." "$root/"
	fi
	copy_apt_config "$root"
	mv "$work/clone" "$root/root/weft"
	mount -t proc proc "$root/proc"
	mount --rbind /dev "$root/dev"
	mount -t sysfs sysfs "$root/sys"
	mount -t tmpfs tmpfs "$root/tmp"
	# the README's two commands, exactly as written there
	local cmds
	cmds=$(sed -n '/^```sh$/,/^```$/p' "$root/root/weft/README.md" | sed '1d;$d' | head -n 2 |
		sed 's/[ \t]*#.*$//')
	printf '%s\n' "$cmds" | sed 's/^/fresh-debian: will run: /' >&2
	local c rc=0
	while IFS= read -r c; do
		[ -n "$c" ] || continue
		echo "== $c"
		chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			/bin/sh -c "cd /root/weft && $c" || { rc=$?; echo "== '$c' exited $rc"; break; }
		echo "== '$c' exited 0"
	done <<<"$cmds"
	return $rc
}
export -f inner copy_apt_config
export work base

mkdir -p "$(dirname "$log")"
echo "fresh-debian: $commit in a fresh $suite root (log: $log)" >&2
set +e
unshare --mount --pid --fork --kill-child bash -c inner >"$log" 2>&1 &
child=$!
wait "$child"
rc=$?
child=
set -e

tail -n 40 "$log"
demo_ok=$(grep -c "^== 'make demo' exited 0" "$log" || true)
table=$(grep -c '^messages per second' "$log" || true)
closing=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 || true)
test_ok=$(grep -c "^== 'make test' exited 0" "$log" || true)
echo
echo "fresh-debian: make demo: $([ "$demo_ok" = 1 ] && [ "$table" -ge 1 ] && echo ok || echo FAILED)"
echo "fresh-debian: make test: ${closing:-no closing line} $([ "$test_ok" = 1 ] && echo ok || echo FAILED)"
[ "$rc" = 0 ] && [ "$demo_ok" = 1 ] && [ "$table" -ge 1 ] && [ "$test_ok" = 1 ] &&
	echo "$closing" | grep -Eq '^[0-9]+ passed, 0 failed' ||
	die "the README's two commands do not pass in a fresh $suite root (log: $log)"
echo "fresh-debian: the README's two commands pass in a fresh $suite root"
