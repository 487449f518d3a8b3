"""corpus.py - an ordinary Python program: threads, locks, queues,
sockets, subprocess and time.sleep.  Its output does not depend on
timing, so it must be byte-for-byte the same with and without weft."""
import hashlib
import queue
import socket
import subprocess
import sys
import threading
import time


def threads_and_locks():
    lock = threading.Lock()
    cond = threading.Condition()
    total = [0]
    ready = [0]

    def work(n):
        for _ in range(2000):
            with lock:
                total[0] += n
        with cond:
            ready[0] += 1
            cond.notify_all()

    ts = [threading.Thread(target=work, args=(i,)) for i in range(20)]
    for t in ts:
        t.start()
    with cond:
        cond.wait_for(lambda: ready[0] == 20, timeout=60)
    for t in ts:
        t.join()
    print("threads total", total[0], "ready", ready[0])


def queue_pipeline():
    q = queue.Queue(maxsize=8)
    out = queue.Queue()

    def producer():
        for i in range(5000):
            q.put(i)
        q.put(None)

    def consumer():
        s = 0
        while True:
            item = q.get()
            if item is None:
                break
            s += item * item
        out.put(s)

    p = threading.Thread(target=producer)
    c = threading.Thread(target=consumer)
    p.start()
    c.start()
    p.join()
    c.join()
    print("queue sum", out.get(timeout=60))


def sockets():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    port = srv.getsockname()[1]

    def serve():
        for _ in range(16):
            conn, _ = srv.accept()
            threading.Thread(target=echo, args=(conn,)).start()

    def echo(conn):
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                conn.sendall(data.upper())

    threading.Thread(target=serve, daemon=True).start()
    digests = []
    lock = threading.Lock()

    def client(i):
        payload = (b"weft-%d-" % i) * (2000 + i * 100)
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        ok = got == payload.upper()
        with lock:
            digests.append((i, ok, hashlib.sha256(got).hexdigest()[:16]))

    cs = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in cs:
        t.start()
    for t in cs:
        t.join()
    for d in sorted(digests):
        print("socket", *d)
    srv.close()


def subprocesses():
    r = subprocess.run(["sh", "-c", "echo from-child; echo err >&2; exit 3"],
                       capture_output=True, text=True)
    print("subprocess", r.returncode, r.stdout.strip(), r.stderr.strip())
    big = subprocess.check_output(["head", "-c", "3000000", "/dev/zero"])
    print("subprocess big", len(big))
    p = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out, _ = p.communicate(b"x" * 1000000)
    print("subprocess cat", len(out), p.returncode)


def sleeps():
    t0 = time.monotonic()
    threads = [threading.Thread(target=time.sleep, args=(0.2,)) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.05)
    took = time.monotonic() - t0
    print("sleep concurrent", 0.25 <= took < 5.0)


threads_and_locks()
queue_pipeline()
sockets()
subprocesses()
sleeps()
sys.stdout.flush()
