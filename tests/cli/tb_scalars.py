"""tb_scalars.py - asks a running TensorBoard, over its own HTTP API, for one
run's scalars of one tag and compares them with a run's metrics.jsonl
(tests/cli/test_tensorboard.sh).

Usage: tb_scalars.py URL RUN TAG METRICS.jsonl FIELD [SECONDS]
  URL      TensorBoard's ("http://127.0.0.1:6006/")
  RUN      TensorBoard's run ("coordinator", "name/train")
  TAG      "train/loss", "eval/accuracy"
  FIELD    the metrics.jsonl member the tag's points are ("loss",
           "eval_accuracy")
Waits (at most SECONDS, 60) for TensorBoard to serve as many points as the
file has (it reloads its files every few seconds), then prints "ok", or
what differs, and exits 1. The API is TensorBoard 2.x's scalars plugin:
GET data/plugin/scalars/scalars?run=RUN&tag=TAG -> [[wall_time, step,
value], ...] (tensorboard/plugins/scalar/scalars_plugin.py).
Standard library only.
"""
import json
import math
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def expected(path, field):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = json.loads(line)
            if m.get(field) is not None:
                out.append((m["step"], m[field]))
    return out


def served(url, run, tag):
    q = urllib.parse.urlencode({"run": run, "tag": tag})
    try:
        with urllib.request.urlopen(url + "data/plugin/scalars/scalars?" + q, timeout=10) as r:
            return [(p[1], p[2]) for p in json.load(r)]
    except (urllib.error.URLError, OSError, ValueError):
        return None  # not up yet, or the run not loaded yet (400/404)


def same(a, b):
    if [s for s, _ in a] != [s for s, _ in b]:
        return False
    # TensorBoard keeps float32 (simple_value); metrics.jsonl 9 digits
    return all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-7) for (_, x), (_, y) in zip(a, b))


def main():
    url, run, tag, path, field = sys.argv[1:6]
    limit = float(sys.argv[6]) if len(sys.argv) > 6 else 60
    want = expected(path, field)
    if not want:
        print("no %s in %s" % (field, path))
        return 1
    got, deadline = None, time.monotonic() + limit
    while time.monotonic() < deadline:
        got = served(url, run, tag)
        if got is not None and len(got) >= len(want):
            break
        time.sleep(0.5)
    if got is not None and same(got, want):
        print("ok")
        return 0
    print("%s %s: TensorBoard has %s, metrics.jsonl %s" % (run, tag, got and got[:5], want[:5]))
    return 1


if __name__ == "__main__":
    sys.exit(main())
