"""A host kept busy by other work (a shared VPS, a laptop): `--busy N` starts N processes
that spin on the CPU for as long as the benchmark runs."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def busy_host(hogs: int) -> Iterator[None]:
    spinning = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(hogs)]
    try:
        yield
    finally:
        for hog in spinning:
            hog.kill()
            hog.wait()
