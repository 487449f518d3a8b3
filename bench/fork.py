#!/usr/bin/env python3
"""bench/fork.py - what fork() costs a threaded program under `weft run`.

bench/forkcost.c (one thread made, then N children forked that _exit at
once, each waited for) natively and under `weft run --procs 2`, the sides
alternated ROUNDS times; prints each side's median microseconds per
child (the parent's fork call, its wait until the child is gone, both)
and weft's ratio to native, with the machine's floors beside them (a
system call, a first-touch page fault: a fork's cost is mostly page-table
copies and copy-on-write faults).  No target in the issues; the figures
are in docs/preload.md, "fork and exec".  Part of `make bench`; alone:
BUILD=build python3 bench/fork.py [ROUNDS] [N].  BASELINE=other/build
adds `weft run` of that build (main's before a change, say) as a side.
EXEC=1: the children exec /bin/true (under the shim too) instead.
"""
import os
import statistics
import subprocess
import sys

BUILD = os.environ.get("BUILD", "build")


def once(argv, env):
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"fork: {' '.join(argv)} exited {out.returncode}: {out.stderr.strip()}")
    return {k: float(v) for k, v in (f.split("=") for f in out.stdout.split())}


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    n = sys.argv[2] if len(sys.argv) > 2 else "300"
    prog = os.path.join(BUILD, "bench", "forkcost")
    weft = os.path.join(BUILD, "bin", "weft")
    for p in (prog, weft):
        if not os.access(p, os.X_OK):
            sys.exit(f"fork: no {p} (make {prog} first)")
    args = [prog, n] + (["exec"] if os.environ.get("EXEC") == "1" else [])
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "WEFT_START")}
    sides = [("native", args), ("weft run", [weft, "run", "--procs", "2", "--"] + args)]
    base = os.environ.get("BASELINE")
    if base:
        sides.append((f"weft run ({base})",
                      [os.path.join(base, "bin", "weft"), "run", "--procs", "2", "--"] + args))
    res = {name: [] for name, _ in sides}
    for _ in range(rounds):
        for name, argv in sides:
            res[name].append(once(argv, env))
    floors = os.path.join(BUILD, "bench", "floors")
    fl = ""
    if os.access(floors, os.X_OK):
        f = once([floors], env)
        fl = (f"floors: syscall {f.get('syscall_ns', 0):.0f} ns, "
              f"first-touch fault {f.get('fault_us', 0):.1f} us")
    load = os.getloadavg()[0]
    print(f"fork + waitpid of a child that {'execs /bin/true' if len(args) > 2 else '_exits'}, "
          f"{n} per run, a thread made first: median of {rounds} alternated runs, us per child "
          f"(load average {load:.1f}); {fl}")
    print(f"{'':24} {'fork':>8} {'wait':>8} {'total':>8} {'x native':>9}  total per run")
    nat = statistics.median(r["total_us"] for r in res["native"])
    for name, _ in sides:
        rs = res[name]
        med = {k: statistics.median(r[k] for r in rs) for k in ("fork_us", "wait_us", "total_us")}
        spread = ", ".join(f"{r['total_us']:.0f}" for r in rs)
        print(f"{name:24} {med['fork_us']:8.0f} {med['wait_us']:8.0f} {med['total_us']:8.0f} "
              f"{med['total_us'] / nat:8.2f}x  {spread}")


if __name__ == "__main__":
    main()
