# dnsblast.py N W PORT - N A queries for h1..h200.weft.test over UDP, W in flight
# (lost ones sent again after 1 s); prints "answers A bad B" (B: a wrong
# address), queries per second on stderr.  For realprogs.d/unbound.sh.
import socket, struct, sys, time, select
N = int(sys.argv[1]); W = int(sys.argv[2]); port = int(sys.argv[3])
def q(i):
    name = b''.join(bytes([len(p)]) + p for p in (b'h%d' % (i % 200 + 1), b'weft', b'test')) + b'\0'
    return struct.pack('>HHHHHH', i & 0xffff, 0x0100, 1, 0, 0, 0) + name + struct.pack('>HH', 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setblocking(False)
sent = got = bad = 0; inflight = {}; t0 = time.time()
while got + bad < N:
    while sent < N and len(inflight) < W:
        s.sendto(q(sent), ('127.0.0.1', port)); inflight[sent & 0xffff] = (sent, time.time()); sent += 1
    r, _, _ = select.select([s], [], [], 1.0)
    if not r:
        # resend lost (UDP) queries older than 1 s
        now = time.time()
        for k, (i, t) in list(inflight.items()):
            if now - t > 1.0: s.sendto(q(i), ('127.0.0.1', port)); inflight[k] = (i, now)
        continue
    while True:
        try: d = s.recv(4096)
        except BlockingIOError: break
        qid = struct.unpack('>H', d[:2])[0]
        if qid not in inflight: continue
        i, _ = inflight.pop(qid)
        want = bytes([10, 0, (i % 200 + 1) // 256, (i % 200 + 1) % 256])
        if d[-4:] == want: got += 1
        else: bad += 1
dt = time.time() - t0
print("answers %d bad %d" % (got, bad)); print("qps %.0f" % (N / dt), file=sys.stderr)
