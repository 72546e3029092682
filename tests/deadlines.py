"""Deadlines that scale with the machine's load: the suite's waits for servers, workers and
browsers are for events, and an event takes longer on a host busy with other work (a shared
2-core machine at load 11 to 27 ran the suite's heavy tests past fixed deadlines that they met
alone). A wait of `seconds` on a quiet machine becomes `scaled(seconds)`: the same when the
load is at most the core count, up to MAX_SCALE times longer when it is far above."""

from __future__ import annotations

import os

MAX_SCALE = 6.0


def load_scale() -> float:
    """How many times busier than its cores the machine is now (at least 1)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return min(MAX_SCALE, max(1.0, load / (os.cpu_count() or 1)))


def scaled(seconds: float) -> float:
    return seconds * load_scale()
