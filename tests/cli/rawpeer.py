"""rawpeer.py - a hand-made drover peer for the capability tests.

usage: rawpeer.py HOST:PORT KEYFILE[#SEL] WHO ROLE INDEX [TYPE LEN [HEX]]

Does the handshake of auth.h as WHO (0 node, 1 client) with ROLE (0 ps,
1 chief, 2 worker, 3 evaluator, 4 coordinator) and INDEX, proving the key
in KEYFILE: a file of one key (64 hex digits: control.key, view.key,
secret) or a node's key file (keyring.h: `coord <hex>`, `root <hex>`,
`ps <k> <hex>` lines), whose key SEL picks: coord (the default), root, or
ps.K. SEL `all` is what a thief of the file would do: every key in it,
as it is and as a root to derive the claimed identity's key from
(auth_node_key), one connection each; "authenticated" if any works. A
file of one key gives that key whatever SEL says. Then, given TYPE, sends one frame of that type whose header
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

def load_keys(spec):
    path, _, sel = spec.partition("#")
    lines = open(path).read().split("\n")[:-1]
    if len(lines) == 1 and " " not in lines[0]:
        return [bytes.fromhex(lines[0])]
    keys = {}
    for ln in lines:
        w = ln.split(" ")
        keys[w[0] if w[0] != "ps" else "ps." + w[1]] = bytes.fromhex(w[-1])
    return list(keys.values()) if sel == "all" else [keys[sel or "coord"]]

def node_key(root, role, index):
    return hmac.new(root, b"drover node" + struct.pack("<BI", role, index), hashlib.sha256).digest()

def handshake(addr, key, who, role, index):
    """The authenticated socket, or None when the server refuses the key."""
    s = socket.create_connection(addr, timeout=5)
    t, hello = read_frame(s)
    assert t == 1, t
    ns, nc = hello[:32], os.urandom(32)
    mac = hmac.new(key, b"drover client" + ns + nc, hashlib.sha256).digest()
    s.sendall(frame(2, nc + mac + struct.pack("<BBI", who, role, index)))
    try:
        t, ok = read_frame(s)
    except (EOFError, OSError):
        s.close()
        return None
    want = hmac.new(key, b"drover server" + nc + ns, hashlib.sha256).digest()
    assert t == 3 and ok == want, "the server did not prove the key"
    return s

def main():
    host, port = sys.argv[1].rsplit(":", 1)
    keys = load_keys(sys.argv[2])
    who, role, index = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    if sys.argv[2].endswith("#all"):
        keys = keys + [node_key(k, role, index) for k in keys]
    s = None
    for key in keys:
        s = handshake((host, int(port)), key, who, role, index)
        if s:
            break
    if not s:
        print("auth-failed")
        return
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
