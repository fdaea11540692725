"""rawpeer.py - a hand-made drover peer for the capability tests.

usage: rawpeer.py HOST:PORT KEYFILE WHO ROLE INDEX [TYPE LEN [HEX]]

Does the handshake of auth.h as WHO (0 node, 1 client) with ROLE (0 ps,
1 chief, 2 worker, 3 evaluator, 4 coordinator) and INDEX, proving the key
in KEYFILE; then, given TYPE, sends one frame of that type whose header
says LEN payload bytes, followed by HEX's bytes (none by default: a header
alone must be enough for a refusal). Prints one line: "auth-failed" when
the server does not accept the key, else "closed" when the server closes
the connection within 5 s of the frame, "open" when it does not (with the
types of the frames it sent: "open ERROR" ...).
"""
import hashlib, hmac, os, socket, struct, sys

MAGIC = 0x31565244

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            raise EOFError
        b += k
    return b

def frame(t, payload, length=None):
    n = len(payload) if length is None else length
    return struct.pack("<IBBHII", MAGIC, 1, t, 0, 0, n) + payload

def read_frame(s):
    h = recv_exact(s, 16)
    _, _, t, _, _, n = struct.unpack("<IBBHII", h)
    return t, recv_exact(s, n)

def main():
    host, port = sys.argv[1].rsplit(":", 1)
    key = bytes.fromhex(open(sys.argv[2]).read().strip())
    who, role, index = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    s = socket.create_connection((host, int(port)), timeout=5)
    t, hello = read_frame(s)
    assert t == 1, t
    ns, nc = hello[:32], os.urandom(32)
    mac = hmac.new(key, b"drover client" + ns + nc, hashlib.sha256).digest()
    s.sendall(frame(2, nc + mac + struct.pack("<BBI", who, role, index)))
    try:
        t, ok = read_frame(s)
    except (EOFError, OSError):
        print("auth-failed")
        return
    want = hmac.new(key, b"drover server" + nc + ns, hashlib.sha256).digest()
    assert t == 3 and ok == want, "the server did not prove the key"
    if len(sys.argv) < 8:
        print("authenticated")
        return
    typ, length = int(sys.argv[6]), int(sys.argv[7])
    body = bytes.fromhex(sys.argv[8]) if len(sys.argv) > 8 else b""
    s.sendall(frame(typ, body, length))
    seen = []
    try:
        while True:
            t, _ = read_frame(s)
            seen.append({15: "ERROR", 51: "SNAPSHOT"}.get(t, str(t)))
    except socket.timeout:
        print(" ".join(["open"] + seen))
    except (EOFError, OSError):
        print("closed")

main()
