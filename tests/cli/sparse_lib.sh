# sparse_lib.sh - what the sparse-table tests share (sourced after lib.sh,
# with PY the venv's python).
#
# same_models A B [MIN_ROWS]: two safetensors models equal: the same
# tensors, every dense one equal, and each table's rows compared by id
# (a cluster's c:save writes them in the order the ps sent them); at
# least one table, each holding more than MIN_ROWS rows when given.
same_models() {
  "$PY" - "$1" "$2" "${3:-0}" <<'PY'
import sys, numpy as np
from safetensors.numpy import load_file
a, b, least = load_file(sys.argv[1]), load_file(sys.argv[2]), int(sys.argv[3])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
assert any(k.endswith(".rows") for k in a), sorted(a)
for k in a:
    if k.endswith(".ids"): continue
    if k.endswith(".rows"):
        ia, ib = a[k[:-5] + ".ids"], b[k[:-5] + ".ids"]
        oa, ob = np.argsort(ia), np.argsort(ib)
        assert len(ia) > least and (ia[oa] == ib[ob]).all(), k
        assert (a[k][oa] == b[k][ob]).all(), k
    else:
        assert (a[k] == b[k]).all(), k
PY
}
