"""The worker's tick: live while the process has time, widening with streams and loop lag."""

from __future__ import annotations

from apps.chat.live.pacing import FULL_LAG, FULL_STREAMS, LIVE_STREAMS, Pacer


def test_a_lightly_loaded_process_publishes_each_piece_at_once(settings):
    settings.PARLEY_FLUSH_INTERVAL_MS = 150
    pacer = Pacer()
    for streams in range(LIVE_STREAMS + 1):
        assert pacer.tick(streams) == 0.0
    pacer.observe_lag(0.001)  # a millisecond late: still keeping up
    assert pacer.tick(1) == 0.0


def test_the_tick_widens_with_streams_up_to_the_configured_ceiling(settings):
    settings.PARLEY_FLUSH_INTERVAL_MS = 150
    pacer = Pacer()
    ticks = [pacer.tick(n) for n in (LIVE_STREAMS + 1, 10, 30, FULL_STREAMS, 500)]
    assert ticks == sorted(ticks) and 0 < ticks[0] < ticks[1] < ticks[2]
    assert ticks[-2] == ticks[-1] == 0.150
    settings.PARLEY_FLUSH_INTERVAL_MS = 40  # the ceiling is a setting
    assert pacer.tick(1000) == 0.040


def test_a_lagging_loop_batches_whatever_the_count_and_recovers(settings):
    settings.PARLEY_FLUSH_INTERVAL_MS = 150
    pacer = Pacer()
    for _ in range(20):
        pacer.observe_lag(FULL_LAG * 2)
    assert pacer.tick(1) == 0.150
    for _ in range(40):
        pacer.observe_lag(0.0)
    assert pacer.tick(1) == 0.0
    pacer.observe_lag(-1.0)  # a timer cannot fire early: never a negative lag
    assert pacer.lag >= 0.0


def test_a_lag_measured_before_the_process_went_idle_is_forgotten(settings):
    settings.PARLEY_FLUSH_INTERVAL_MS = 150
    pacer = Pacer()
    pacer.observe_lag(FULL_LAG * 10)
    assert pacer.tick(1) == 0.150
    pacer.forget()
    assert pacer.tick(1) == 0.0


def test_a_configured_floor_keeps_some_gathering_even_with_time_to_spare(settings):
    settings.PARLEY_FLUSH_INTERVAL_MS, settings.PARLEY_FLUSH_MIN_MS = 150, 30
    pacer = Pacer()
    assert pacer.tick(1) == 0.030 and pacer.tick(1000) == 0.150
    settings.PARLEY_FLUSH_MIN_MS = 500  # never over the ceiling
    assert pacer.tick(1) == 0.150
