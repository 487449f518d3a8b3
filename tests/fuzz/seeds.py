#!/usr/bin/env python3
"""seeds.py - write the hook fuzzer's seed corpus (tests/fuzz/corpus/).

Each op is 7 bytes: opcode (| 0x80: task B) and 6 argument bytes, as
tests/fuzz/hookdiff.c decodes them.  One seed per kind of file and per
kind of blocking meeting, so the fuzzer starts from programs that reach
the parking paths instead of finding them by chance."""
import os, sys

OPS = dict(socketpair=0, pipe=1, tcp=2, eventfd=3, timerfd=4, read=5, write=6, shutdown=7,
           close=8, dup=9, fcntl=10, poll=11, select=12, epoll=13, timeo=14, pair=15, fill=16)

def op(name, *a, b=False):
    a = list(a) + [0] * (6 - len(a))
    return bytes([OPS[name] | (0x80 if b else 0)] + a)

# sizes index: 1=1 B, 5=64, 7=1024, 8=4096, 12=65536, 14=131072
seeds = {
    # unix stream: write from B, read in A (plain, readv, recv PEEK/WAITALL)
    "stream_rw": op("socketpair", 0) + op("write", 1, 0, 7, b=True) + op("read", 0, 2, 5)
                 + op("read", 0, 2 | (1 << 2), 5) + op("read", 0, 1, 12),
    # blocking read met by the partner's write, then by its shutdown
    "stream_pair": op("socketpair", 0) + op("pair", 0, 0, 7, 10, 0) + op("pair", 0, 1, 12, 10, 4),
    "stream_waitall": op("socketpair", 0) + op("pair", 0, 1, 3 << 4 | 12, 200, 0),
    "dgram_pair": op("socketpair", 1) + op("pair", 0, 1, 7, 5, 0) + op("write", 1, 2, 3, b=True)
                  + op("read", 0, 2, 1),
    "seq_close": op("socketpair", 2) + op("pair", 0, 0, 7, 1, 6),
    "pipe_pair": op("pipe", 0) + op("pair", 0, 0, 8, 100, 0) + op("pair", 0, 2, 8, 0, 6),
    "pipe_nb": op("pipe", 1) + op("read", 0, 0, 5) + op("fill", 1, 8) + op("write", 1, 0, 8)
               + op("poll", 1, 0x10 | 1) + op("read", 0, 0, 12),
    "tcp": op("tcp", 0) + op("write", 0, 2, 8) + op("read", 1, 2 | (3 << 2), 8)
           + op("pair", 1, 2, 7, 10, 0) + op("shutdown", 0, 1) + op("read", 1, 0, 5),
    "tcp_timeo": op("tcp", 0) + op("timeo", 1, 0 | (1 << 1)) + op("read", 1, 0, 5)
                 + op("fill", 0, 12) + op("timeo", 0, 1 | (1 << 1)) + op("write", 0, 0, 12),
    "eventfd": op("eventfd", 0) + op("pair", 0, 0, 3, 9, 0) + op("eventfd", 2, 2, b=True)
               + op("read", 1, 0, 3) + op("write", 1, 0, 3) + op("poll", 2, 0, 1),
    "timerfd": op("timerfd", 0) + op("pair", 0, 0, 3) + op("timerfd", 3) + op("read", 1, 0, 3)
               + op("pair", 0, 2),
    "dup_fcntl": op("socketpair", 0) + op("dup", 0, 0) + op("fcntl", 2, 1) + op("fcntl", 0, 0)
                 + op("dup", 1, 2, 0x80) + op("dup", 1, 3, 2, 1) + op("close", 0)
                 + op("write", 2, 0, 5) + op("read", 1, 0, 5) + op("fcntl", 3, 3, 1),
    "select_epoll": op("socketpair", 0) + op("pipe", 0) + op("write", 0, 0, 5)
                    + op("select", 2, 0x31, 0x12, 0, 1) + op("epoll", 2, 0x01, 0x32, 0, 2, 1)
                    + op("pair", 2, 3) + op("pair", 1, 4, 5, 3, 0),
    "nonblock_toggle": op("socketpair", 0) + op("fcntl", 0, 1) + op("read", 0, 0, 5)
                       + op("fcntl", 0, 2) + op("timeo", 0, 2) + op("read", 0, 0, 5)
                       + op("fcntl", 0, 3, 1) + op("read", 0, 2 | (2 << 2), 5),
}
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
os.makedirs(out, exist_ok=True)
for k, v in seeds.items():
    with open(os.path.join(out, k), "wb") as f:
        f.write(v)
