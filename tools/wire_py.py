#!/usr/bin/env python3
"""wire_py.py - the Python client's message table, generated from the C
descriptions (src/proto/wire.h, src/proto/wire_msgs.h, src/numeric/tensor.h,
src/proto/wire.c and the error codes of src/base/err.h).

The C codecs come from the X-macro field lists of wire_msgs.h; this script
reads the same lists and writes them out as Python data
(clients/python/drover_client/_wire.py), which drover_client/wire.py
interprets one field kind at a time. No layout is written down twice: a
new message or field appears in Python when `make` runs this again.

Usage: wire_py.py SRC_DIR OUT.py          write OUT.py
       wire_py.py --check SRC_DIR OUT.py  exit 1 when OUT.py is not what
                                          SRC_DIR generates now
Only the standard library: it runs at build time with the system python3.
"""
import os
import re
import sys

# Field kinds and the arguments each takes after the field name, as
# wire_msgs.h documents them ("X(KIND, field, ...)").
KINDS = {
    "U8": 0, "U16": 0, "U32": 0, "U64": 0, "I32": 0, "I64": 0, "F64": 0,
    "FLAG": 1, "ROLE": 0, "ENUM": 2, "POS": 1, "RAW": 1, "STR": 0,
    "BYTES": 0, "SHAPE": 0, "TENSOR": 0, "OPTIM": 0, "ITEMS": 2, "EMPTY": 0,
}


class GenError(Exception):
    pass


def read(src, name):
    with open(os.path.join(src, name), encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)  # comments hold examples
    text = re.sub(r"//[^\n]*", " ", text)
    return text.replace("\\\n", " ")


def macro_bodies(text, prefix):
    """{name: body} of every `#define PREFIX<name>(X) body`."""
    out = {}
    for m in re.finditer(r"^[ \t]*#define[ \t]+%s(\w+)\((\w+)\)[ \t]*(.*)$" % prefix,
                         text, re.M):
        out[m.group(1)] = (m.group(2), m.group(3).strip())
    return out


def split_args(s):
    """Top-level comma-separated arguments, strings kept whole."""
    args, cur, depth, i = [], "", 0, 0
    while i < len(s):
        c = s[i]
        if c == '"':
            j = i + 1
            while j < len(s) and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            cur += s[i:j + 1]
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        args.append(cur.strip())
    return args


def calls(body, fn):
    """The argument lists of every fn(...) in body, in order."""
    out, i = [], 0
    pat = re.compile(r"\b%s\s*\(" % re.escape(fn))
    while True:
        m = pat.search(body, i)
        if not m:
            return out
        j, depth = m.end(), 1
        while depth:
            if j >= len(body):
                raise GenError("unbalanced parentheses in %r" % body)
            if body[j] == '"':
                j = body.index('"', j + 1) + 1
                continue
            depth += {"(": 1, ")": -1}.get(body[j], 0)
            j += 1
        out.append(split_args(body[m.end():j - 1]))
        i = j


def c_int(expr, consts):
    """A C integer constant expression over known names (1u << 20, 8 + 4)."""
    e = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", expr)
    e = re.sub(r"\(\s*(uint\d+_t|int\d+_t|unsigned|int)\s*\)", "", e)
    e = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(consts[m.group(0)]) if m.group(0) in consts
               else m.group(0), e)
    if not re.fullmatch(r"(?:0x[0-9a-fA-F]+|\d+|<<|>>|[-+*/() ])*", e):
        raise GenError("cannot evaluate %r" % expr)
    return int(eval(e.replace("/", "//")))  # digits and operators only: checked above


def defines(text, consts):
    for m in re.finditer(r"^[ \t]*#define[ \t]+(\w+)[ \t]+([^\n]+)$", text, re.M):
        try:
            consts[m.group(1)] = c_int(m.group(2).strip(), consts)
        except (GenError, SyntaxError, KeyError):
            pass


def enums(text, consts):
    """Every enumerator of every enum, with its value."""
    found = {}
    for m in re.finditer(r"\benum\b[^{;]*\{([^}]*)\}", text):
        nxt = 0
        for item in split_args(m.group(1)):
            name, _, val = item.partition("=")
            name = name.strip()
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                continue
            v = c_int(val, consts) if val.strip() else nxt
            consts[name] = found[name] = v
            nxt = v + 1
    return found


def field(args, consts, where):
    kind = args[0]
    if kind not in KINDS:
        raise GenError("%s: unknown field kind %s" % (where, kind))
    if len(args) != 2 + KINDS[kind]:
        raise GenError("%s: %s takes %d arguments" % (where, kind, 1 + KINDS[kind]))
    name, extra = args[1], args[2:]
    if kind == "RAW":
        extra = [c_int(extra[0], consts)]
    elif kind == "ENUM":
        extra = [c_int(extra[0], consts), extra[1].strip('"')]
    elif kind in ("FLAG", "POS"):
        extra = [extra[0].strip('"')]
    elif kind == "ITEMS":
        extra = [extra[0], extra[1].strip('"')]
    return (kind, name) + tuple(extra)


def generate(src):
    wire_h, msgs_h = read(src, "proto/wire.h"), read(src, "proto/wire_msgs.h")
    consts = {}
    wire_c = read(src, "proto/wire.c")
    for text in (read(src, "numeric/tensor.h"), wire_h, wire_c):
        defines(text, consts)
    found = enums(wire_h, consts)
    rows = macro_bodies(wire_h, "WIRE_TYPE_")
    if "MAP" not in rows:
        raise GenError("no WIRE_TYPE_MAP in wire.h")
    msg_lists = macro_bodies(msgs_h, "WIRE_MSG_")
    item_lists = macro_bodies(msgs_h, "WIRE_ITEM_")
    item_map = item_lists.pop("MAP", None)
    if not item_map:
        raise GenError("no WIRE_ITEM_MAP in wire_msgs.h")
    items = {}
    for args in calls(item_map[1], item_map[0]):
        name = args[0]
        x, body = item_lists[name]
        items[name] = tuple(field(a, consts, "item " + name) for a in calls(body, x))
    peers = peer_names(wire_h)
    messages = []
    for num, NAME, name, pre_auth, _max, sent_from in calls(rows["MAP"][1], rows["MAP"][0]):
        if name not in msg_lists:
            raise GenError("WIRE_TYPE_MAP row %s has no WIRE_MSG_%s" % (NAME, name))
        x, body = msg_lists[name]
        fields = tuple(field(a, consts, NAME) for a in calls(body, x))
        for f in fields:
            if f[0] == "ITEMS" and f[2] not in items:
                raise GenError("%s.%s: no WIRE_ITEM_%s" % (NAME, f[1], f[2]))
        messages.append((c_int(num, consts), NAME, name, pre_auth == "true", fields,
                         from_column(sent_from, peers, NAME)))
    roles = sorted((v, k[5:].lower()) for k, v in found.items() if k.startswith("ROLE_"))
    optim = re.search(r"optim_fields\[\]\s*=\s*\{(.*?)\};", wire_c, re.S)
    if not optim:
        raise GenError("no optim_fields[] in wire.c")
    optim_fields = tuple(re.findall(r'\{\s*"(\w+)"\s*,', optim.group(1)))
    groups = {p: {k[len(p):]: v for k, v in found.items() if k.startswith(p)}
              for p in ("WIRE_TASK_", "WIRE_COMMAND_", "WIRE_FEED_")}
    groups["DRV_E"] = errors(read(src, "base/err.h"))
    return emit(consts, messages, items, [r for _, r in roles], optim_fields, groups, peers)


def peer_names(wire_h):
    """{NAME: what} of WIRE_PEER_MAP's rows, in order (a peer's bit)."""
    rows = macro_bodies(wire_h, "WIRE_PEER_")
    if "MAP" not in rows:
        raise GenError("no WIRE_PEER_MAP in wire.h")
    x, body = rows["MAP"]
    return {args[0]: args[1].strip('"') for args in calls(body, x)}


def from_column(expr, peers, where):
    """The peers of a `from` column: 0, or WIRE_FROM(PEER) | ..."""
    if expr.strip() == "0":
        return ()
    names = tuple(args[0] for args in calls(expr, "WIRE_FROM"))
    if re.sub(r"\s", "", expr) != "|".join("WIRE_FROM(%s)" % n for n in names):
        raise GenError("%s: the from column %r is not 0 or WIRE_FROM(PEER) | ..." % (where, expr))
    for n in names:
        if n not in peers:
            raise GenError("%s: no peer %s in WIRE_PEER_MAP" % (where, n))
    return names


def errors(err_h):
    """DRV_E* codes: DRV_ERRNO_MAP's rows in order after DRV__EBASE."""
    rows = macro_bodies(err_h, "DRV_ERRNO_")
    base = re.search(r"DRV__EBASE\s*=\s*(-?\d+)", err_h)
    if "MAP" not in rows or not base:
        raise GenError("no DRV_ERRNO_MAP or DRV__EBASE in err.h")
    x, body = rows["MAP"]
    return {args[0]: int(base.group(1)) + 1 + i for i, args in enumerate(calls(body, x))}


def table(out, name, rows):
    """A dict literal, one row a line, then a blank line."""
    out.append("%s = {" % name)
    out.extend("    %r: %r," % row for row in rows)
    out.extend(("}", ""))


def emit(consts, messages, items, roles, optim_fields, groups, peers):
    out = ['"""_wire.py - GENERATED by tools/wire_py.py from src/proto/wire.h,',
           "src/proto/wire_msgs.h, src/numeric/tensor.h, src/proto/wire.c and src/base/err.h. Do not edit: `make` rewrites it.",
           "",
           "MESSAGES: number -> (NAME, name, pre_auth, fields); ITEMS: item -> fields.",
           "A field is (KIND, name, *arguments) exactly as wire_msgs.h lists it.",
           "FROM: number -> the PEERS a server takes it from (WIRE_TYPE_MAP's from column).",
           '"""', ""]
    for k in ("WIRE_MAGIC", "WIRE_VERSION", "WIRE_HEADER_SIZE", "WIRE_MAX_STR",
              "WIRE_NONCE_SIZE", "WIRE_MAC_SIZE", "WIRE_DEFAULT_MAX_FRAME", "WIRE_MAX_DIM",
              "TENSOR_MAXDIM", "TENSOR_EMPTY_MAX", "ROLE_COUNT"):
        if k not in consts:
            raise GenError("no value for %s" % k)
        out.append("%s = %d" % (k[5:] if k.startswith("WIRE_") else k, consts[k]))
    out.append("ROLES = %r" % (tuple(roles),))
    out.append("TASK_KINDS = %r" % (dict(sorted(groups["WIRE_TASK_"].items())),))
    out.append("COMMAND_KINDS = %r" % (dict(sorted(groups["WIRE_COMMAND_"].items())),))
    out.append("FEED_MODES = %r" % (dict(sorted(groups["WIRE_FEED_"].items())),))
    out.append("ERRORS = %r" % (groups["DRV_E"],))
    out.append("OPTIM_FIELDS = %r" % (optim_fields,))
    out.append("")
    table(out, "ITEMS", items.items())
    table(out, "MESSAGES", ((m[0], m[1:5]) for m in messages))
    table(out, "PEERS", peers.items())
    table(out, "FROM", ((m[0], m[5]) for m in messages))
    return "\n".join(out[:-1]) + "\n"


def main(argv):
    check = len(argv) > 1 and argv[1] == "--check"
    args = argv[2:] if check else argv[1:]
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    src, path = args
    try:
        text = generate(src)
    except (GenError, OSError, KeyError, ValueError) as e:
        sys.stderr.write("wire_py: %s\n" % e)
        return 1
    if check:
        try:
            with open(path, encoding="utf-8") as f:
                same = f.read() == text
        except OSError:
            same = False
        if not same:
            sys.stderr.write("wire_py: %s is not what %s generates now (run make)\n" % (path, src))
        return 0 if same else 1
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
