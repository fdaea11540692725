"""wire.py - drover's frames in Python: the 16-byte header and every
message's payload, encoded and decoded from the field lists of
src/proto/wire_msgs.h (as tools/wire_py.py wrote them into _wire.py).

Nothing here names a message: each field kind has one reader and one
writer (the C side's X-macro per kind, src/proto/wire_msgs.c), and a message is
its list of fields. Decoded messages are dicts keyed by field name:

  U8 .. U64, I32, I64, ROLE, ENUM   int
  F64, POS                          float
  FLAG                              bool
  RAW, BYTES                        bytes
  STR                               str (UTF-8; other bytes kept through
                                    surrogateescape, so they re-encode
                                    byte for byte)
  SHAPE                             tuple of ints
  TENSOR                            numpy float32 array (decoded: a
                                    read-only view of the payload)
  OPTIM                             dict: kind, the float fields, nesterov,
                                    sched (None or a dict)
  ITEMS                             list of dicts
  EMPTY                             absent

Decoding checks what the C decoder checks (lengths, counts that fit the
bytes left, roles, flags and enums in range, tensor shapes, no bytes left
over) and raises WireError with the C side's kind of message.
"""
import math
import struct

import numpy as np

from . import _wire

HEADER = struct.Struct("<IBBHII")
assert HEADER.size == _wire.HEADER_SIZE

BY_NAME = {v[0]: k for k, v in _wire.MESSAGES.items()}
F32 = np.dtype("<f4")


class WireError(ValueError):
    """A frame or payload that does not follow its description."""


def type_number(t):
    """The number of a message given by number or NAME ("SNAPSHOT")."""
    if isinstance(t, str):
        if t not in BY_NAME:
            raise WireError("unknown message %s" % t)
        return BY_NAME[t]
    if t not in _wire.MESSAGES:
        raise WireError("unknown frame type 0x%02x" % t)
    return t


def type_name(t):
    row = _wire.MESSAGES.get(t)
    return row[0] if row else "type 0x%02x" % t


# ---- reading ----------------------------------------------------------------


class Reader:
    """A bounds-checked reader over one payload (wire_rd)."""

    def __init__(self, buf):
        self.buf = memoryview(buf).cast("B")
        self.off = 0

    def left(self):
        return len(self.buf) - self.off

    def take(self, n, what):
        if n > self.left():
            raise WireError("truncated %s at offset %d: %d bytes needed, %d left"
                            % (what, self.off, n, self.left()))
        v = self.buf[self.off:self.off + n]
        self.off += n
        return v

    def unpack(self, fmt, what):
        s = struct.Struct("<" + fmt)
        return s.unpack(self.take(s.size, what))[0]


def _rd_count(r, min_item, what):
    n = r.unpack("I", "count")
    if n > r.left() // max(min_item, 1):
        raise WireError("%s count %d cannot fit in the %d bytes left" % (what, n, r.left()))
    return n


def _rd_str(r):
    n = r.unpack("I", "string length")
    if n > _wire.MAX_STR:
        raise WireError("string at offset %d is %d bytes (limit %d)" % (r.off - 4, n, _wire.MAX_STR))
    b = bytes(r.take(n, "string"))
    if b"\0" in b:
        raise WireError("string at offset %d holds a NUL" % (r.off - n - 4))
    return b.decode("utf-8", "surrogateescape")


def _rd_dims(r, nd, what, at):
    dims, prod, empty = [], 1, False
    for i in range(nd):
        d = r.unpack("Q", "dimension")
        if d >= _wire.MAX_DIM:
            raise WireError("%s at offset %d: dimension %d is %d (limit 2^40)" % (what, at, i + 1, d))
        dims.append(d)
        if d == 0:
            empty = True
        elif prod > (_wire.MAX_DIM - 1) // d:
            raise WireError("%s at offset %d: dimensions multiply past 2^40 elements" % (what, at))
        else:
            prod *= d
    if empty and prod > _wire.TENSOR_EMPTY_MAX:
        raise WireError("%s at offset %d: an empty tensor's other dimensions multiply past 2^32"
                        % (what, at))
    return tuple(dims), 0 if empty else prod


def _rd_ndim(r, what):
    at = r.off
    nd = r.unpack("B", what)
    if not 1 <= nd <= _wire.TENSOR_MAXDIM:
        raise WireError("%s at offset %d has %d dimensions (expected 1 to %d)"
                        % (what, at, nd, _wire.TENSOR_MAXDIM))
    return nd, at


def _rd_shape(r):
    nd, at = _rd_ndim(r, "shape")
    return _rd_dims(r, nd, "shape", at)[0]


def _rd_tensor(r):
    nd, at = _rd_ndim(r, "tensor")
    dims, numel = _rd_dims(r, nd, "tensor", at)
    if numel > r.left() // 4:
        raise WireError("tensor at offset %d is truncated: shape %s needs %d bytes, %d left"
                        % (at, list(dims), numel * 4, r.left()))
    data = r.take(numel * 4, "tensor data")
    return np.frombuffer(data, dtype=F32).reshape(dims)


# The learning-rate schedule after an OPTIM whose nesterov byte has bit 7
# (wire.c, wr_sched): its own fixed layout, not a field list.
SCHED_FLAG = 0x80
SCHED_HEAD = (("kind", "B"), ("warmup", "q"), ("start_factor", "d"), ("step_size", "q"),
              ("gamma", "d"))
SCHED_TAIL = (("t_max", "q"), ("eta_min", "d"))


def _rd_optim(r):
    o = {"kind": r.unpack("B", "optimizer kind")}
    for name in _wire.OPTIM_FIELDS:
        v = r.unpack("d", "optimizer " + name)
        if not math.isfinite(v) or abs(v) > 3.4028234663852886e38:
            raise WireError("optimizer %s is not a finite float (%g)" % (name, v))
        o[name] = v
    nesterov = r.unpack("B", "optimizer nesterov")
    o["sched"] = None
    if nesterov & SCHED_FLAG:
        s = {k: r.unpack(f, "schedule " + k) for k, f in SCHED_HEAD}
        n = r.unpack("B", "schedule milestones")
        s["milestones"] = [r.unpack("q", "milestone") for _ in range(n)]
        s.update({k: r.unpack(f, "schedule " + k) for k, f in SCHED_TAIL})
        o["sched"] = s
    nesterov &= ~SCHED_FLAG
    if nesterov > 1:
        raise WireError("optimizer nesterov flag is %d (expected 0 or 1)" % nesterov)
    o["nesterov"] = nesterov
    return o


def _rd_checked(r, fmt, what, ok, why):
    v = r.unpack(fmt, what)
    if not ok(v):
        raise WireError(why % v)
    return v


_NUM = {"U8": "B", "U16": "H", "U32": "I", "U64": "Q", "I32": "i", "I64": "q", "F64": "d"}


def _read_field(r, f):
    kind, name = f[0], f[1]
    if kind in _NUM:
        return r.unpack(_NUM[kind], name)
    if kind == "FLAG":
        return bool(_rd_checked(r, "B", name, lambda v: v <= 1, f[2] + " is %d (expected 0 or 1)"))
    if kind == "ROLE":
        return _rd_checked(r, "B", name, lambda v: v < _wire.ROLE_COUNT, "unknown role %d")
    if kind == "ENUM":
        return _rd_checked(r, "B", name, lambda v: v <= f[2], "unknown " + f[3] + " %d")
    if kind == "POS":
        return _rd_checked(r, "d", name, lambda v: math.isfinite(v) and v > 0, f[2] + " is %g")
    if kind == "RAW":
        return bytes(r.take(f[2], name))
    if kind == "STR":
        return _rd_str(r)
    if kind == "BYTES":
        return bytes(r.take(r.unpack("I", "bytes length"), name))
    if kind == "SHAPE":
        return _rd_shape(r)
    if kind == "TENSOR":
        return _rd_tensor(r)
    if kind == "OPTIM":
        return _rd_optim(r)
    if kind == "ITEMS":
        item = _wire.ITEMS[f[2]]
        n = _rd_count(r, min_size(item), f[3])
        return [_read_fields(r, item) for _ in range(n)]
    if kind == "EMPTY":
        return None
    raise WireError("unknown field kind %s" % kind)


def _read_fields(r, fields):
    out = {}
    for f in fields:
        v = _read_field(r, f)
        if f[0] != "EMPTY":
            out[f[1]] = v
    return out


_MIN = {"U8": 1, "U16": 2, "U32": 4, "U64": 8, "I32": 4, "I64": 8, "F64": 8, "FLAG": 1,
        "ROLE": 1, "ENUM": 1, "POS": 8, "STR": 4, "BYTES": 4, "SHAPE": 9, "TENSOR": 9,
        "OPTIM": 1 + 8 * len(_wire.OPTIM_FIELDS) + 1, "ITEMS": 4, "EMPTY": 0}


def min_size(fields):
    """The smallest encoding of a field list (wire_msgs.c's MIN_)."""
    return sum(f[2] if f[0] == "RAW" else _MIN[f[0]] for f in fields)


def decode_payload(t, payload):
    """The fields of a whole payload of message t (number or NAME)."""
    t = type_number(t)
    name, _, _, fields = _wire.MESSAGES[t]
    r = Reader(payload)
    try:
        out = _read_fields(r, fields)
        if r.left():
            raise WireError("%d bytes left over" % r.left())
    except WireError as e:
        raise WireError("%s: %s" % (name, e)) from None
    return out


# ---- writing ----------------------------------------------------------------


def _wr_str(out, v, name):
    b = v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)
    if len(b) > _wire.MAX_STR:
        raise WireError("string %s is %d bytes (limit %d)" % (name, len(b), _wire.MAX_STR))
    if b"\0" in b:
        raise WireError("string %s holds a NUL" % name)
    out += struct.pack("<I", len(b)) + b


def _wr_dims(out, dims, name):
    if not 1 <= len(dims) <= _wire.TENSOR_MAXDIM:
        raise WireError("%s has %d dimensions (expected 1 to %d)"
                        % (name, len(dims), _wire.TENSOR_MAXDIM))
    out += struct.pack("<B%dQ" % len(dims), len(dims), *dims)


def _wr_tensor(out, v, name):
    a = np.asarray(v)
    a = np.ascontiguousarray(a.reshape(1) if a.ndim == 0 else a, dtype=F32)
    _wr_dims(out, a.shape, name)
    if a.size:
        out += memoryview(a).cast("B")  # no intermediate copy (a batch is megabytes)


def _wr_optim(out, o):
    sched = o.get("sched")
    out += struct.pack("<B", o["kind"])
    out += struct.pack("<%dd" % len(_wire.OPTIM_FIELDS), *(o[k] for k in _wire.OPTIM_FIELDS))
    out += struct.pack("<B", int(o.get("nesterov", 0)) | (SCHED_FLAG if sched else 0))
    if sched:
        for k, f in SCHED_HEAD:
            out += struct.pack("<" + f, sched[k])
        out += struct.pack("<B%dq" % len(sched["milestones"]), len(sched["milestones"]),
                           *sched["milestones"])
        for k, f in SCHED_TAIL:
            out += struct.pack("<" + f, sched[k])


def _write_field(out, f, m):
    kind, name = f[0], f[1]
    if kind == "EMPTY":
        return
    if name not in m:
        raise WireError("field %s is missing" % name)
    v = m[name]
    try:
        if kind in _NUM:
            out += struct.pack("<" + _NUM[kind], v)
        elif kind in ("FLAG", "ROLE", "ENUM"):
            out += struct.pack("<B", int(v))
        elif kind == "POS":
            out += struct.pack("<d", v)
        elif kind == "RAW":
            if len(v) != f[2]:
                raise WireError("field %s is %d bytes, not %d" % (name, len(v), f[2]))
            out += bytes(v)
        elif kind == "STR":
            _wr_str(out, v, name)
        elif kind == "BYTES":
            out += struct.pack("<I", len(v)) + bytes(v)
        elif kind == "SHAPE":
            _wr_dims(out, tuple(v), name)
        elif kind == "TENSOR":
            _wr_tensor(out, v, name)
        elif kind == "OPTIM":
            _wr_optim(out, v)
        elif kind == "ITEMS":
            item = _wire.ITEMS[f[2]]
            out += struct.pack("<I", len(v))
            for it in v:
                _write_fields(out, item, it)
        else:
            raise WireError("unknown field kind %s" % kind)
    except struct.error as e:
        raise WireError("field %s: %s" % (name, e)) from None


def _write_fields(out, fields, m):
    for f in fields:
        _write_field(out, f, m)


def encode_payload(t, fields):
    """The payload of message t (number or NAME) from a dict of fields."""
    t = type_number(t)
    out = bytearray()
    try:
        _write_fields(out, _wire.MESSAGES[t][3], fields)
    except WireError as e:
        raise WireError("%s: %s" % (type_name(t), e)) from None
    return bytes(out)


def encode_header(t, req, length, flags=0):
    return HEADER.pack(_wire.MAGIC, _wire.VERSION, type_number(t), flags, req, length)


def encode_frame(t, fields=None, req=0):
    """A whole frame (header and payload) as a bytearray, the payload
    written once behind the header's room (Conn.send: a feed batch is not
    copied again on its way to the socket)."""
    t = type_number(t)
    out = bytearray(HEADER.size)
    try:
        _write_fields(out, _wire.MESSAGES[t][3], fields or {})
    except WireError as e:
        raise WireError("%s: %s" % (type_name(t), e)) from None
    n = len(out) - HEADER.size
    if n > 0xFFFFFFFF:
        raise WireError("%s payload exceeds 4 GiB" % type_name(t))
    HEADER.pack_into(out, 0, _wire.MAGIC, _wire.VERSION, t, 0, req, n)
    return out


def encode(t, fields=None, req=0):
    """A whole frame: header and payload."""
    return bytes(encode_frame(t, fields, req))


def decode_header(b, max_frame=_wire.DEFAULT_MAX_FRAME, authed=True):
    """(type, flags, req, len) of a 16-byte header, checked like
    wire_header_decode: magic, version, known type, length, handshake."""
    magic, version, t, flags, req, n = HEADER.unpack(bytes(b[:HEADER.size]))
    if magic != _wire.MAGIC:
        raise WireError("bad magic 0x%08x" % magic)
    if version != _wire.VERSION:
        raise WireError("protocol version %d (this client speaks %d)" % (version, _wire.VERSION))
    if t not in _wire.MESSAGES:
        raise WireError("unknown frame type 0x%02x" % t)
    if n > max_frame:
        raise WireError("%s frame of %d bytes exceeds the maximum %d" % (type_name(t), n, max_frame))
    if not authed and not _wire.MESSAGES[t][2]:
        raise WireError("frame type %s before authentication" % type_name(t))
    return t, flags, req, n


def decode(frame):
    """(NAME, req, fields) of a whole frame."""
    t, _, req, n = decode_header(frame)
    if len(frame) != HEADER.size + n:
        raise WireError("%s frame is %d bytes, its header says %d"
                        % (type_name(t), len(frame), HEADER.size + n))
    return type_name(t), req, decode_payload(t, memoryview(frame)[HEADER.size:])
