#!/usr/bin/env python3
"""bench/run.py -- run weft's benchmarks side by side with their peers.

    python3 bench/run.py [--quick] [--only REGEX] [--list] [--docs DIR]
                         [--wait-quiet SECS] [--render RAW.json]

(normally through `make bench` / `make bench QUICK=1`, which build
everything first).  Python 3 standard library only.

Every benchmark below is a table entry: the commands it runs (one weft
command or several, and the peers' commands) and the figures it reads
from their one-line `key=value` outputs.  The commands of a benchmark are
run alternately -- weft, peer, peer, weft, peer, peer, ... -- one warm-up
round that is thrown away, then RUNS counted rounds (5, or 3 with
--quick); every figure is the median of its counted runs, and the table
gives weft/peer for each pair.  A command whose program has not been
built is reported as "not built"; one that fails as "failed"; neither
stops the run.

Writes
  bench/results/<YYYY-MM-DD>.csv        every figure, every sample
  docs/benchmarks.md, docs/img/*.png    the report and its plots
  bench/README-section.md               the headline table for README.md
With --quick (or --only) the CSV, the report and the README section go
to build/bench/quick/ (build/bench/partial/) instead, so that a quick run
never overwrites the committed results.  Every run also saves its raw
outputs to build/bench/<mode>-raw.json; --render regenerates all of the
above from such a file without running anything.

Environment: BUILD (default build), the build directory.
"""

import argparse
import csv
import datetime
import json
import os
import platform
import re
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = os.environ.get("BUILD", "build")
B = BUILD  # short form for the tables below
DEFAULT_TIMEOUT = 60  # seconds a benchmark command may take before it counts as hung

# ---------------------------------------------------------------------------
# the model


class Side:
    """One command that is run once per round."""

    def __init__(self, sid, impl, argv, env=None, needs=None, timeout=None):
        self.sid = sid          # unique id
        self.impl = impl        # "weft" or a peer family ("Go", ...)
        self.argv = [str(a) for a in argv]
        self.env = env or {}    # extra environment for the command
        # files that must exist before it can run (default: the program)
        if needs is None:
            needs = [a for a in self.argv if a.startswith(B + "/")][:1]
        self.needs = needs
        self.timeout = timeout or DEFAULT_TIMEOUT
        self.samples = []       # parsed outputs of the counted runs (dict or None)
        self.status = "pending"  # ok | not built | failed: ... | partial: ...
        self.errors = []
        self.seconds = 0.0

    def cmdline(self):
        envs = " ".join(f"{k}={v}" for k, v in self.env.items())
        return (envs + " " if envs else "") + " ".join(shlex.quote(a) for a in self.argv)

    def missing(self):
        return [n for n in self.needs if not (ROOT / n).exists()]


class Ref:
    """Where a figure's value comes from: key (a regex) of a side's output,
    times scale; with div, divided run by run by another Ref."""

    def __init__(self, sid, key, scale=1.0, div=None):
        self.sid, self.key, self.scale, self.div = sid, key, scale, div


class Peer:
    def __init__(self, column, label, ref):
        self.column = column    # headline column: Go, pthreads, Boost.Context, Boost.Fiber, epoll
        self.label = label      # what exactly was measured
        self.ref = ref


class Figure:
    def __init__(self, fid, title, unit, lower, weft, peers, weft_label="weft",
                 headline=False, plot=None):
        self.fid, self.title, self.unit, self.lower = fid, title, unit, lower
        self.weft, self.peers, self.weft_label = weft, peers, weft_label
        self.headline = headline
        self.plot = plot        # free-form tag the plotting code looks for


class Bench:
    def __init__(self, bid, title, sides, figures, about, warm=1, runs=None):
        self.bid, self.title, self.sides, self.figures = bid, title, sides, figures
        self.about = about      # one paragraph: what is measured
        self.warm = warm
        self.runs = runs
        self.seconds = 0.0
        self.foreign = None     # share of the CPUs other processes used meanwhile


# ---------------------------------------------------------------------------
# the table of benchmarks


def benchmarks(quick):
    def sz(full, q):
        return q if quick else full

    W = f"{B}/bench/weft"
    G = f"{B}/bench/go"
    P = f"{B}/bench/peers"
    preload = f"{B}/lib/libweft_preload.so"
    out = []

    # ---- context switch --------------------------------------------------
    n = sz(5_000_000, 500_000)
    out.append(Bench(
        "switch", "Context switch",
        [Side("weft_yield", "weft", [f"{W}/yield", n]),
         Side("weft_yield_tls", "weft",
              [f"{B}/bin/weft", "run", "--procs", 1, "--", f"{W}/yield", sz(1_000_000, 200_000)],
              {"WEFT_TLS": "thread"}, needs=[f"{B}/bin/weft", preload, f"{W}/yield"]),
         Side("weft_yield_shared", "weft",
              [f"{B}/bin/weft", "run", "--procs", 1, "--", f"{W}/yield", sz(1_000_000, 200_000)],
              {"WEFT_TLS": "shared"}, needs=[f"{B}/bin/weft", preload, f"{W}/yield"]),
         Side("go_gosched", "Go", [f"{G}/gosched", "-n", n]),
         Side("boost", "Boost", [f"{P}/boost_switch", sz(2_000_000, 200_000)]),
         Side("pthread_pp", "pthreads",
              ["taskset", "-c", "0", f"{P}/pthread_pingpong", sz(50_000, 10_000)])],
        [Figure("switch", "context switch (1 P)", "ns", True,
                Ref("weft_yield", "weft_yield_ns"),
                [Peer("Go", "Go runtime.Gosched, GOMAXPROCS=1", Ref("go_gosched", "go_gosched_ns")),
                 Peer("Boost.Context", "Boost.Context jump_fcontext (raw switch, the floor)",
                      Ref("boost", "boost_context_switch_ns")),
                 Peer("Boost.Fiber", "Boost.Fiber this_fiber::yield",
                      Ref("boost", "boost_fiber_yield_ns")),
                 Peer("pthreads", "pthreads futex hand-off on one core (round trip / 2)",
                      Ref("pthread_pp", "pthread_futex_pingpong_ns", 0.5))],
                headline=True, plot="switch"),
         Figure("switch_tls", "context switch, preloaded, each G its own TLS (1 P)", "ns", True,
                Ref("weft_yield_tls", "weft_yield_ns"),
                [Peer("floor", "the same switch with WEFT_TLS=shared (no FS base load)",
                      Ref("weft_yield_shared", "weft_yield_ns"))])],
        "Two tasks on one P (one core) handing the CPU to each other: weft_yield vs "
        "runtime.Gosched, a raw Boost.Context switch (no scheduler at all: the floor for "
        "any stackful switch), Boost.Fiber's yield, and two threads pinned to one core "
        "waking each other through a futex (half a round trip = one switch).  Then the "
        "same weft program under `weft run --procs 1`, where each G has its own TLS "
        "(WEFT_TLS=thread, the shim's default: the switch loads the FS base, wrfsbase or "
        "arch_prctl, the floors' fsload_ns) against WEFT_TLS=shared (no load)."))

    # ---- spawn + exit ----------------------------------------------------
    n = sz(200_000, 50_000)
    out.append(Bench(
        "spawn", "Spawn + exit",
        [Side("weft_spawn1", "weft", [f"{W}/spawn", n], {"WEFT_MAXPROCS": 1}),
         Side("go_spawn1", "Go", [f"{G}/spawn", "-n", n], {"GOMAXPROCS": 1}),
         Side("weft_spawn2", "weft", [f"{W}/spawn", n], {"WEFT_MAXPROCS": 2}),
         Side("go_spawn2", "Go", [f"{G}/spawn", "-n", n], {"GOMAXPROCS": 2}),
         Side("pthread_spawn", "pthreads", [f"{P}/pthread_spawn", sz(10_000, 2_000)])],
        [Figure("spawn1", "spawn+exit (1 P)", "ns", True,
                Ref("weft_spawn1", "weft_spawn_ns"),
                [Peer("Go", "Go `go f()`, GOMAXPROCS=1", Ref("go_spawn1", "go_spawn_ns")),
                 Peer("Boost.Fiber", "Boost.Fiber fiber + join (one at a time)",
                      Ref("boost", "boost_fiber_spawn_ns")),
                 Peer("pthreads", "pthread_create + pthread_join (one at a time)",
                      Ref("pthread_spawn", "pthread_spawn_us", 1000))],
                headline=True, plot="spawn"),
         Figure("spawn2", "spawn+exit (2 Ps)", "ns", True,
                Ref("weft_spawn2", "weft_spawn_ns"),
                [Peer("Go", "Go `go f()`, GOMAXPROCS=2", Ref("go_spawn2", "go_spawn_ns"))],
                plot="spawn")],
        "Start N tasks that finish at once and wait for all of them: ns per task.  weft's "
        "program runs one unmeasured round of the same size first (descriptors and stacks "
        "then come from the pools, as in a long-running program).  The Boost.Fiber figure "
        "comes from the Boost command of the context-switch benchmark."))

    # ---- parked tasks ----------------------------------------------------
    counts = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    sides, figs = [], []
    for c in counts:
        k = human_count(c)
        tmo = 60 + c // 10_000  # 1M parked weft Gs take ~15 s here
        sides += [Side(f"weft_parked_{k}", "weft", [f"{W}/parked", c], timeout=tmo),
                  Side(f"go_parked_{k}", "Go", [f"{G}/parked", "-n", c], timeout=tmo),
                  Side(f"floor_parked_{k}", "floor", [f"{P}/page_touch", c], timeout=tmo)]
        if c <= 10_000:
            sides.append(Side(f"pthread_parked_{k}", "pthreads", [f"{P}/pthread_parked", c]))
        rss_peers = [Peer("Go", "Go goroutine blocked on a channel",
                          Ref(f"go_parked_{k}", "go_parked_rss_bytes"))]
        mk_peers = [Peer("Go", "Go goroutine blocked on a channel",
                         Ref(f"go_parked_{k}", "go_parked_create_ns")),
                    # the floor at this scale: a plain first write to each task's
                    # stack-top page, 256 KiB apart, 2 threads (bench/peers/page_touch.c)
                    Peer("floor", "floor: a plain first write to one page per task, "
                         "256 KiB apart, 2 threads (no scheduler)",
                         Ref(f"floor_parked_{k}", "touch_ns_per_page"))]
        if c <= 10_000:
            rss_peers.append(Peer("pthreads", "pthread blocked on a condvar (default attributes)",
                                  Ref(f"pthread_parked_{k}", "pthread_parked_rss_bytes")))
            mk_peers.append(Peer("pthreads", "pthread blocked on a condvar (default attributes)",
                                 Ref(f"pthread_parked_{k}", "pthread_parked_create_us", 1000)))
        figs.append(Figure(f"parked_rss_{k}", f"parked tasks: RSS per task, {k}", "bytes", True,
                           Ref(f"weft_parked_{k}", "weft_parked_rss_bytes"), rss_peers,
                           headline=(c == counts[-1]), plot=("parked", c)))
        figs.append(Figure(f"parked_create_{k}", f"parked tasks: creation per task, {k}", "ns",
                           True, Ref(f"weft_parked_{k}", "weft_parked_create_ns"), mk_peers))
        if c == counts[-1]:
            # what the creation costs the machine, per G (no peer: Go's
            # program does not report them); read beside the floors
            for key, what, unit in (("faults_per_g", "page faults per task", "faults"),
                                    ("user_ns_per_g", "user CPU per task", "ns"),
                                    ("sys_ns_per_g", "system CPU per task", "ns"),
                                    ("threads_max", "most OS threads while spawning", "threads")):
                figs.append(Figure(f"parked_{key}_{k}", f"parked tasks, {k}: {what}", unit, True,
                                   Ref(f"weft_parked_{k}", key), []))
    # the issue-16 case: Gs that park in weft_sleep (a timer each)
    c = sz(200_000, 50_000)
    k = human_count(c)
    sides.append(Side(f"weft_parked_sleep_{k}", "weft", [f"{W}/parked", c, "sleep"],
                      timeout=60 + c // 10_000))
    figs += [Figure(f"parked_sleep_create_{k}", f"{k} tasks parking in weft_sleep(20 s): "
                    "creation per task", "ns", True,
                    Ref(f"weft_parked_sleep_{k}", "weft_parked_create_ns"), []),
             Figure(f"parked_sleep_spawn_{k}", f"{k} tasks parking in weft_sleep(20 s): "
                    "the spawn loop per task", "ns", True,
                    Ref(f"weft_parked_sleep_{k}", "weft_parked_spawn_ns"), []),
             Figure(f"parked_sleep_threads_{k}", f"{k} tasks parking in weft_sleep(20 s): "
                    "most OS threads while spawning (2 Ps)", "threads", True,
                    Ref(f"weft_parked_sleep_{k}", "threads_max"), [])]
    out.append(Bench(
        "parked", "Parked tasks", sides, figs,
        "Start N tasks that each block (weft: on a wait group; Go: on a channel; pthreads: on "
        "a condition variable), wait until all are blocked, and report the growth of VmRSS "
        "per task and the creation time per task.  pthreads only at 10k: 100k threads with "
        "default 8 MiB stacks is past what this machine allows.  Every run is a new "
        "process, so every stack and descriptor is memory first touched in that run; "
        "weft's program also gives the page faults, user and system CPU time per task and "
        "the most OS threads seen while spawning (read them beside the machine's floors: "
        "a task costs at least one fresh stack page).  The sleep variant's tasks park in "
        "weft_sleep(20 s), each arming a timer of its own, and the program exits without "
        "waiting for them."))

    # ---- channels ---------------------------------------------------------
    n = sz(1_000_000, 100_000)
    out.append(Bench(
        "chan_pingpong", "Channel ping-pong",
        [Side("weft_chan_pp", "weft", [f"{W}/chan_pingpong", n]),
         Side("go_chan_pp", "Go", [f"{G}/chanpingpong", "-n", n])],
        [Figure("chan_pingpong", "unbuffered channel ping-pong round trip (1 P)", "ns", True,
                Ref("weft_chan_pp", "weft_chan_pingpong_ns"),
                [Peer("Go", "Go unbuffered channels, GOMAXPROCS=1",
                      Ref("go_chan_pp", "go_chan_pingpong_ns")),
                 Peer("pthreads", "pthreads futex hand-off on one core",
                      Ref("pthread_pp", "pthread_futex_pingpong_ns")),
                 Peer("pthreads", "pthreads mutex + condvar on one core",
                      Ref("pthread_pp", "pthread_condvar_pingpong_ns"))],
                headline=True)],
        "Two tasks on one P bouncing a value over two unbuffered channels: ns per round trip "
        "(two blocking hand-offs).  The pthreads figures come from the pthreads command of "
        "the context-switch benchmark (two threads pinned to one core)."))

    n = sz(5_000_000, 500_000)
    out.append(Bench(
        "chan_buffered", "Buffered channel",
        [Side("weft_chanbuf", "weft", [f"{W}/chan_buffered", n]),
         Side("go_chanbuf", "Go", [f"{G}/chanbuf", "-n", n])],
        [Figure("chan_buffered", "buffered channel (cap 128) throughput, 2 Ps", "msgs/s", False,
                Ref("weft_chanbuf", r"weft_.*msgs_per_sec"),
                [Peer("Go", "Go chan int, cap 128, GOMAXPROCS=2",
                      Ref("go_chanbuf", "go_chanbuf_msgs_per_sec"))],
                headline=True)],
        "One producer and one consumer on a channel of capacity 128 with 2 Ps: messages "
        "per second."))

    # ---- mutex ------------------------------------------------------------
    n = sz(20_000_000, 2_000_000)
    out.append(Bench(
        "mutex", "Contended mutex",
        [Side("weft_mutex", "weft", [f"{W}/mutex", n]),
         Side("go_mutex", "Go", [f"{G}/mutex", "-n", n]),
         Side("pthread_mutex", "pthreads", [f"{P}/pthread_mutex", n])],
        [Figure("mutex", "contended mutex, 8 tasks, 2 Ps", "ops/s", False,
                Ref("weft_mutex", r"weft_.*ops_per_sec"),
                [Peer("Go", "Go sync.Mutex, 8 goroutines", Ref("go_mutex", "go_mutex_ops_per_sec")),
                 Peer("pthreads", "pthread_mutex_t, 8 threads",
                      Ref("pthread_mutex", "pthread_mutex_ops_per_sec"))],
                headline=True)],
        "8 tasks incrementing one counter under one lock on 2 cores: lock+unlock pairs per "
        "second (higher is better)."))

    # ---- fork-join fib ------------------------------------------------------
    n = 32  # the figure; each run times 9 calls after a warm-up
    out.append(Bench(
        "fib", "Fork-join fib",
        [Side("weft_fib1", "weft", [f"{W}/fib", n], {"WEFT_MAXPROCS": 1}),
         Side("go_fib1", "Go", [f"{G}/fib", "-n", n], {"GOMAXPROCS": 1}),
         Side("weft_fib2", "weft", [f"{W}/fib", n], {"WEFT_MAXPROCS": 2}),
         Side("go_fib2", "Go", [f"{G}/fib", "-n", n], {"GOMAXPROCS": 2})],
        [Figure("fib_1p", f"fib({n}), cutoff 20, 1 P", "ms", True,
                Ref("weft_fib1", "weft_fib_ms"), [Peer("Go", "Go, GOMAXPROCS=1", Ref("go_fib1", "go_fib_ms"))]),
         Figure("fib_2p", f"fib({n}), cutoff 20, 2 Ps", "ms", True,
                Ref("weft_fib2", "weft_fib_ms"), [Peer("Go", "Go, GOMAXPROCS=2", Ref("go_fib2", "go_fib_ms"))]),
         Figure("fib_speedup", f"fib({n}) speedup 1 -> 2 Ps", "x", False,
                Ref("weft_fib1", "weft_fib_ms", div=Ref("weft_fib2", "weft_fib_ms")),
                [Peer("Go", "Go, GOMAXPROCS=1 / GOMAXPROCS=2",
                      Ref("go_fib1", "go_fib_ms", div=Ref("go_fib2", "go_fib_ms")))],
                headline=True)],
        "fib(n) starts a task for fib(n-1) when n > 20, computes fib(n-2) itself and joins. "
        "The wall times compare compilers as much as runtimes (gcc -O2 against Go's "
        "compiler on the serial leaves); the speedup from 1 to 2 Ps is the runtime "
        "figure (2.0 is perfect).  Each run makes one untimed warm-up call (the "
        "second thread's start, the first touch of the stacks) and reports the median "
        "of 9 timed calls.  The speedup is computed per round "
        "(1-P time / 2-P time of the same round), then the median is taken."))

    # ---- sleep-heavy --------------------------------------------------------
    d = sz(2, 0.5)
    out.append(Bench(
        "sleep", "Sleep-heavy",
        [Side("weft_sleep", "weft", [f"{W}/sleep", 100_000, d], timeout=3 * d + 10),
         Side("go_sleep", "Go", [f"{G}/sleep", "-g", 100_000, "-d", d], timeout=3 * d + 10)],
        [Figure("sleep", "100k tasks sleeping 10 ms in a loop: CPU per wakeup, 2 Ps",
                "us", True, Ref("weft_sleep", "weft_sleep_cpu_us_per_wakeup"),
                [Peer("Go", "Go time.Sleep", Ref("go_sleep", "go_sleep_cpu_us_per_wakeup"))],
                headline=True),
         Figure("sleep_rate", "100k tasks sleeping 10 ms in a loop: wakeups per second",
                "wakeups/s", False,
                Ref("weft_sleep", "wakeups", div=Ref("weft_sleep", "secs")),
                [Peer("Go", "Go time.Sleep", Ref("go_sleep", "wakeups", div=Ref("go_sleep", "secs")))])],
        f"100,000 tasks each sleep 10 ms in a loop for {d} s; process CPU time (user + "
        "system, getrusage) per wakeup.  10M wakeups/s would be needed to keep every task "
        "on time, more than two cores can do, so both runtimes run flat out and the "
        "figure is the CPU cost of a timer wakeup under load."))

    # ---- an unmodified pthread program, preloaded -----------------------
    n = sz(10_000, 1_000)
    out.append(Bench(
        "sleep_pthreads", "Sleeping pthreads, preloaded",
        [Side("weft_pre_sleep", "weft", [f"{P}/sleep_pthreads", n],
              {"LD_PRELOAD": preload}, needs=[f"{P}/sleep_pthreads", preload]),
         Side("native_sleep", "pthreads", [f"{P}/sleep_pthreads", n])],
        [Figure("sleep_pthreads", f"{human_count(n)} pthreads each sleep(1): wall time",
                "ms", True, Ref("weft_pre_sleep", "sleep_pthreads_wall_ms"),
                [Peer("pthreads", "the same binary, native threads",
                      Ref("native_sleep", "sleep_pthreads_wall_ms"))],
                weft_label="weft preloaded")],
        "An unmodified pthread program (bench/peers/sleep_pthreads.c) run natively and "
        "under weft's LD_PRELOAD shim: wall time until all threads have slept 1 s and "
        "been joined (1000 ms is ideal).", warm=0 if quick else 1))

    # ---- signals to threads, preloaded ------------------------------------
    sl = f"{B}/bench/siglat"
    out.append(Bench(
        "signals", "Signals to threads, preloaded",
        [Side("weft_pre_siglat", "weft", [sl], {"LD_PRELOAD": preload, "WEFT_MAXPROCS": 2},
              needs=[sl, preload], timeout=300),
         Side("native_siglat", "pthreads", [sl], timeout=300)],
        [Figure("siglat_parked", "pthread_kill to handler start, thread parked in read",
                "us", True, Ref("weft_pre_siglat", "parked_median_us"),
                [Peer("pthreads", "the same binary, native threads",
                      Ref("native_siglat", "parked_median_us"))], weft_label="weft preloaded"),
         Figure("siglat_spin", "pthread_kill to handler start, thread computing",
                "us", True, Ref("weft_pre_siglat", "spin_median_us"),
                [Peer("pthreads", "the same binary, native threads",
                      Ref("native_siglat", "spin_median_us"))], weft_label="weft preloaded"),
         Figure("siglat_pingpong_nohandler", "read/write round trip, no handler installed",
                "ns", True, Ref("weft_pre_siglat", "pingpong_nohandler_ns"),
                [Peer("pthreads", "the same binary, native threads",
                      Ref("native_siglat", "pingpong_nohandler_ns"))],
                weft_label="weft preloaded"),
         Figure("siglat_pingpong_handler", "read/write round trip, a handler installed",
                "ns", True, Ref("weft_pre_siglat", "pingpong_handler_ns"),
                [Peer("pthreads", "the same binary, native threads",
                      Ref("native_siglat", "pingpong_handler_ns"))],
                weft_label="weft preloaded")],
        "An unmodified pthread program (bench/siglat.c) run natively and under weft's "
        "LD_PRELOAD shim on 2 Ps: median time from pthread_kill to the first instruction "
        "of the handler on a thread parked in read() and on one computing in "
        "`while (!flag) ;` (1,000 rounds each), and a byte's round trip between two "
        "threads over a socket pair with no handler installed, then with one installed "
        "and never sent (what signal support costs a blocking call).",
        warm=0, runs=1 if quick else 3))

    # ---- TCP echo -------------------------------------------------------
    conns = [100, 1000] if quick else [100, 1000, 10_000]
    dsecs, wsecs = sz(2, 1), sz(1, 0.5)
    servers = [
        ("weft_linked", "weft", "weft", [f"{W}/echo_server"], {"WEFT_MAXPROCS": 1}, None),
        ("weft_preload", "weft", "weft-preload", [f"{B}/examples/echo_threads"],
         {"LD_PRELOAD": preload, "WEFT_MAXPROCS": 1}, [f"{B}/examples/echo_threads", preload]),
        ("threads", "pthreads", "threads", [f"{B}/examples/echo_threads"], {}, None),
        ("go", "Go", "go", [f"{G}/echo"], {"GOMAXPROCS": 1}, None),
        ("epoll", "epoll", "epoll", [f"{B}/bench/epoll_echo"], {}, None),
    ]
    for c in conns:
        k = human_count(c)
        sides = []
        for sid, impl, name, argv, env, needs in servers:
            server = (["env"] + [f"{a}={v}" for a, v in env.items()] if env else []) + argv
            sides.append(Side(
                f"echo_{sid}_{k}", impl,
                ["bench/echo_server_run.sh", "-n", name, "-c", c, "-d", dsecs, "-w", wsecs, "--"]
                + server,
                needs=(needs or argv[:1]) + [f"{B}/bench/loadgen"], timeout=120))
        figs = []
        for key, what, unit, lower in (("msgs_per_sec", "throughput", "msgs/s", False),
                                       ("p99_us", "p99 latency", "us", True),
                                       ("cpu_us_per_msg", "server CPU per message", "us", True)):
            peers = [Peer("pthreads", "examples/echo_threads, native threads",
                          Ref(f"echo_threads_{k}", key)),
                     Peer("Go", "Go net, goroutine per connection, GOMAXPROCS=1",
                          Ref(f"echo_go_{k}", key)),
                     Peer("epoll", "hand-written epoll loop", Ref(f"echo_epoll_{k}", key))]
            # linked weft against every peer; preloaded against the same binary
            # run natively (the other peers are in the linked row just above)
            for variant, label, ps in (("linked", "weft linked", peers),
                                       ("preload", "weft preloaded", peers[:1])):
                figs.append(Figure(
                    f"echo_{key}_{k}_{variant}", f"TCP echo {k} conns: {what}", unit, lower,
                    Ref(f"echo_weft_{variant}_{k}", key), ps, weft_label=label,
                    headline=(key == "msgs_per_sec" and c == 1000) or
                             (key == "cpu_us_per_msg" and c == 1000 and variant == "linked"),
                    plot=("echo", key, c)))
        out.append(Bench(
            f"echo_{k}", f"TCP echo, {k} connections", sides, figs,
            f"{c} connections, each a closed loop of 64-byte messages (bench/loadgen.c); "
            f"{wsecs} s warm-up inside every run, then {dsecs} s measured.  The server is "
            "pinned to CPU 0 with one P / GOMAXPROCS=1, the load generator to CPU 1 "
            "(bench/echo_server_run.sh).  Server CPU is utime+stime of the server process "
            "over the measured interval.  weft linked: bench/weft/echo_server, a G per "
            "connection; weft preloaded: the unmodified thread-per-connection "
            "examples/echo_threads under LD_PRELOAD=libweft_preload.so.",
            warm=0, runs=1 if quick else None))
    return out


# ---------------------------------------------------------------------------
# running


def child_env(side):
    env = dict(os.environ)
    for k in ("QUICK", "GOMAXPROCS", "WEFT_MAXPROCS", "LD_PRELOAD", "GODEBUG"):
        env.pop(k, None)
    env["BUILD"] = BUILD
    env.update({k: str(v) for k, v in side.env.items()})
    return env


def parse_kv(text):
    """The last line of output that looks like key=value pairs."""
    for line in reversed(text.strip().splitlines()):
        kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if kv:
            return kv
    return None


def run_side(side):
    """Run one command once; returns (dict or None, error string or None)."""
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(side.argv, cwd=ROOT, env=child_env(side), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                             start_new_session=True)
    except OSError as e:
        return None, str(e)
    try:
        out, err = p.communicate(timeout=side.timeout)
    except subprocess.TimeoutExpired:
        # SIGQUIT first: a weft program then prints every G and its
        # backtrace (a Go one its goroutines); keep that for a post-mortem
        try:
            os.kill(p.pid, signal.SIGQUIT)
            out, err = p.communicate(timeout=5)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            kill_group(p)
            out, err = p.communicate()
        kill_group(p)  # anything left in its process group
        side.seconds += time.monotonic() - t0
        hang = ROOT / BUILD / "bench" / "hangs" / f"{side.sid}-{time.strftime('%H%M%S')}.txt"
        hang.parent.mkdir(parents=True, exist_ok=True)
        hang.write_text(f"$ {side.cmdline()}\n# timed out after {side.timeout} s\n"
                        f"--- stdout\n{out}\n--- stderr\n{err}\n")
        return None, f"timed out after {side.timeout} s (dump: {os.path.relpath(hang, ROOT)})"
    except BaseException:
        kill_group(p)
        raise
    side.seconds += time.monotonic() - t0
    kv = parse_kv(out)
    if p.returncode != 0:
        msg = (err.strip().splitlines() or ["(no stderr)"])[-1][:200]
        if kv is None:
            return None, f"exit {p.returncode}: {msg}"
        # the echo script prints its line even when some connection failed
        return kv, f"exit {p.returncode}: {msg}"
    if kv is None:
        return None, "no key=value output"
    return kv, None


def kill_group(p):
    """TERM, then KILL, the process group we started for p (its own session)."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, None)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def cpu_busy():
    """(busy CPU seconds of the whole machine, CPU seconds of our reaped children)"""
    busy = 0.0
    try:
        with open("/proc/stat") as fh:
            f = fh.readline().split()
        # user nice system idle iowait irq softirq steal
        busy = (sum(int(x) for x in f[1:4]) + sum(int(x) for x in f[6:9])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy, ru.ru_utime + ru.ru_stime


QUIET = {"budget": 0.0}  # seconds we may still spend waiting for a quiet machine


def other_load(secs=1.0):
    """Share of the CPUs that processes other than ours use, over secs."""
    b0, o0 = cpu_busy()
    time.sleep(secs)
    b1, o1 = cpu_busy()
    return max(0.0, (b1 - b0) - (o1 - o0)) / (secs * (os.cpu_count() or 1))


def wait_quiet():
    """Before a benchmark: if other processes keep the CPUs busy, wait a
    little (from a budget for the whole run) for them to finish."""
    if QUIET["budget"] <= 0:
        return
    load = other_load(0.5)
    if load < 0.25:
        return
    t0 = time.monotonic()
    print(f"        (other processes use {load:.0%} of the CPUs; waiting up to "
          f"{QUIET['budget']:.0f} s for a quieter machine)", end="", flush=True)
    while QUIET["budget"] > 0:
        load = other_load(2.0)
        QUIET["budget"] -= 2.0
        if load < 0.25:
            break
    print(f" waited {time.monotonic() - t0:.0f} s, now {load:.0%}", flush=True)


def run_bench(b, runs, idx, total):
    wait_quiet()
    t0 = time.monotonic()
    busy0, ours0 = cpu_busy()
    runnable = []
    for s in b.sides:
        miss = s.missing()
        if miss:
            s.status = "not built"
            s.errors.append("missing " + ", ".join(miss))
        else:
            runnable.append(s)
    nruns = b.runs or runs
    head = f"[{idx:2d}/{total}] {b.title:<34}"
    print(head, end="", flush=True)
    for r in range(b.warm + nruns):
        for s in runnable:
            kv, err = run_side(s)
            if err:
                s.errors.append(f"run {r + 1}: {err}")
            if r >= b.warm:
                s.samples.append(kv)
            print("." if kv and not err else ("!" if kv else "x"), end="", flush=True)
    for s in runnable:
        good = sum(1 for k in s.samples if k)
        if good == len(s.samples) and not s.errors:
            s.status = "ok"
        elif good == 0:
            s.status = "failed: " + (s.errors[-1] if s.errors else "?")
        else:
            s.status = f"partial: {len(s.errors)} problem run(s): " + s.errors[-1]
    b.seconds = time.monotonic() - t0
    busy1, ours1 = cpu_busy()
    if b.seconds > 0 and busy1 > busy0:
        # CPU the rest of the machine used meanwhile, as a share of all cores
        b.foreign = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / (b.seconds * (os.cpu_count() or 1))
    print(f" {b.seconds:6.1f} s" + (f"  (other processes: {b.foreign:.0%} of the CPUs)"
                                     if b.foreign is not None and b.foreign >= 0.05 else ""),
          flush=True)
    for f in b.figures:
        print("        " + summary_line(f), flush=True)


# ---------------------------------------------------------------------------
# figures from samples

SIDES = {}


def ref_values(ref):
    """Per-run values of a Ref (None where a run gave nothing)."""
    s = SIDES.get(ref.sid)
    if s is None or not s.samples:
        return []
    vals = [key_value(kv, ref.key) for kv in s.samples]
    vals = [v * ref.scale if v is not None else None for v in vals]
    if ref.div:
        dv = ref_values(ref.div)
        vals = [a / b if a is not None and b else None for a, b in zip(vals, dv)]
    return vals


def key_value(kv, key):
    if not kv:
        return None
    for k, v in kv.items():
        if re.fullmatch(key, k):
            try:
                x = float(v)
            except ValueError:
                return None
            return x if x == x else None  # nan
    return None


def ref_status(ref):
    s = SIDES.get(ref.sid)
    st = s.status if s else "not run"
    if ref.div:
        d = ref_status(ref.div)
        if d != "ok" and st == "ok":
            st = d
    return st


def cell(ref):
    """(median or None, values, status)"""
    vals = [v for v in ref_values(ref) if v is not None]
    med = statistics.median(vals) if vals else None
    return med, vals, ref_status(ref)


def ratio(weft, peer):
    if weft is None or peer is None or peer == 0:
        return None
    return weft / peer


def verdict(fig, r):
    if r is None:
        return ""
    worse = r > 1.05 if fig.lower else r < 0.95
    better = r < 0.95 if fig.lower else r > 1.05
    return "behind" if worse else ("ahead" if better else "on par")


def fmt(v, unit=""):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1e9:
        s = f"{v / 1e9:.3g} G"
    elif a >= 1e6:
        s = f"{v / 1e6:.3g} M"
    elif a >= 1e4:
        s = f"{v / 1e3:.3g} k"
    elif a >= 100:
        s = f"{v:.0f}"
    elif a >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.2f}"
    return f"{s} {unit}".replace("  ", " ").strip() if unit else s.strip()


def fmt_ratio(r):
    if r is None:
        return "-"
    return f"{r:.3g}x" if r < 100 else f"{r:.0f}x"


def status_word(st):
    if st.startswith("not built"):
        return "not built"
    if st.startswith("failed"):
        return "failed"
    if st == "pending":
        return "not run"
    return st.split(":")[0]


def summary_line(f):
    med, _, st = cell(f.weft)
    parts = [f"{f.weft_label} " + (fmt(med, f.unit) if med is not None else status_word(st))]
    for p in f.peers:
        pm, _, pst = cell(p.ref)
        txt = fmt(pm, f.unit) if pm is not None else status_word(pst)
        r = ratio(med, pm)
        parts.append(f"{p.column} {txt}" + (f" ({fmt_ratio(r)})" if r else ""))
    return f"{f.title}: " + " | ".join(parts)


# ---------------------------------------------------------------------------
# machine description


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except Exception:
        return ""


def machine():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    boost = sh("sed -n 's/^#define BOOST_LIB_VERSION \"\\(.*\\)\"/\\1/p' /usr/include/boost/version.hpp")
    virt = sh("systemd-detect-virt 2>/dev/null") or ""
    rev = sh("git rev-parse --short HEAD")
    if rev and sh("git status --porcelain --untracked-files=no"):
        rev += " (with uncommitted changes)"
    return [
        ("CPU", model or platform.processor() or "?"),
        ("cores", f"{os.cpu_count()} online" + (f" ({virt})" if virt and virt != "none" else "")),
        ("memory", mem),
        ("kernel", f"Linux {platform.release()}"),
        ("C compiler", sh("${CC:-cc} --version | head -n1")),
        ("Go", sh("go version")),
        ("Boost", boost.replace("_", ".")),
        ("weft", f"git {rev}" if rev else "?"),
    ]


FLOOR_KEYS = [("syscall_ns", "system call", "ns"), ("clock_ns", "vDSO clock", "ns"),
              ("fault_us", "first-touch page", "us"), ("populate_us", "bulk-populated page", "us"),
              ("touch_us", "first user write to a populated page", "us"),
              ("scatter_us", "the same, pages 256 KiB apart (a parked G's stack top)", "us"),
              ("fsload_ns", "FS base load (wrfsbase if fsgsbase is 1, else arch_prctl)", "ns"),
              ("fsgsbase", "FSGSBASE (1: the kernel allows wrfsbase)", "")]


def floors():
    """The machine's floors now (bench/floors.c): {key: value}, {} if not built."""
    exe = ROOT / BUILD / "bench" / "floors"
    if not exe.exists():
        return {}
    return {k: float(v) for k, v in (parse_kv(sh(str(exe))) or {}).items()}


def floors_text(before, after):
    return "; ".join(f"{label} {before.get(k, float('nan')):.3g} / {after.get(k, float('nan')):.3g} {u}"
                     for k, label, u in FLOOR_KEYS if k in before or k in after)


# ---------------------------------------------------------------------------
# outputs: CSV


def write_csv(path, benches, stamp, mode, fl=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["date", "mode", "benchmark", "figure_id", "figure", "unit", "better",
                    "impl", "label", "median", "runs", "samples", "weft_over_peer", "status",
                    "command"])
        for b in benches:
            for f in b.figures:
                wm, wv, wst = cell(f.weft)
                rows = [("weft", f.weft_label, f.weft, wm, wv, wst, None)]
                for p in f.peers:
                    pm, pv, pst = cell(p.ref)
                    rows.append((p.column, p.label, p.ref, pm, pv, pst, ratio(wm, pm)))
                for impl, label, ref, m, vals, st, r in rows:
                    w.writerow([stamp, mode, b.bid, f.fid, f.title, f.unit,
                                "lower" if f.lower else "higher", impl, label,
                                "" if m is None else f"{m:.6g}", len(vals),
                                " ".join(f"{v:.6g}" for v in vals),
                                "" if r is None else f"{r:.4g}", status_word(st),
                                ref_command(ref)])
        # the machine's floors, measured before and after the benchmarks
        for when, vals in (fl or {}).items():
            for k, label, u in FLOOR_KEYS:
                if k in vals:
                    w.writerow([stamp, mode, "floor", k, f"{label} ({when})", u, "lower",
                                "machine", "", f"{vals[k]:.6g}", 1, f"{vals[k]:.6g}", "", "ok",
                                f"{BUILD}/bench/floors"])


def ref_command(ref):
    s = SIDES.get(ref.sid)
    c = s.cmdline() if s else "?"
    if ref.div:
        c += "  /  " + ref_command(ref.div)
    return c


# ---------------------------------------------------------------------------
# outputs: plots

GNUPLOT_HEAD = """set terminal pngcairo size 820,470 font ",10"
set output '{out}'
set title '{title}'
set grid ytics
set key top left
"""


def gp_str(s):
    return s.replace("'", "")


def bar_plot(out, title, ylabel, bars, log=True):
    """bars: list of (label, value)"""
    bars = [(lab, v) for lab, v in bars if v is not None and v > 0]
    if not bars:
        return False
    dat = out.with_suffix(".dat")
    with open(dat, "w") as fh:
        for lab, v in bars:
            color = 0xdd7733 if lab.startswith("weft") else 0x4477aa
            fh.write(f'"{lab}" {v:.6g} {color}\n')
    script = GNUPLOT_HEAD.format(out=out, title=gp_str(title)) + f"""
set ylabel '{ylabel}'
set style fill solid 0.7 border -1
set boxwidth 0.6
set xtics rotate by -20 nomirror
set key off
{"set logscale y" if log else "set yrange [0:*]"}
set yrange [{min(v for _, v in bars) / 3 if log else 0}:{max(v for _, v in bars) * (4 if log else 1.2)}]
plot '{dat}' using 0:2:3:xtic(1) with boxes lc rgb variable, \\
     '' using 0:2:($2 >= 100 ? sprintf('%.0f', $2) : sprintf('%.3g', $2)) with labels offset 0,0.8 notitle
"""
    return gnuplot(script)


SERIES_COLOR = {"weft": "#dd7733", "weft linked": "#dd7733", "weft preloaded": "#aa3377",
                "Go": "#4477aa", "pthreads": "#228833", "threads (native)": "#228833",
                "epoll": "#555555"}


def line_plot(out, title, xlabel, ylabel, series, logx=True, logy=False):
    """series: list of (name, [(x, y)])"""
    series = [(n, [(x, y) for x, y in pts if y is not None and y > 0]) for n, pts in series]
    series = [(n, pts) for n, pts in series if pts]
    if not series:
        return False
    dat = out.with_suffix(".dat")
    with open(dat, "w") as fh:
        for n, pts in series:
            fh.write(f"# {n}\n")
            for x, y in pts:
                fh.write(f"{x} {y:.6g}\n")
            fh.write("\n\n")
    plots = ", ".join(f"'{dat}' index {i} using 1:2 with linespoints lw 2 pt 7 "
                      f"lc rgb '{SERIES_COLOR.get(n, '#000000')}' title '{gp_str(n)}'"
                      for i, (n, _) in enumerate(series))
    xs = sorted({x for _, pts in series for x, _ in pts})
    script = GNUPLOT_HEAD.format(out=out, title=gp_str(title)) + f"""
set xlabel '{xlabel}'
set ylabel '{ylabel}'
{"set logscale x" if logx else ""}
{"set logscale y" if logy else "set yrange [0:*]"}
set xrange [{xs[0] / 1.5}:{xs[-1] * 1.5}]
set xtics ({", ".join(f'"{human_count(x)}" {x}' for x in xs)})
set key outside right
plot {plots}
"""
    return gnuplot(script)


def gnuplot(script):
    try:
        p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"bench: gnuplot: {e}", file=sys.stderr)
        return False
    if p.returncode != 0:
        print(f"bench: gnuplot failed: {p.stderr.strip()[:400]}", file=sys.stderr)
        return False
    return True


def make_plots(benches, imgdir):
    imgdir.mkdir(parents=True, exist_ok=True)
    for old in list(imgdir.glob("*.png")) + list(imgdir.glob("*.dat")):
        old.unlink()
    figs = {f.fid: f for b in benches for f in b.figures}
    made = []

    def med(ref):
        return cell(ref)[0]

    # context switch: bars
    f = figs.get("switch")
    if f:
        bars = [("weft yield", med(f.weft))] + [(p.column, med(p.ref)) for p in f.peers]
        if bar_plot(imgdir / "switch.png", "Context switch, one core (ns, lower is better)",
                    "ns per switch (log)", bars):
            made.append(("switch.png", "Context switch cost (log scale)"))
    # spawn: bars
    bars, rest = [], []
    for fid, suffix in (("spawn1", "1 P"), ("spawn2", "2 Ps")):
        f = figs.get(fid)
        if f:
            bars.append((f"weft {suffix}", med(f.weft)))
            bars += [(f"Go {suffix}", med(p.ref)) for p in f.peers if p.column == "Go"]
            rest += [(p.column, med(p.ref)) for p in f.peers if p.column != "Go"]
    bars += rest
    if bar_plot(imgdir / "spawn.png", "Spawn + exit (ns per task, lower is better)",
                "ns per task (log)", bars):
        made.append(("spawn.png", "Spawn + exit cost (log scale)"))
    # parked: RSS per task vs count
    pts = {}
    for f in figs.values():
        if isinstance(f.plot, tuple) and f.plot[0] == "parked":
            c = f.plot[1]
            pts.setdefault("weft", []).append((c, med(f.weft)))
            for p in f.peers:
                pts.setdefault(p.column, []).append((c, med(p.ref)))
    if line_plot(imgdir / "parked_rss.png", "Memory per parked task (RSS growth / task)",
                 "parked tasks", "bytes per task",
                 [(n, sorted(v)) for n, v in pts.items()], logy=True):
        made.append(("parked_rss.png", "RSS per parked task vs number of tasks"))
    # echo
    for key, fname, title, ylabel, logy in (
            ("msgs_per_sec", "echo_throughput.png", "TCP echo throughput (higher is better)",
             "messages / s", False),
            ("p99_us", "echo_p99.png", "TCP echo p99 round-trip latency (lower is better)",
             "p99 (us, log)", True),
            ("cpu_us_per_msg", "echo_cpu.png", "TCP echo server CPU per message (lower is better)",
             "server CPU us / message", False)):
        series = {}
        for f in figs.values():
            if isinstance(f.plot, tuple) and f.plot[0] == "echo" and f.plot[1] == key:
                c = f.plot[2]
                series.setdefault(f.weft_label, []).append((c, med(f.weft)))
                if f.weft_label == "weft linked":
                    for p in f.peers:
                        name = {"pthreads": "threads (native)", "Go": "Go", "epoll": "epoll"}[p.column]
                        series.setdefault(name, []).append((c, med(p.ref)))
        if line_plot(imgdir / fname, title, "connections", ylabel,
                     [(n, sorted(v)) for n, v in series.items()], logy=logy):
            made.append((fname, title))
    for dat in imgdir.glob("*.dat"):
        dat.unlink()
    return made


# ---------------------------------------------------------------------------
# outputs: markdown

# Why weft is behind, by (figure id regex, peer column).  Printed only when
# the measurement says weft is behind that peer.
WHY = [
    (r"switch", "Boost.Context",
     "jump_fcontext only swaps registers and stacks: no scheduler, no run queue, no "
     "bookkeeping.  weft_yield puts the G on its P's run queue, picks the next G and "
     "updates both Gs' states around the same kind of register switch (arch/x86_64/"
     "switch.S), as Gosched does.  Boost.Context is the floor, not a competitor: no "
     "scheduler can reach it."),
    (r"spawn1", "Boost.Fiber|pthreads",
     "Not the same shape of test: the Boost.Fiber and pthreads peers create and join one "
     "task at a time, so a single stack is reused, hot in the cache, from the allocator.  "
     "weft and Go start all N tasks before the first one runs (one P), so N stacks and "
     "descriptors are live at once; Go is the like-for-like peer."),
    (r"spawn1", "Go",
     "With one P all N Gs exist before the first one runs, so N stacks are live at once.  "
     "weft keeps 4096 free stacks with their memory (POOL_BUDGET in runtime/stack.c) and, "
     "past twice that, unmaps chunks whose stacks are all free, so the measured round maps "
     "new chunks and commits fresh stacks again (mmap, mprotect for guard pages, "
     "madvise(MADV_POPULATE_WRITE)): perf stat puts about 60 % of weft's CPU time in the "
     "kernel here, about a third of Go's.  Go keeps dead goroutines with their 2 KiB "
     "stacks on free lists and reuses them without a system call."),
    (r"spawn2", "Go",
     "With two Ps the stacks are recycled (few system calls: strace counts about one futex "
     "call per 60 Gs), so the cost is in user space: perf puts about a quarter of the time "
     "in weft_go_attr itself and about a tenth in the global run queue and its lock "
     "(globrunqget, lock), which the consumer P takes Gs from; Go's newproc takes a G from "
     "a per-P free list and queues it on the per-P run queue without a lock."),
    (r"parked_rss_.*", "Go",
     "A weft G's stack is a fixed slot of virtual memory (256 KiB by default) whose top "
     "page is committed when the G is made: 4 KiB, the smallest unit the kernel hands out "
     "(two pages when the initial frames straddle a page boundary), plus the descriptor "
     "of a few hundred bytes.  Go starts goroutines on 2 KiB stacks carved from its heap "
     "and grows them by copying, which it can do because it knows every pointer into a "
     "stack; C code cannot be moved that way, so one 4 KiB page per parked G is "
     "weft's floor."),
    (r"parked_create_.*", "Go",
     "Every new weft stack costs system calls: madvise(MADV_POPULATE_WRITE) to commit its "
     "top page, and an mmap plus one mprotect per guard page for every 16 (guard-page "
     "chunks) or 256 (canary chunks) stacks; the kernel time (page allocation and "
     "zeroing, VMA splits) dominates: /usr/bin/time shows ~90 % system time for 1M "
     "parked Gs.  Go carves 2 KiB stacks from heap spans it already has, with no "
     "system call per goroutine."),
    (r"parked_create_.*", "floor",
     "The floor is a plain loop writing one byte to each task's page, 256 KiB apart, "
     "on 2 threads: no scheduler, no descriptor.  weft's G adds its descriptor, its "
     "run-queue trips and its park to that page's first write; on this VM the first "
     "write to a scattered page is a fault of the host's shadow page tables, and "
     "at a million pages it costs several times bench/floors.c's 64-page figure."),
    (r"echo_.*_linked", "Go|pthreads",
     "Cause not established.  It is not system calls: under strace, weft's server makes "
     "one read and one write per message, as few as the epoll loop, where Go's takes an "
     "extra read that fails with EAGAIN on about one message in four.  While the echo "
     "benchmarks ran, other processes used {foreign} of the CPUs and the pinned server "
     "had to share CPU 0 with them: throughput and p99 then measure the server's share "
     "of that core as much as its efficiency (a server with more runnable threads gets "
     "more of it), and server CPU per message is the figure to trust."),
    (r"echo_.*_preload", "pthreads",
     "Per message the preloaded server makes the native server's read and write "
     "(recvfrom and sendto with MSG_DONTWAIT) plus one FS base load: each message wakes "
     "another thread, whose own TLS must be loaded, and without FSGSBASE that is an "
     "arch_prctl system call and a trapped MSR write, ~6 us per message here (28 % of "
     "the server's CPU in a profile; WEFT_TLS=shared is the linked server's cost).  The "
     "native server pays the same MSR write inside the kernel's thread switch (1.1-1.2 "
     "switches per message), so the two meet where that switch costs what the system "
     "call does; the system calls per message and the profile are in \"Preloaded echo: "
     "a message's system calls and CPU\" below.  While the echo benchmarks ran, other "
     "processes used {foreign} of the CPUs."),
    (r"mutex", "pthreads",
     "Cause not established.  Other processes used {foreign} of the CPUs during this "
     "benchmark, and the 8 pthreads then get a larger share of the two CPUs than weft's "
     "two Ms (one per P) do, which can account for a gap of this size; compare on a quiet "
     "machine before reading more into it."),
    (r"echo_.*", "epoll",
     "The hand-written epoll loop is the floor for a single-core server: one thread, no "
     "stacks, no context switches, one epoll_wait for many ready sockets.  A G per "
     "connection adds a park and a wake-up per message (a netpoll round trip and two "
     "context switches) on top of the same read and write system calls."),
]


DEFAULT_WHY = ("Cause not established yet; the commands are given with the benchmark to "
               "reproduce it.")


def why(fid, column):
    for pat, col, text in WHY:
        if re.fullmatch(pat, fid) and re.fullmatch(col, column):
            return text
    return None


def md_table(header, rows, align=None):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join(align or ["---"] * len(header)) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


HEAD_COLS = ["Go", "pthreads", "Boost.Context", "Boost.Fiber", "epoll"]


def arrow(f):
    return "lower is better" if f.lower else "higher is better"


def headline_table(benches, link_prefix):
    rows = []
    for b in benches:
        for f in b.figures:
            if not f.headline:
                continue
            wm, _, wst = cell(f.weft)
            title = f"[{f.title}]({link_prefix}#{b.bid})" + (
                f" ({f.weft_label})" if f.weft_label != "weft" else "")
            row = [title, f"{f.unit}, {'lower' if f.lower else 'higher'} better",
                   f"**{fmt(wm)}**" if wm is not None else status_word(wst)]
            for col in HEAD_COLS:
                ps = [p for p in f.peers if p.column == col]
                if not ps:
                    row.append("")
                    continue
                pm, _, pst = cell(ps[0].ref)
                if pm is None:
                    row.append(status_word(pst))
                else:
                    r = ratio(wm, pm)
                    row.append(fmt(pm) + (f" ({fmt_ratio(r)})" if r else ""))
            rows.append(row)
    return md_table(["Figure", "unit", "weft"] + HEAD_COLS, rows,
                    ["---", "---"] + ["--:"] * (1 + len(HEAD_COLS)))


# The core runtime's figures against the targets of the scheduler work
# (issue 16): figure id, what, target (op, value; "go" compares with the
# Go peer of the same run).  The README and docs/benchmarks.md show them
# with the Go figure and ratio of the same run and the machine's floors.
CORE = [
    ("switch", "yield switch, 2 Gs on 1 P", ("<=", 15)),
    # issue 13: each G its own TLS costs at most 10 ns a switch over shared
    # TLS with FSGSBASE ("+": over the floor column, the shared switch; the
    # load itself is the floors' fsload_ns)
    ("switch_tls", "yield switch, preloaded, own TLS, 1 P", ("+", 10, "floor")),
    ("spawn1", "spawn+exit, 1 P", ("<=", 300)),
    ("spawn2", "spawn+exit, 2 Ps", ("<=", 200)),
    # parked_*: the run's largest count (1M, or 100k with --quick)
    # the third element: the run's own floor for the figure (a peer of that
    # column); a target below it cannot be met on this machine
    ("parked_create_*", "{k} parked Gs: creation per G, 2 Ps", ("<=", 3000, "floor")),
    ("parked_rss_*", "{k} parked Gs: RSS per G", ("<=", 4608)),
    ("parked_faults_per_g_*", "{k} parked Gs: page faults per G", None),
    ("parked_user_ns_per_g_*", "{k} parked Gs: user CPU per G", None),
    ("parked_sys_ns_per_g_*", "{k} parked Gs: system CPU per G", None),
    ("parked_sleep_create_*", "{k} Gs in weft_sleep: creation per G, 2 Ps", ("<=", 3000)),
    ("parked_sleep_threads_*", "{k} Gs in weft_sleep: OS threads while spawning", ("<=", 4)),
    ("chan_pingpong", "unbuffered channel round trip, 1 P", ("<=", 60)),
    ("mutex", "contended mutex, 8 Gs, 2 Ps", ("go", None)),
    ("fib_speedup", "fork-join fib(32), 2 Ps over 1 P", (">=", 1.8)),
]


def core_figure(benches, pat):
    """(bench, figure, count) for a CORE id; "x_*" is the last x_<count>."""
    hit = None
    for b in benches:
        for f in b.figures:
            if f.fid == pat or (pat.endswith("*") and f.fid.startswith(pat[:-1])
                                and "_" not in f.fid[len(pat) - 1:]):
                hit = (b, f, f.fid[len(pat) - 1:] if pat.endswith("*") else "")
    return hit


def core_table(benches, link_prefix):
    """The CORE rows found in this run, or "" if none."""
    rows = []
    for fid, what, target in CORE:
        hit = core_figure(benches, fid)
        if not hit:
            continue
        b, f, k = hit
        what = what.replace("{k}", k)
        wm, wv, wst = cell(f.weft)
        gos = [p for p in f.peers if p.column == "Go"]
        gm = cell(gos[0].ref)[0] if gos else None
        r = ratio(wm, gm)
        met, tgt = "", ""
        if target and target[0] == "go":
            tgt = ">= Go" if not f.lower else "<= Go"
            if r is not None:
                met = "yes" if (r >= 1 if not f.lower else r <= 1) else "**no**"
        elif target and target[0] == "+":
            # at most v over the floor column's figure of the same run
            v = target[1]
            fls = [p for p in f.peers if p.column == target[2]]
            fm = cell(fls[0].ref)[0] if fls else None
            tgt = f"≤ floor + {fmt(v)}"
            if fm is not None:
                tgt += f" (this run's floor: {fmt(fm)})"
                if wm is not None:
                    met = "yes" if wm - fm <= v else f"**no** (+{fmt(wm - fm)})"
        elif target:
            op, v = target[:2]
            tgt = f"{'≤' if op == '<=' else '≥'} {fmt(v)}"
            if wm is not None:
                met = "yes" if (wm <= v if op == "<=" else wm >= v) else "**no**"
            fls = [p for p in f.peers if len(target) > 2 and p.column == target[2]]
            fm = cell(fls[0].ref)[0] if fls else None
            if fm is not None:
                tgt += f" (this run's floor: {fmt(fm)}, weft {fmt_ratio(ratio(wm, fm))} of it)"
                if met == "**no**" and (fm > v if op == "<=" else fm < v):
                    met = "**no**: the floor is past it"
        rng = f" [{fmt(min(wv))}-{fmt(max(wv))}]" if len(wv) > 1 else ""
        rows.append([f"[{what}]({link_prefix}#{b.bid})", f.unit,
                     (fmt(wm) + rng) if wm is not None else status_word(wst),
                     fmt(gm) if gm is not None else "", fmt_ratio(r) if r else "", tgt, met])
    if not rows:
        return ""
    return md_table(["core figure", "unit", "weft median [range]", "Go, same run", "weft/Go",
                     "target", "met"], rows, ["---", "---", "--:", "--:", "--:", "--:", "---"])


# Figures measured by hand (not by make bench): every section of the
# current report whose heading says "(measured by hand)" is carried over
# into the new one as it is, so the text lives in one place (the report).
HAND_MARK = "(measured by hand)"


def hand_sections(path):
    try:
        text = Path(path).read_text()
    except OSError:
        return ""
    out, keep = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            keep = HAND_MARK in line
        if keep:
            out.append(line)
    return "\n".join(out).rstrip() + "\n" if out else ""



def render_md(benches, meta, plots, csv_rel, docs_dir):
    L = []
    a = L.append
    a("# weft benchmarks\n")
    a("<!-- Generated by bench/run.py (make bench); edit bench/run.py, not this file. -->\n")
    a(f"Generated by `{meta['command']}` on {meta['date']} in {meta['wall']:.0f} s"
      f"{' (QUICK mode: fewer runs, smaller counts)' if meta['quick'] else ''}.  "
      f"Raw samples: [`{csv_rel}`]({os.path.relpath(ROOT / csv_rel, docs_dir)}).\n")
    if meta["foreign"] >= 0.25:
        a(f"**Warning: other processes used {meta['foreign']:.0%} of the CPUs during this run "
          "(see each benchmark's share below).  Every figure here is noisier than usual; the "
          "network figures, whose server is pinned to one core, most of all.**\n")
    a("## Machine\n")
    a(md_table(["", ""], meta["machine"]))
    a("")
    a("A shared virtual machine: expect run-to-run noise of 10-20 %, more for the "
      "network and millisecond-scale figures.  Every table entry is the median of its "
      "counted runs, and the min-max range is shown next to it.  During this run other "
      f"processes used {meta['foreign']:.0%} of the CPUs on average (1-minute load "
      f"average {meta['load0']:.1f} at the start); each benchmark below gives its own "
      "share.\n")
    a("## Method\n")
    a(f"* `make bench` builds weft, its benchmark programs (bench/weft/) and the peers "
      f"(bench/peers.mk), installing the peers' Debian packages when missing "
      f"(scripts/deps.sh bench), then runs bench/run.py.")
    a(f"* The commands of one benchmark run alternately -- weft, peer, peer, weft, peer, "
      f"peer, ... -- {meta['warm']} warm-up round that is discarded, then {meta['runs']} "
      f"counted rounds.  The TCP echo runs have no separate warm-up round: each run warms "
      f"up for its first seconds unmeasured and is counted ({meta['echo_runs']} runs).")
    a("* ratio = weft / peer.  Whether that is good depends on the unit: for times, bytes "
      "and CPU, lower is better (ratio < 1 means weft is ahead); for rates and speedups, "
      "higher is better.  \"behind\" / \"ahead\" means by more than 5 %.")
    a("* Each figure lists the exact commands that produced it (run from the repository "
      "root; `VAR=x` is the environment).  Every program prints one line of `key=value` "
      "fields; the key read is given.")
    a("* Go 1.19 runs with GOMAXPROCS set as stated; weft with WEFT_MAXPROCS (or "
      "weft_maxprocs() in the program) the same way.\n")
    a("## Summary\n")
    a(headline_table(benches, ""))
    a("")
    a("Peer cells: the peer's median and, in brackets, weft/peer.\n")
    core = core_table(benches, "")
    if core:
        a("## Core figures against their targets\n")
        a("The core runtime's figures of this run against the targets of the scheduler "
          "work (issue 16), with Go's figure from the same run beside them.  The machine's "
          "floors in the same run (before / after; bench/floors.c): "
          + floors_text((meta.get("floors") or {}).get("before") or {},
                        (meta.get("floors") or {}).get("after") or {})
          + ".  A parked task touches at least one fresh stack page, so its creation "
          "cannot cost less than a bulk-populated page plus the first user write to it "
          "(or, on 2 Ps, half that if both CPUs take them at once); bench/floors.c "
          "measures that on 64 pages, the fastest of many batches.  At the benchmark's "
          "own scale the floor is dearer: the parked row's target cell gives the same "
          "run's `page_touch` (one byte written to each of as many pages, 256 KiB "
          "apart, by 2 threads, nothing else), and weft's figure as a ratio to it.\n")
        a(core)
        a("")
    if plots:
        a("## Plots\n")
        for fname, title in plots:
            a(f"![{title}](img/{fname})\n")

    behind = []
    for b in benches:
        for f in b.figures:
            wm = cell(f.weft)[0]
            for p in f.peers:
                r = ratio(wm, cell(p.ref)[0])
                if verdict(f, r) == "behind":
                    behind.append((b, f, p, r))
    a("## Where weft is behind\n")
    if not behind:
        a("Nowhere in this run.\n")
    else:
        # one bullet per explanation and peer, listing every figure it covers
        groups = {}
        for b, f, p, r in behind:
            text = why(f.fid, p.column)
            _, wv, _ = cell(f.weft)
            _, pv, _ = cell(p.ref)
            if wv and pv and min(wv) <= max(pv) and min(pv) <= max(wv):
                text = ("Within this run's noise: the runs' ranges overlap (weft "
                        f"{fmt(min(wv))}-{fmt(max(wv))}, peer {fmt(min(pv))}-{fmt(max(pv))})."
                        + (f"  {text}" if text else ""))
            text = text or DEFAULT_WHY
            if "{foreign}" in text:
                text = text.replace("{foreign}", f"{b.foreign:.0%}" if b.foreign is not None else "?")
            key = (text, p.label)
            groups.setdefault(key, []).append((b, f, r))
        a("Grouped by cause; each item lists the figures (weft/peer, worse by more than "
          "5 %) and why.\n")
        for (text, label), items in groups.items():
            figs = "; ".join(
                f"[{f.title}{' (' + f.weft_label + ')' if f.weft_label != 'weft' else ''}]"
                f"(#{b.bid}) {fmt_ratio(r)}" for b, f, r in items)
            a(f"* **vs {label}** -- {figs}.  \n  {text}")
        a("")
        if any(b.foreign is not None and b.foreign >= 0.25 for b, *_ in behind):
            a("Where other processes were busy (the share is given with each benchmark), a "
              "program with more runnable threads gets a larger share of the CPUs: the "
              "pthreads peers run one thread per task, Go and weft one per P (plus a few "
              "helpers).  Gaps of less than about 20 % in such benchmarks are within the "
              "noise.\n")

    a("## Results\n")
    for b in benches:
        a(f'<a id="{b.bid}"></a>\n')
        a(f"### {b.title}\n")
        a(b.about + "\n")
        runs = (b.runs or meta["runs"])
        busy = (f"; other processes used {b.foreign:.0%} of the CPUs meanwhile"
                if b.foreign is not None else "")
        a(f"Commands ({'no warm-up round' if b.warm == 0 else f'{b.warm} warm-up round'}, "
          f"{runs} counted, alternating; {b.seconds:.1f} s in all{busy}):\n")
        a("```")
        for s in b.sides:
            a(s.cmdline())
        a("```\n")
        rows = []
        for f in b.figures:
            wm, wv, wst = cell(f.weft)
            rows.append([f"{f.title} ({f.unit}, {'lower' if f.lower else 'higher'} better)",
                         f.weft_label, mdval(wm, wv, wst), "", "", keydesc(f.weft)])
            for p in f.peers:
                pm, pv, pst = cell(p.ref)
                r = ratio(wm, pm)
                rows.append(["", p.label, mdval(pm, pv, pst), fmt_ratio(r), verdict(f, r),
                             keydesc(p.ref)])
        a(md_table(["Figure", "implementation", "median [min-max]", "weft/peer", "", "from"],
                   rows, ["---", "---", "--:", "--:", "---", "---"]))
        a("")
        probs = [s for b2 in [b] for s in b2.sides if s.status != "ok"]
        for s in probs:
            a(f"* `{s.sid}`: {s.status}" + (f" ({'; '.join(s.errors[:3])})"
                                             if s.errors and s.status == "not built" else ""))
        if probs:
            a("")
    a(hand_sections(ROOT / "docs" / "benchmarks.md"))
    return "\n".join(L) + "\n"


def mdval(m, vals, st):
    if m is None:
        return status_word(st)
    txt = f"{fmt(m)}"
    if len(vals) > 1:
        txt += f" [{fmt(min(vals))}-{fmt(max(vals))}]"
    if not st.startswith("ok"):
        txt += f" ({status_word(st)})"
    return txt


def keydesc(ref):
    s = SIDES.get(ref.sid)
    prog = s.argv[0] if s else "?"
    if s and s.argv[0] in ("taskset", "env"):
        prog = next((x for x in s.argv if x.startswith(B + "/")), s.argv[0])
    if s and s.argv[0] == "bench/echo_server_run.sh":
        prog = "echo_server_run.sh -n " + s.argv[2]
    d = f"`{os.path.basename(prog) if '/' in prog else prog}` {ref.key.replace('.*', '*')}"
    if ref.scale != 1.0:
        d += f" x {ref.scale:g}"
    if ref.div:
        d += " / " + keydesc(ref.div)
    return d


def readme_section(benches, meta):
    L = ["## Benchmarks", "",
         f"Medians of `{meta['command']}` on {meta['date']} ({meta['cpu']}, "
         f"{os.cpu_count()} cores, Linux {platform.release()}); ratio in brackets = "
         "weft / peer.  Every figure, the commands that produced it, plots, and where "
         "weft is behind and why: [docs/benchmarks.md](docs/benchmarks.md)."
         + (f"  Other processes used {meta['foreign']:.0%} of the CPUs during that run, so "
            "these figures are noisier than usual." if meta["foreign"] >= 0.25 else ""), "",
         headline_table(benches, "docs/benchmarks.md"), ""]
    fl = meta.get("floors") or {}
    if fl.get("before"):
        L += ["The machine's floors in the same run (before / after; bench/floors.c): "
              + floors_text(fl["before"], fl.get("after") or {}) + ".  Read a figure "
              "as a ratio to these and to the peer beside it: machines of the same kind "
              "differ most in the cost of a first-touched page.", ""]
    core = core_table(benches, "docs/benchmarks.md")
    if core:
        L += ["Core figures of the same run against their targets (issue 16):", "", core, ""]
    return "\n".join(L) + "\n"


# ---------------------------------------------------------------------------


def human_count(c):
    c = int(c)
    if c >= 1_000_000 and c % 1_000_000 == 0:
        return f"{c // 1_000_000}M"
    if c >= 1000 and c % 1000 == 0:
        return f"{c // 1000}k"
    return str(c)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    default=os.environ.get("QUICK", "") not in ("", "0"))
    ap.add_argument("--only", help="run only the benchmarks whose id matches this regex")
    ap.add_argument("--list", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--docs", help="directory for benchmarks.md and img/")
    ap.add_argument("--wait-quiet", type=float, metavar="SECS",
                    help="in all, wait at most SECS for other processes to leave the CPUs "
                         "before the benchmarks (default 120, 0 with --quick)")
    ap.add_argument("--render", metavar="RAW.json",
                    help="run nothing: regenerate the CSV, report and plots from the raw "
                         "outputs a previous run saved (build/bench/<mode>-raw.json)")
    args = ap.parse_args()
    raw = None
    if args.render:
        raw = json.loads(Path(args.render).read_text())
        args.quick, args.only = raw["meta"]["quick"], raw["args"]["only"]

    runs, warm = (3, 1) if args.quick else (5, 1)
    QUIET["budget"] = args.wait_quiet if args.wait_quiet is not None else (0 if args.quick else 120)
    benches = benchmarks(args.quick)
    for b in benches:
        for s in b.sides:
            assert s.sid not in SIDES, s.sid
            SIDES[s.sid] = s
    if args.only:
        keep = [b for b in benches if re.search(args.only, b.bid)]
        # benchmarks that borrow a side from another one need it run too
        need = {r.sid for b in keep for f in b.figures for r in refs(f)}
        for b in benches:
            if b not in keep and any(s.sid in need for s in b.sides):
                keep.append(b)
        benches = [b for b in benches if b in keep]
    if args.list:
        for b in benches:
            print(f"# {b.bid}: {b.title}")
            for s in b.sides:
                miss = s.missing()
                print(f"  {s.cmdline()}" + ("   # not built" if miss else ""))
        return 0

    mode = "partial" if args.only else ("quick" if args.quick else "full")
    today = datetime.date.today().isoformat()
    if args.docs:
        docs = Path(args.docs)
    elif mode == "full":
        docs = ROOT / "docs"
    else:
        docs = ROOT / BUILD / "bench" / mode
    docs = docs if docs.is_absolute() else ROOT / docs
    # only full runs go to bench/results/ (committed); the others stay with their report
    csv_path = (ROOT / "bench" / "results" if mode == "full" else docs) / f"{today}.csv"

    raw_path = ROOT / BUILD / "bench" / f"{mode}-raw.json"
    if raw:
        meta = raw["meta"]
        today = meta["date"]
        csv_path = csv_path.with_name(today + csv_path.name[len(datetime.date.today().isoformat()):])
        for b in benches:
            b.seconds, b.foreign = raw["benches"].get(b.bid, (0.0, None))
            for sd in b.sides:
                r = raw["sides"].get(sd.sid)
                if r:
                    sd.status, sd.errors, sd.samples, sd.seconds = (
                        r["status"], r["errors"], r["samples"], r["seconds"])
                else:
                    sd.status = "not run"
    else:
        print(f"bench: {mode} run, {len(benches)} benchmarks, {warm} warm-up + {runs} counted "
              f"rounds each (. ok, ! suspect, x failed)", flush=True)
        fl0 = floors()
        if fl0:
            print("bench: machine floors: " + ", ".join(
                f"{label} {fl0[k]:.3g} {u}" for k, label, u in FLOOR_KEYS if k in fl0), flush=True)
        t0 = time.monotonic()
        busy0, ours0 = cpu_busy()
        load0 = os.getloadavg()[0]
        for i, b in enumerate(benches, 1):
            run_bench(b, runs, i, len(benches))
        wall = time.monotonic() - t0
        busy1, ours1 = cpu_busy()
        foreign = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / (wall * (os.cpu_count() or 1))

        meta = {
            "date": today, "quick": args.quick, "runs": runs, "warm": warm,
            "echo_runs": next((b.runs or runs for b in benches if b.bid.startswith("echo")), runs),
            "wall": wall, "machine": machine(), "foreign": foreign, "load0": load0,
            "command": "make bench" + (" QUICK=1" if args.quick else "")
            + (f" ONLY='{args.only}'" if args.only else ""),
        }
        meta["floors"] = {"before": fl0, "after": floors()}
        if fl0:
            meta["machine"].append(("floors (before / after the run)",
                                    floors_text(fl0, meta["floors"]["after"])))
            print("bench: machine floors after: " + floors_text(fl0, meta["floors"]["after"]))
        meta["cpu"] = meta["machine"][0][1]
        raw_path.parent.mkdir(parents=True, exist_ok=True)
        raw_path.write_text(json.dumps({
            "meta": meta, "args": {"only": args.only},
            "benches": {b.bid: (b.seconds, b.foreign) for b in benches},
            "sides": {sd.sid: {"status": sd.status, "errors": sd.errors, "samples": sd.samples,
                               "seconds": sd.seconds} for b in benches for sd in b.sides},
        }, indent=1))
    wall = meta["wall"]
    write_csv(csv_path, benches, today, mode, meta.get("floors"))
    plots = make_plots(benches, docs / "img")
    docs.mkdir(parents=True, exist_ok=True)
    csv_rel = os.path.relpath(csv_path, ROOT)
    (docs / "benchmarks.md").write_text(render_md(benches, meta, plots, csv_rel, docs))
    section = readme_section(benches, meta)
    sec_path = ROOT / "bench" / "README-section.md" if mode == "full" else docs / "README-section.md"
    sec_path.write_text(section)
    if mode == "full":
        splice_readme(section)
    print(f"bench: {'rendered' if raw else f'done in {wall:.0f} s'}; wrote {csv_rel}, "
          f"{os.path.relpath(docs / 'benchmarks.md', ROOT)}, {len(plots)} plots, "
          f"{os.path.relpath(sec_path, ROOT)}")
    notbuilt = sorted({s.sid for b in benches for s in b.sides if s.status == "not built"})
    failed = sorted({s.sid for b in benches for s in b.sides if s.status.startswith("failed")})
    if notbuilt:
        print("bench: not built: " + " ".join(notbuilt))
    if failed:
        print("bench: failed: " + " ".join(failed))
    return 0


def splice_readme(section):
    """Put the headline table between the README's bench:headline markers."""
    readme = ROOT / "README.md"
    if not readme.exists():
        return
    text = readme.read_text()
    start, end = "<!-- bench:headline -->", "<!-- /bench:headline -->"
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        return
    body = "\n".join(l for l in section.splitlines() if not l.startswith("## "))
    readme.write_text(text[:i + len(start)] + "\n" + body.strip() + "\n" + text[j:])


def refs(f):
    out = []
    for r in [f.weft] + [p.ref for p in f.peers]:
        while r:
            out.append(r)
            r = r.div
    return out


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\nbench: interrupted", file=sys.stderr)
        sys.exit(130)
