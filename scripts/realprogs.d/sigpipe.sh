#!/usr/bin/env bash
# sigpipe.sh - SIGPIPE as real programs meet it (realprogs.sh case sigpipe):
# a writer into a pipeline whose reader has gone, the writer's exit status
# (PIPESTATUS) and what it printed.  Under weft run every program here is.
set -u
py=/usr/bin/python3
r=$(cd "$(dirname "$0")/../.." && pwd)
# killed by SIGPIPE (141): yes, perl, a C program through stdio
yes | head -1; echo "yes ${PIPESTATUS[*]}"
perl -e 'print "y\n" while 1' | head -1; echo "perl ${PIPESTATUS[*]}"
# python ignores SIGPIPE: BrokenPipeError, its own status
$py -c 'while 1: print("y")' 2>/dev/null | head -1; echo "python ${PIPESTATUS[*]}"
# python with SIGPIPE at its default, threads writing
$py -c '
import signal, sys, threading
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
def w():
    while 1: sys.stdout.write("y\n")
ts = [threading.Thread(target=w) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()' | head -1; echo "python-threads ${PIPESTATUS[*]}"
# one thread blocks SIGPIPE around its write (libpq's way), main lets it through
$py -c '
import os, signal, threading
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
def w():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
    r, f = os.pipe(); os.close(r)
    try: os.write(f, b"x")
    except BrokenPipeError: print("thread: EPIPE", flush=True)
    print("thread: pending", signal.SIGPIPE in signal.sigpending(), flush=True)
    print("thread: taken", signal.sigtimedwait({signal.SIGPIPE}, 0) is not None, flush=True)
    print("thread: pending", signal.SIGPIPE in signal.sigpending(), flush=True)
t = threading.Thread(target=w); t.start(); t.join()
r, f = os.pipe(); os.close(r)
os.write(f, b"x")
print("main: not killed")'; echo "python-mask $?"
# git pushing output into a closed pipe
git -C "$r" log --stat | head -1 | cut -c1-6; echo "git-log ${PIPESTATUS[*]}"
git -C "$r" grep -n . | head -1 >/dev/null; echo "git-grep ${PIPESTATUS[*]}"
