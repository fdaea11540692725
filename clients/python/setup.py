"""setup.py - what pyproject.toml cannot say: drover_client/_wire.py, the
message table, is generated at build time from drover's C headers by
tools/wire_py.py (the generator `make` runs; standard library only), into
the package being built, never into the source tree.

So `pip install clients/python` works from a clean checkout (no `make`
needed: the table always matches the C side of that checkout). Built
somewhere without the C headers (an sdist unpacked elsewhere), the
_wire.py that `make` wrote into drover_client/ is used, and without one
the build stops saying so.
"""
import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", "..", "src"))
GEN = os.path.normpath(os.path.join(HERE, "..", "..", "tools", "wire_py.py"))


class BuildWithWire(build_py):
    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "drover_client", "_wire.py")
        if os.path.isfile(GEN) and os.path.isfile(os.path.join(SRC, "proto", "wire_msgs.h")):
            subprocess.check_call([sys.executable, GEN, SRC, out])
        elif not os.path.isfile(out):
            sys.exit("drover_client: drover_client/_wire.py (the message table) is generated "
                     "from drover's C headers, which are not here (%s): install from a drover "
                     "source tree (pip install clients/python), or run `make` in one first"
                     % SRC)


setup(cmdclass={"build_py": BuildWithWire})
