#!/usr/bin/env python3
"""bench/startup.py - what `weft run` costs a tree of short programs.

    sh -c 'for i in $(seq 200); do /bin/true; done'

natively, under `weft run` (every process in the tree preloads the shim
and starts lazily: docs/preload.md, "Start-up"), under `weft run` with
WEFT_START=eager (the runtime started before main, as before the lazy
start), and under `weft run --no-children` (the shell alone).  Runs the
sides alternately ROUNDS times and prints the median wall and CPU time
(user + system of the whole tree, from wait4) of each, and its ratio to
native.  Part of `make bench`; alone: BUILD=build python3 bench/startup.py
[ROUNDS] [N].  Target (issue 12): weft run <= 1.3x native wall time.

BASELINE=other/build adds `weft run` of that build (say, main's before a
change) as one more side, run in the same alternation.  SIDES=a,b,...
runs only those sides (native always): weft, eager, nochildren,
baseline; SIDES=weft,baseline leaves the slow eager start out.
"""
import os
import statistics
import subprocess
import sys
import time

BUILD = os.environ.get("BUILD", "build")
WEFT = os.path.join(BUILD, "bin", "weft")


def run(argv, env):
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"startup: {' '.join(argv)} exited {p.returncode}")
    return wall, ru.ru_utime + ru.ru_stime


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    if not os.access(WEFT, os.X_OK):
        sys.exit(f"startup: no {WEFT} (make first)")
    loop = f"for i in $(seq {n}); do /bin/true; done"
    base = dict(os.environ)
    for k in ("LD_PRELOAD", "WEFT_START"):
        base.pop(k, None)
    sides = [
        ("native", ["sh", "-c", loop], base, "native"),
        ("weft run", [WEFT, "run", "--", "sh", "-c", loop], base, "weft"),
        ("weft run, WEFT_START=eager", [WEFT, "run", "--", "sh", "-c", loop],
         dict(base, WEFT_START="eager"), "eager"),
        ("weft run --no-children", [WEFT, "run", "--no-children", "--", "sh", "-c", loop], base,
         "nochildren"),
    ]
    baseline = os.environ.get("BASELINE")
    if baseline:
        other = os.path.join(baseline, "bin", "weft")
        if not os.access(other, os.X_OK):
            sys.exit(f"startup: no {other}")
        sides.insert(2, ("weft run, BASELINE", [other, "run", "--", "sh", "-c", loop], base,
                         "baseline"))
    keep = [w.strip() for w in os.environ.get("SIDES", "").split(",") if w.strip()]
    if keep:
        sides = [sd for sd in sides if sd[3] == "native" or sd[3] in keep]
    res = {name: ([], []) for name, _, _, _ in sides}
    load0 = os.getloadavg()[0]
    for _ in range(rounds):
        for name, argv, env, _ in sides:
            w, c = run(argv, env)
            res[name][0].append(w)
            res[name][1].append(c)
    load1 = os.getloadavg()[0]
    print(f"\nsh -c '{n} x /bin/true': median of {rounds} alternating runs "
          f"(load average {load0:.1f} before, {load1:.1f} after)")
    if baseline:
        print(f"BASELINE: {baseline}")
    print(f"{'':30s} {'wall s':>8s} {'x native':>9s} {'CPU s':>8s} {'x native':>9s}")
    nw = statistics.median(res["native"][0])
    nc = statistics.median(res["native"][1])
    for name, _, _, _ in sides:
        w = statistics.median(res[name][0])
        c = statistics.median(res[name][1])
        print(f"{name:30s} {w:8.2f} {w / nw:8.2f}x {c:8.2f} {c / nc:8.2f}x")


if __name__ == "__main__":
    main()
