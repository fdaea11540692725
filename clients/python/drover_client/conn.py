"""conn.py - one authenticated connection to a drover process: TCP, the
HELLO/AUTH/AUTH_OK handshake of auth.py, then whole frames each way
(blocking sockets; every wait bounded by a deadline)."""
import select
import socket
import time

from . import _wire, auth, wire


class DroverError(Exception):
    """The peer refused (an ERROR frame: code is a DRV_E* code, negative)
    or the connection ended."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code

    @property
    def code_name(self):
        """"DRV_EPERM" for the code's DRV_E* name (src/base/err.h), else None."""
        names = {v: k for k, v in _wire.ERRORS.items()}
        return "DRV_E" + names[self.code] if self.code in names else None


class Closed(DroverError):
    """The peer closed the connection (the run ended, or it dropped us)."""


def wait_ready(conn, beside, deadline, poll):
    """Waits until `conn` has a frame to read, meanwhile reading the
    snapshots of `beside` (a Run, or None: the coordinator stops sending
    them to a client that does not read, and drops it after 30 s) with
    `poll` seconds at most per read. TimeoutError at `deadline`
    (time.monotonic())."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError()
        run = beside if beside and not beside.ended else None
        socks = [conn.sock] + ([run.conn.sock] if run else [])
        ready = select.select(socks, [], [], left)[0]
        if conn.sock in ready:
            return
        if run and ready:
            run.poll(left if poll is None else poll)


def split_hostport(s):
    """("host", port) of "HOST:PORT" or "[V6]:PORT"; None when s is not one."""
    host, sep, port = s.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class Conn:
    """A framed, authenticated connection. send() and recv() move whole
    frames; recv() returns (NAME, req, fields)."""

    def __init__(self, host, port, key, timeout=10.0, max_frame=_wire.DEFAULT_MAX_FRAME):
        self.peer = "%s:%d" % (host, port)
        self.max_frame = max_frame
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise DroverError("cannot connect to %s: %s" % (self.peer, e.strerror or e)) from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.authed = False
        try:
            self._handshake(key, timeout)
        except BaseException:
            self.close()
            raise

    def _handshake(self, key, timeout):
        deadline = time.monotonic() + timeout
        try:
            name, _, hello = self.recv(deadline=deadline)
        except Closed:
            raise DroverError("%s closed the connection before its HELLO" % self.peer) from None
        if name != "HELLO":
            raise DroverError("%s sent %s where HELLO was expected" % (self.peer, name))
        nc = auth.new_nonce()
        # who 1: a client, proving the run's control or view key (auth.h)
        self.send("AUTH", {"nonce": nc, "mac": auth.client_mac(key, hello["nonce"], nc),
                           "who": 1, "role": 0, "index": 0})
        try:
            name, _, ok = self.recv(deadline=deadline)
        except Closed:
            raise auth.AuthError("%s closed the connection during the handshake: the secret is "
                                 "not the run's" % self.peer) from None
        if name != "AUTH_OK":
            raise DroverError("%s sent %s where AUTH_OK was expected" % (self.peer, name))
        auth.check_server(key, nc, hello["nonce"], ok["mac"])
        self.authed = True

    def send(self, t, fields=None, req=0):
        try:
            self.sock.sendall(wire.encode_frame(t, fields, req))
        except OSError as e:
            raise Closed("cannot send to %s: %s" % (self.peer, e.strerror or e)) from None

    def _read(self, n, deadline):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError("nothing from %s in time" % self.peer)
            self.sock.settimeout(left)
            try:
                k = self.sock.recv_into(view[got:])
            except socket.timeout:
                raise TimeoutError("nothing from %s in time" % self.peer) from None
            except OSError as e:
                raise Closed("connection to %s failed: %s" % (self.peer, e.strerror or e)) from None
            if k == 0:
                raise Closed("%s closed the connection" % self.peer)
            got += k
        return buf

    def recv(self, timeout=None, deadline=None):
        """The next frame as (NAME, req, fields); an ERROR frame raises
        DroverError. TimeoutError when none comes by the deadline (a
        frame half read is then lost: close the connection)."""
        if deadline is None and timeout is not None:
            deadline = time.monotonic() + timeout
        hdr = self._read(wire.HEADER.size, deadline)
        try:
            t, _, req, n = wire.decode_header(hdr, self.max_frame, self.authed)
        except wire.WireError as e:
            raise DroverError("malformed frame from %s: %s" % (self.peer, e)) from None
        payload = self._read(n, deadline) if n else b""
        try:
            fields = wire.decode_payload(t, payload)
        except wire.WireError as e:
            raise DroverError("malformed %s from %s: %s" % (wire.type_name(t), self.peer, e)) from None
        name = wire.type_name(t)
        if name == "ERROR":
            raise DroverError("%s: %s" % (self.peer, fields["message"]), fields["code"])
        return name, req, fields

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None
