# test_pyclient_vectors.sh - the Python client's codec (clients/python)
# against the C side's, both ways, from the same field lists: the committed
# vectors (tests/vectors) and fresh ones the C side writes now (a message
# added since `make vectors` is covered too) decode in Python to the C
# side's fields and re-encode byte for byte; frames Python encodes from
# fields of its own decode in C to those fields and re-encode to the same
# bytes. Also: the generated message table is what src/ generates now.
. tests/cli/lib.sh
: "${UNIT:=$PWD/build/unit_tests}"
python_client pyclient-vectors

check "pyclient-vec-t00 _wire.py is what src/ generates" \
  python3 tools/wire_py.py --check src clients/python/drover_client/_wire.py

# t01: the committed vectors, C to Python
"$PY" tests/cli/pyclient_vectors.py check tests/vectors >"$TMP/committed.out" 2>&1
sed 's/^\(PASS\|FAIL\) pyclient-vec /\1 pyclient-vec-t01 committed /' "$TMP/committed.out"
check "pyclient-vec-t01 every committed message was checked" \
  test "$(grep -c '^PASS' "$TMP/committed.out")" -ge 31

# t02: fresh vectors from this build's C side, C to Python
mkdir -p "$TMP/fresh" "$TMP/py"
check "pyclient-vec-t02 the C side writes fresh vectors" \
  "$UNIT" --wire-vectors write "$TMP/fresh"
"$PY" tests/cli/pyclient_vectors.py check "$TMP/fresh" >"$TMP/fresh.out" 2>&1
sed 's/^\(PASS\|FAIL\) pyclient-vec /\1 pyclient-vec-t02 fresh /' "$TMP/fresh.out"
nmsg=$(ls "$TMP/fresh"/*-0.bin | wc -l)
check "pyclient-vec-t02 every message of this build was checked ($nmsg)" \
  test "$(grep -c '^PASS' "$TMP/fresh.out")" -eq "$nmsg"

# t03: Python to C: frames of Python's own fields
check "pyclient-vec-t03 Python encodes a frame of every message" \
  "$PY" tests/cli/pyclient_vectors.py make "$TMP/fresh" "$TMP/py" 13
"$UNIT" --wire-vectors decode "$TMP/py"/*.bin >"$TMP/decoded.jsonl" 2>"$TMP/decode.err"
check "pyclient-vec-t03 C decodes every one" test "$(wc -l <"$TMP/decoded.jsonl")" -eq "$nmsg"
"$PY" tests/cli/pyclient_vectors.py compare "$TMP/py" "$TMP/decoded.jsonl" >"$TMP/cmp.out" 2>&1
sed 's/^\(PASS\|FAIL\) pyclient-vec /\1 pyclient-vec-t03 /' "$TMP/cmp.out"
check "pyclient-vec-t03 C read Python's fields of every message" \
  test "$(grep -c '^PASS' "$TMP/cmp.out")" -eq "$nmsg"

# t04: the codec refuses what C refuses: a truncated payload, a bad flag
cat >"$TMP/bad.py" <<'PY'
import sys
from drover_client import wire
ok = wire.encode("PUSH_OK", {"step": 7, "applied": True}, 3)
cases = [("truncated", ok[:-1], "truncated"), ("flag 2", ok[:-1] + b"\x02", "expected 0 or 1"),
         ("extra byte", ok + b"\x00", "left over"), ("bad magic", b"X" + ok[1:], "bad magic")]
for what, frame, needle in cases:
    try:
        if what == "truncated" or what == "extra byte":
            wire.decode_payload("PUSH_OK", frame[16:])
        else:
            wire.decode(frame)
        print("FAIL pyclient-vec-t04 %s: accepted" % what)
    except wire.WireError as e:
        print(("PASS pyclient-vec-t04 %s refused" % what) if needle in str(e)
              else "FAIL pyclient-vec-t04 %s: %s" % (what, e))
PY
"$PY" "$TMP/bad.py"
