"""auth.py - the run's secret and the handshake every drover connection
starts with (src/proto/auth.h, driven by src/net/conn.c):

  server -> HELLO   { ns, server_kind }     ns: 32 random bytes
  client -> AUTH    { nc, mac_c = HMAC-SHA-256(key, "drover client" || ns || nc) }
  server -> AUTH_OK { mac_s = HMAC-SHA-256(key, "drover server" || nc || ns) }

The C side computes the MACs with libsodium's crypto_auth_hmacsha256,
which is plain HMAC-SHA-256: hashlib and hmac are all it takes here.
"""
import hashlib
import hmac
import os
import stat

from . import _wire

KEY_SIZE = 32
CLIENT_LABEL = b"drover client"
SERVER_LABEL = b"drover server"


class AuthError(Exception):
    """A secret file that is not one, or a peer that does not hold it."""


def load_secret(path):
    """The 32-byte key of a secret file: 64 lowercase hex digits and an
    optional newline, mode 0600 (refused, as auth_secret_load refuses it,
    when group or others may read it)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise AuthError("cannot open secret file '%s': %s" % (path, e.strerror)) from None
    if not stat.S_ISREG(st.st_mode):
        raise AuthError("secret file '%s' is not a regular file" % path)
    mode = st.st_mode & 0o7777
    if mode & 0o077:
        raise AuthError("secret file '%s' is open to group or others (mode %04o); chmod 600 it"
                        % (path, mode))
    with open(path, "rb") as f:
        data = f.read(2 * KEY_SIZE + 3)
    digits = data[:-1] if data.endswith(b"\n") else data
    if len(digits) != 2 * KEY_SIZE or any(c not in b"0123456789abcdef" for c in digits):
        raise AuthError("secret file '%s' is malformed: expected %d lowercase hex digits and a "
                        "newline" % (path, 2 * KEY_SIZE))
    return bytes.fromhex(digits.decode("ascii"))


def _mac(key, label, a, b):
    return hmac.new(key, label + a + b, hashlib.sha256).digest()


def client_mac(key, ns, nc):
    return _mac(key, CLIENT_LABEL, ns, nc)


def server_mac(key, nc, ns):
    return _mac(key, SERVER_LABEL, nc, ns)


def new_nonce():
    return os.urandom(_wire.NONCE_SIZE)


def check_server(key, nc, ns, mac):
    """Raises AuthError unless mac proves the server holds key."""
    if not hmac.compare_digest(mac, server_mac(key, nc, ns)):
        raise AuthError("authentication failed: the server does not hold the run's secret")
