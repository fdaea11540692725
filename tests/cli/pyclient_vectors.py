"""pyclient_vectors.py - the Python half of the shared wire vectors
(tests/unit/wire_vectors.h has the C half and the JSON conventions).

  check DIR             every C vector DIR/NAME-V.bin: Python decodes it to
                        DIR/NAME-V.json's fields, re-encodes the decoded
                        message to the same bytes, and encodes the JSON's
                        fields to the same bytes
  make DIR OUT SEED     per message, frames Python encodes from fields of its
                        own (random, from SEED; OPTIM taken from the C
                        vector): OUT/NAME-py.bin and OUT/NAME-py.json
  compare OUT DECODED   DECODED holds `unit_tests --wire-vectors decode`'s
                        lines for OUT's frames: C read Python's fields and
                        wrote them back byte for byte
Prints PASS/FAIL lines per message.
"""
import glob
import json
import os
import random
import sys

import numpy as np

from drover_client import _wire, wire

INT_RANGE = {"U8": (0, 2**8 - 1), "U16": (0, 2**16 - 1), "U32": (0, 2**32 - 1),
             "U64": (0, 2**64 - 1), "I32": (-2**31, 2**31 - 1), "I64": (-2**63, 2**63 - 1)}


def fields_of(name):
    return _wire.MESSAGES[wire.type_number(name)][3]


# ---- decoded values <-> the vectors' JSON, by field kind ----------------------


def to_json(f, v):
    kind = f[0]
    if kind == "U64":
        return v if v < 2**63 else str(v)
    if kind in ("F64", "POS"):
        return v if np.isfinite(v) else ("nan" if v != v else "inf" if v > 0 else "-inf")
    if kind in ("RAW", "BYTES"):
        return v.hex()
    if kind == "STR":
        try:
            v.encode("utf-8")
            return v
        except UnicodeEncodeError:
            return {"hex": v.encode("utf-8", "surrogateescape").hex()}
    if kind == "SHAPE":
        return list(v)
    if kind == "TENSOR":
        return {"shape": list(v.shape), "data": [float(x) for x in v.reshape(-1)]}
    if kind == "OPTIM":
        out = bytearray()
        wire._wr_optim(out, v)
        return out.hex()
    if kind == "ITEMS":
        return [obj_json(_wire.ITEMS[f[2]], it) for it in v]
    return v  # ints, bools


def obj_json(fields, m):
    return {f[1]: to_json(f, m[f[1]]) for f in fields if f[0] != "EMPTY"}


def from_json(f, j):
    kind = f[0]
    if kind == "U64":
        return int(j)
    if kind in ("F64", "POS"):
        return float(j)
    if kind in ("RAW", "BYTES"):
        return bytes.fromhex(j)
    if kind == "STR":
        return bytes.fromhex(j["hex"]).decode("utf-8", "surrogateescape") if isinstance(j, dict) else j
    if kind == "SHAPE":
        return tuple(j)
    if kind == "TENSOR":
        return np.array(j["data"], dtype=np.float32).reshape(j["shape"])
    if kind == "OPTIM":
        return wire._rd_optim(wire.Reader(bytes.fromhex(j)))
    if kind == "ITEMS":
        return [obj_from(_wire.ITEMS[f[2]], it) for it in j]
    return j


def obj_from(fields, j):
    return {f[1]: from_json(f, j[f[1]]) for f in fields if f[0] != "EMPTY"}


# ---- Python's own samples -----------------------------------------------------

TEXT = "drover → ünïcode, 127.0.0.1:4100 "


def sample(f, rng, template):
    kind = f[0]
    if kind in INT_RANGE:
        lo, hi = INT_RANGE[kind]
        return rng.choice([lo, hi, rng.randint(lo, hi)])
    if kind == "F64":
        return rng.choice([0.0, -1.5e300, rng.uniform(-1e6, 1e6)])
    if kind == "POS":
        return rng.uniform(0.01, 100)
    if kind == "FLAG":
        return rng.random() < 0.5
    if kind == "ROLE":
        return rng.randrange(_wire.ROLE_COUNT)
    if kind == "ENUM":
        return rng.randint(0, f[2])
    if kind == "RAW":
        return bytes(rng.randrange(256) for _ in range(f[2]))
    if kind == "STR":
        return (TEXT * 3)[:rng.randint(0, 60)]
    if kind == "BYTES":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
    if kind == "SHAPE":
        return tuple(rng.randint(0, 5) for _ in range(rng.randint(1, _wire.TENSOR_MAXDIM)))
    if kind == "TENSOR":
        shape = [rng.randint(1, 4) for _ in range(rng.randint(1, _wire.TENSOR_MAXDIM))]
        return np.array([rng.uniform(-100, 100) for _ in range(int(np.prod(shape)))],
                        dtype=np.float32).reshape(shape)
    if kind == "OPTIM":  # its values must pass optim_cfg_check: the C sample's
        return from_json(f, template.get(f[1], OPTIM_SAMPLE[0]))
    if kind == "ITEMS":  # an item's OPTIM (REPL_SYNC's shards) from any C sample
        item = _wire.ITEMS[f[2]]
        return [{g[1]: sample(g, rng, {}) for g in item if g[0] != "EMPTY"}
                for _ in range(rng.randint(0, 3))]
    return None


# ---- the commands ----------------------------------------------------------------


def vectors(d):
    for js in sorted(glob.glob(os.path.join(d, "*.json"))):
        with open(js) as f:
            j = json.load(f)
        with open(js[:-5] + ".bin", "rb") as f:
            yield os.path.basename(js[:-5]), j, f.read()


def check(d):
    results = {}
    for base, j, b in vectors(d):
        name = j["type"]
        why = None
        try:
            got_name, req, m = wire.decode(b)
            if got_name != name or req != j["req"]:
                why = "header says %s req %d" % (got_name, req)
            elif obj_json(fields_of(name), m) != j["fields"]:
                why = "decoded %s, C says %s" % (obj_json(fields_of(name), m), j["fields"])
            elif wire.encode(name, m, req) != b:
                why = "the decoded message re-encodes to other bytes"
            elif wire.encode(name, obj_from(fields_of(name), j["fields"]), req) != b:
                why = "the JSON's fields encode to other bytes"
        except (wire.WireError, KeyError, ValueError) as e:
            why = "%s: %s" % (type(e).__name__, e)
        results.setdefault(name, [])
        if why:
            results[name].append("%s: %s" % (base, why))
    for name, bad in results.items():
        print(("FAIL pyclient-vec c-to-py %s: %s" % (name, "; ".join(bad))) if bad
              else "PASS pyclient-vec c-to-py %s" % name)
    return results


OPTIM_SAMPLE = [None]  # a C sample's optimizer config, for OPTIM fields inside items


def make(d, out, seed):
    rng = random.Random(int(seed))
    templates = {j["type"]: j["fields"] for _, j, _ in vectors(d)}
    for fields in templates.values():
        if OPTIM_SAMPLE[0] is None and isinstance(fields.get("optim"), str):
            OPTIM_SAMPLE[0] = fields["optim"]
    for num, (name, _, _, fields) in _wire.MESSAGES.items():
        m = {f[1]: sample(f, rng, templates.get(name, {})) for f in fields if f[0] != "EMPTY"}
        req = rng.randint(0, 2**32 - 1)
        with open(os.path.join(out, name + "-py.bin"), "wb") as f:
            f.write(wire.encode(name, m, req))
        with open(os.path.join(out, name + "-py.json"), "w") as f:
            json.dump({"type": name, "req": req, "fields": obj_json(fields, m)}, f)


def compare(out, decoded):
    with open(decoded) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    seen = set()
    for c in lines:
        base = os.path.basename(c["file"])[:-4]
        with open(os.path.join(out, base + ".json")) as f:
            want = json.load(f)
        seen.add(want["type"])
        if "error" in c:
            why = "C refused it: " + c["error"]
        elif (c["type"], c["req"]) != (want["type"], want["req"]):
            why = "C read %s req %d" % (c["type"], c["req"])
        elif c["fields"] != want["fields"]:
            why = "C read %s, Python wrote %s" % (c["fields"], want["fields"])
        elif not c["same"]:
            why = "C re-encodes it to other bytes"
        else:
            why = None
        print(("FAIL pyclient-vec py-to-c %s: %s" % (want["type"], why)) if why
              else "PASS pyclient-vec py-to-c %s" % want["type"])
    missing = {v[0] for v in _wire.MESSAGES.values()} - seen
    if missing:
        print("FAIL pyclient-vec py-to-c: C decoded nothing of %s" % sorted(missing))


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "check" and len(argv) == 3:
        check(argv[2])
    elif cmd == "make" and len(argv) == 5:
        make(argv[2], argv[3], argv[4])
    elif cmd == "compare" and len(argv) == 4:
        compare(argv[2], argv[3])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
