"""pyclient_fake_feed.py - the Python feeder against a coordinator played
by this script (the same codec, the server's side of the handshake): it
grants credit a little at a time and checks that the feeder never sends
beyond it, numbers its batches from 1, sends them whole and in order, ends
with FEED_END, and returns what the coordinator says was trained; a
feeder whose batches raise gives up with DRV_ECANCELLED. PASS/FAIL lines."""
import os
import socket
import sys
import tempfile
import threading

import numpy as np

import drover_client as dc
from drover_client import _wire, auth, wire

KEY = bytes(range(32))
fails = []


def result(name, ok, why=""):
    print(("PASS %s" % name) if ok else "FAIL %s: %s" % (name, why))


def recv(s):
    hdr = b""
    while len(hdr) < 16:
        k = s.recv(16 - len(hdr))
        if not k:
            return None
        hdr += k
    t, _, req, n = wire.decode_header(hdr)
    p = b""
    while len(p) < n:
        k = s.recv(n - len(p))
        if not k:
            return None
        p += k
    return wire.type_name(t), wire.decode_payload(t, p)


def server_handshake(s):
    ns = auth.new_nonce()
    s.sendall(wire.encode("HELLO", {"nonce": ns, "server_kind": False}))
    name, a = recv(s)
    assert name == "AUTH" and a["mac"] == auth.client_mac(KEY, ns, a["nonce"]), "bad AUTH"
    s.sendall(wire.encode("AUTH_OK", {"mac": auth.server_mac(KEY, a["nonce"], ns)}))


def coordinator(lst, log, window, fail_status=None):
    attach, _ = lst.accept()  # the Run's own connection: ATTACH, then quiet
    server_handshake(attach)
    log["attach"] = recv(attach)[0]
    s, _ = lst.accept()
    server_handshake(s)
    name, op = recv(s)
    log["open"] = (name, op)
    outstanding = 0
    s.sendall(wire.encode("FEED_CREDIT", {"credits": window, "sent": 0, "trained": 0, "epochs": 0, "acked": 0}))
    outstanding = window
    seqs, trained = [], 0
    while True:
        m = recv(s)
        if m is None:
            log["closed_early"] = True
            break
        name, f = m
        if name == "FEED_BATCH":
            if outstanding == 0:
                log["over_credit"] = True
            outstanding -= 1
            seqs.append((f["seq"], f["x"].shape, f["y"].shape, float(f["x"][0, 0])))
            trained += 1  # "trains" it at once and gives the credit back
            s.sendall(wire.encode("FEED_CREDIT", {"credits": 1, "sent": len(seqs),
                                                  "trained": trained, "epochs": 0, "acked": 0}))
            outstanding += 1
        elif name == "FEED_END":
            log["end"] = f
            try:  # a feeder that gave up has closed already
                s.sendall(wire.encode("FEED_END", {"status": 0, "batches": trained, "message": ""}))
            except OSError:
                pass
            break
    log["seqs"] = seqs
    s.close()
    attach.close()


def run_case(batches, window, log):
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(2)
    port = lst.getsockname()[1]
    th = threading.Thread(target=coordinator, args=(lst, log, window), daemon=True)
    th.start()
    secret = os.path.join(tempfile.mkdtemp(), "secret")
    with open(secret, "w") as f:
        f.write(KEY.hex() + "\n")
    os.chmod(secret, 0o600)
    try:
        with dc.connect("127.0.0.1:%d" % port, secret_file=secret, timeout=10) as run:
            return run.feed(batches, name="fake", window=window, stall=10)
    finally:
        th.join(10)
        lst.close()


if not dc.feed.supported():
    print("SKIP pyclient-feed fake coordinator: no FEED messages in this drover")
    sys.exit(0)

# t01: 10 batches of 4 rows under a window of 2
rng = np.random.default_rng(1)
data = [(np.full((4, 3), i, np.float32), rng.integers(0, 3, 4)) for i in range(1, 11)]
log = {}
r = run_case(data, 2, log)
result("pyclient-feed-t01 the feeder attached, then opened its feed",
       log.get("attach") == "ATTACH" and log["open"][0] == "FEED_OPEN"
       and log["open"][1] == {"name": "fake", "window": 2, "key": "", "host": "", "direct": False},
       log.get("open"))
result("pyclient-feed-t01 never beyond the credit", not log.get("over_credit"))
result("pyclient-feed-t01 every batch in order, whole",
       log["seqs"] == [(i, (4, 3), (4,), float(i)) for i in range(1, 11)], log["seqs"])
result("pyclient-feed-t01 FEED_END with the count", log["end"]["status"] == 0
       and log["end"]["batches"] == 10, log.get("end"))
result("pyclient-feed-t01 the result is the coordinator's", r == dc.FeedResult(10, 10), r)


# t02: batches that raise: the feed ends cancelled, the error comes back
def bad():
    yield np.zeros((2, 3), np.float32), np.zeros(2)
    raise RuntimeError("disk gone")


log = {}
try:
    run_case(bad(), 1, log)
    result("pyclient-feed-t02 a failing source is re-raised", False, "no error")
except RuntimeError as e:
    result("pyclient-feed-t02 a failing source is re-raised", "disk gone" in str(e), e)
end = log.get("end", {})
result("pyclient-feed-t02 the feed ends cancelled, saying why",
       end.get("status") == _wire.ERRORS["CANCELLED"] and "disk gone" in end.get("message", ""), end)

# t03: a batch whose y does not match x is refused before it is sent
log = {}
try:
    run_case([(np.zeros((3, 2)), np.zeros(2))], 1, log)
    result("pyclient-feed-t03 a y of the wrong length is refused", False, "accepted")
except ValueError as e:
    result("pyclient-feed-t03 a y of the wrong length is refused", "does not match" in str(e), e)
result("pyclient-feed-t03 nothing of it was sent", log.get("seqs") == [], log.get("seqs"))
