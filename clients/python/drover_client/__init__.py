"""drover_client - a Python program's side of drover's wire protocol.

    import drover_client
    with drover_client.connect("runs/mnist-20261126-0412") as run:
        for m in run.metrics(timeout=30):
            print(m.tag, m.step, m.value)
        # with the script inside c:serve { predict = exp }:
        outputs = run.predict([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])  # one row per input

Run.predict(rows, batch=None) -> list of rows: see its docstring.

connect() takes a run directory, or "HOST:PORT" with secret_file=. The
frames come from the same message descriptions as drover's C code
(src/proto/wire_msgs.h, read by tools/wire_py.py into _wire.py at build time).
drover_client.spark feeds RDDs to a run from a PySpark program (spark.py).

Installing: `pip install clients/python` from a drover source tree (its
setup.py generates _wire.py from the C headers there); its version is its
own, __version__ below.
"""
__version__ = "0.1.0"

from .auth import AuthError
from .client import Event, Metric, Run, connect
from .conn import Closed, DroverError
from .feed import FeedResult
from . import spark  # noqa: F401 (drover_client.spark.feed; needs pyspark only when called)
from .wire import WireError

__all__ = ["__version__", "connect", "Run", "Metric", "Event", "FeedResult", "DroverError", "Closed",
           "AuthError", "WireError"]
