"""realpy.py - a Python program of the kind users run: a thread pool,
subprocesses started from many threads at once, a selectors server,
signals (SIGALRM interrupting a blocked main thread, signal.pthread_kill,
set_wakeup_fd), asyncio with an executor, and multiprocessing (fork).
Its output does not depend on timing: it must be byte-for-byte the same
with and without weft (scripts/realprogs.sh, docs/preload.md)."""
import asyncio
import concurrent.futures
import hashlib
import multiprocessing
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time


def pool_hashes():
    def h(i):
        return hashlib.sha256(b"%d" % i * 10000).hexdigest()[:8]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as ex:
        got = list(ex.map(h, range(200)))
    print("pool", hashlib.md5("".join(got).encode()).hexdigest())


def subprocess_from_threads():
    out = [None] * 16

    def run(i):
        r = subprocess.run(["sh", "-c", "echo $0; sleep 0.05; echo done $0 >&2", str(i)],
                           capture_output=True, text=True, timeout=120)
        out[i] = (r.returncode, r.stdout.strip(), r.stderr.strip())
    ts = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("subprocess threads", out)


def selectors_server():
    sel = selectors.DefaultSelector()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(32)
    srv.setblocking(False)
    sel.register(srv, selectors.EVENT_READ)
    port = srv.getsockname()[1]
    results = []

    def client(i):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"line %d\n" % i)
            f = s.makefile("rb")
            results.append(f.readline().strip())
    ts = [threading.Thread(target=client, args=(i,)) for i in range(20)]
    for t in ts:
        t.start()
    served = 0
    while served < 20:
        for key, _ in sel.select(timeout=60):
            if key.fileobj is srv:
                c, _ = srv.accept()
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ)
            else:
                data = key.fileobj.recv(100)
                if data:
                    key.fileobj.sendall(data.upper())
                sel.unregister(key.fileobj)
                key.fileobj.close()
                served += 1
    for t in ts:
        t.join()
    srv.close()
    print("selectors", sorted(results))


def signals():
    hits = []
    signal.signal(signal.SIGALRM, lambda s, f: hits.append("alrm"))
    signal.signal(signal.SIGUSR1, lambda s, f: hits.append("usr1"))
    # a handler runs while the main thread is blocked in a lock wait
    lock = threading.Lock()
    lock.acquire()
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    threading.Timer(0.3, lock.release).start()
    lock.acquire(timeout=60)
    # another thread signals the main thread, which sleeps
    threading.Timer(0.05, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1)).start()
    time.sleep(0.5)
    # set_wakeup_fd: a signal from a child process wakes a select on a socketpair
    r, w = socket.socketpair()
    r.setblocking(False)
    w.setblocking(False)
    old = signal.set_wakeup_fd(w.fileno())
    subprocess.run(["sh", "-c", "kill -USR1 $PPID"])
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)
    woke = bool(sel.select(timeout=60))
    signal.set_wakeup_fd(old)
    print("signals", hits, "wakeup", woke, r.recv(10) == bytes([signal.SIGUSR1]))


def asyncio_with_executor():
    async def main():
        loop = asyncio.get_running_loop()
        rs = await asyncio.gather(*(loop.run_in_executor(None, sum, range(i * 1000)) for i in range(20)))
        srv = await asyncio.start_server(lambda r, w: echo(r, w), "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        got = await asyncio.gather(*(client(port, i) for i in range(10)))
        srv.close()
        await srv.wait_closed()
        p = await asyncio.create_subprocess_exec("sh", "-c", "echo async-child",
                                                 stdout=asyncio.subprocess.PIPE)
        out, _ = await p.communicate()
        return sum(rs), got, out.strip(), p.returncode

    async def echo(r, w):
        w.write((await r.readline()).upper())
        await w.drain()
        w.close()

    async def client(port, i):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"hi %d\n" % i)
        line = await r.readline()
        w.close()
        return line.strip()
    print("asyncio", asyncio.run(main()))


def square(x):
    return x * x


def processes():
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as p:
        print("multiprocessing", sum(p.map(square, range(1000))))
    pid = os.fork()
    if pid == 0:
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        os._exit(7)
    _, st = os.waitpid(pid, 0)
    print("fork child", os.waitstatus_to_exitcode(st))


pool_hashes()
subprocess_from_threads()
selectors_server()
signals()
asyncio_with_executor()
processes()
sys.stdout.flush()
