"""flood.py - connections that never authenticate (tests of fault 2).

usage: flood.py SECONDS COUNT HOST:PORT...

Keeps COUNT connections open to each address for SECONDS: each reads
whatever the server sends (its HELLO) and never answers; one the server
drops is opened again at once, so the pressure lasts. Raises its own
descriptor limit to the hard limit (the servers' shell may hold a lower
soft one). Prints "flooding N" once the first round is open, and at the
end "opened N dropped M" to stderr.
"""
import resource, selectors, socket, sys, time

def main():
    secs, count = float(sys.argv[1]), int(sys.argv[2])
    addrs = []
    for a in sys.argv[3:]:
        host, port = a.rsplit(":", 1)
        addrs.append((host, int(port)))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sel = selectors.DefaultSelector()
    opened = dropped = 0

    def connect(addr):
        nonlocal opened
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect_ex(addr)
        except OSError:
            s.close()
            return
        sel.register(s, selectors.EVENT_READ, addr)
        opened += 1

    for addr in addrs:
        for _ in range(count):
            connect(addr)
    print("flooding %d" % opened, flush=True)
    end = time.time() + secs
    while time.time() < end:
        for key, _ in sel.select(timeout=0.2):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:  # dropped by the server: open another
                sel.unregister(s)
                s.close()
                dropped += 1
                connect(key.data)
    sys.stderr.write("opened %d dropped %d\n" % (opened, dropped))

main()
