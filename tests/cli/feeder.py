"""feeder.py - a minimal external feeder (test_feed.sh): the handshake,
FEED_OPEN, then CSV rows (label last) as FEED_BATCHes under credit,
FEED_END, and the coordinator's FEED_END. Standard library only; the real
client is clients/python.

usage: feeder.py RUN_DIR CSV BATCH [NAME] [--give-up-after N]
prints "FEEDER sent S trained T status C"
"""
import hashlib, hmac, os, socket, struct, sys

MAGIC, VERSION = 0x31565244, 1
HELLO, AUTH, AUTH_OK = 1, 2, 3
FEED_OPEN, FEED_CREDIT, FEED_BATCH, FEED_END = 60, 61, 62, 63


def frame(t, payload):
    return struct.pack("<IBBHII", MAGIC, VERSION, t, 0, 0, len(payload)) + payload


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("connection closed")
        b += c
    return b


def recv_frame(s):
    magic, ver, t, flags, req, n = struct.unpack("<IBBHII", recv_exact(s, 16))
    assert magic == MAGIC and ver == VERSION
    return t, recv_exact(s, n)


def tensor(shape, values):
    return struct.pack("<B", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape) + \
        struct.pack("<%df" % len(values), *values)


def string(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def main():
    run, csv, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    name = sys.argv[4] if len(sys.argv) > 4 else "py"
    give_up = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[5] == "--give-up-after" else -1
    addr = open(os.path.join(run, "coordinator")).read().split()[0]
    host, port = addr.rsplit(":", 1)
    # a feeder steers training: it proves the run's control key (auth.h)
    key = bytes.fromhex(open(os.path.join(run, "control.key")).read().strip())
    s = socket.create_connection((host, int(port)), timeout=30)
    t, p = recv_frame(s)
    assert t == HELLO
    ns, nc = p[:32], os.urandom(32)
    mac = hmac.new(key, b"drover client" + ns + nc, hashlib.sha256).digest()
    s.sendall(frame(AUTH, nc + mac + struct.pack("<BBI", 1, 0, 0)))  # who: a client
    t, p = recv_frame(s)
    assert t == AUTH_OK and hmac.compare_digest(p, hmac.new(key, b"drover server" + nc + ns, hashlib.sha256).digest())
    # window 4, key none, host none, direct 0 (through the coordinator)
    s.sendall(frame(FEED_OPEN, string(name) + struct.pack("<I", 4) + string("") + string("") +
                    struct.pack("<B", 0)))
    rows = [[float(v) for v in l.split(",")] for l in open(csv) if l.strip() and l[0].isdigit()]
    credits, sent, seq, status, trained = 0, 0, 0, None, 0
    i = 0
    while True:
        while credits > 0 and i < len(rows):
            if give_up >= 0 and sent >= give_up:
                s.sendall(frame(FEED_END, struct.pack("<iQ", -1, sent) + string("the source broke")))
                i = len(rows)
                break
            chunk = rows[i:i + batch]
            i += len(chunk)
            seq += 1
            xs = [v for r in chunk for v in r[:-1]]
            ys = [r[-1] for r in chunk]
            body = struct.pack("<QQIB", 0, seq, 1, 0) + tensor([len(chunk), len(chunk[0]) - 1], xs) + \
                tensor([len(chunk)], ys) + struct.pack("<I", 0)  # sparse: no ids
            s.sendall(frame(FEED_BATCH, body))
            credits -= 1
            sent += 1
            if i >= len(rows) and give_up < 0:
                s.sendall(frame(FEED_END, struct.pack("<iQ", 0, sent) + string("")))
        t, p = recv_frame(s)
        if t == FEED_CREDIT:
            c, _, trained = struct.unpack("<IQQ", p[:20])
            credits += c
        elif t == FEED_END:
            status, trained = struct.unpack("<iQ", p[:12])
            break
    print("FEEDER sent %d trained %d status %d" % (sent, trained, status))


main()
