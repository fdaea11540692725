"""flood.py - connections that never authenticate (tests of fault 2).

usage: flood.py SECONDS COUNT [--sources K] HOST:PORT...

Keeps COUNT connections open to each address for SECONDS: each reads
whatever the server sends (its HELLO) and never answers; one the server
drops is opened again at once, so the pressure lasts. Raises its own
descriptor limit to the hard limit (the servers' shell may hold a lower
soft one). Prints "flooding N" once the first round is open, and at the
end "opened N dropped M" to stderr. --sources K spreads the connections
over K loopback source addresses (127.0.0.2 on), so a bound per peer
address alone does not hold them: the total bound and the descriptor
reserve must.
"""
import resource, selectors, socket, sys, time

def main():
    secs, count = float(sys.argv[1]), int(sys.argv[2])
    args, sources = sys.argv[3:], 0
    if args[:1] == ["--sources"]:
        sources, args = int(args[1]), args[2:]
    addrs = []
    nth = 0
    for a in args:
        host, port = a.rsplit(":", 1)
        addrs.append((host, int(port)))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sel = selectors.DefaultSelector()
    opened = dropped = 0

    def connect(addr):
        nonlocal opened, nth
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            if sources:
                nth += 1
                s.bind(("127.0.0.%d" % (2 + nth % sources), 0))
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
