"""How long a worker lets streamed text gather before publishing it: not at all while the
process has time, longer as its load grows.

A push costs the same whatever it carries, so batching is what keeps CPU per reply bounded
under load; but a person watching one reply should see each piece the moment it arrives. The
tick is therefore zero while the process is lightly loaded and widens with two measured
signals, up to `PARLEY_FLUSH_INTERVAL_MS` (the ceiling):

- the streams the process hosts: each one adds to the pushes its loop makes;
- the loop's lag (how late its timers fire): a loop that falls behind spends less on pushes
  and more on the streams themselves, whatever the count says (a shared host, a slow disk).
"""

from __future__ import annotations

from django.conf import settings

# Up to this many streams a process publishes every piece as it comes (with no lag).
LIVE_STREAMS = 2
# At this many streams the tick reaches the ceiling. It rises steeply at first (as the square
# root of the load): a push costs the same whatever it carries, so the first few streams past
# the live ones save most by sharing pushes, while the tick stays well under the ceiling.
FULL_STREAMS = 80
# Loop lag (seconds) under which the loop counts as keeping up, and at which the tick reaches
# the ceiling whatever the streams.
EASY_LAG = 0.004
FULL_LAG = 0.040
LAG_SMOOTHING = 0.3  # weight of the newest lag sample


class Pacer:
    def __init__(self) -> None:
        self.lag = 0.0  # seconds, smoothed

    def observe_lag(self, seconds: float) -> None:
        """How late a timer of the loop fired (sampled by the hub's housekeeping)."""
        self.lag += LAG_SMOOTHING * (max(0.0, seconds) - self.lag)

    def forget(self) -> None:
        """The process went idle: a lag measured then says nothing about the next streams."""
        self.lag = 0.0

    def load(self, streams: int) -> float:
        """0 (live) to 1 (the ceiling): the larger of the two signals."""
        by_streams = max(0.0, (streams - LIVE_STREAMS) / (FULL_STREAMS - LIVE_STREAMS)) ** 0.5
        by_lag = (self.lag - EASY_LAG) / (FULL_LAG - EASY_LAG)
        return min(1.0, max(0.0, by_streams, by_lag))

    def tick(self, streams: int) -> float:
        """Seconds a reply's text gathers between publishes (0: each piece at once), never
        under `PARLEY_FLUSH_MIN_MS` nor over the ceiling."""
        ceiling = settings.PARLEY_FLUSH_INTERVAL_MS / 1000
        floor = min(ceiling, settings.PARLEY_FLUSH_MIN_MS / 1000)
        return max(floor, ceiling * self.load(streams))
