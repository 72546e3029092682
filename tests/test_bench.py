"""The cache-layout benchmark keeps running, and its central claim keeps holding."""

import asyncio

import pytest

from apps.providers.emulator import Emulator


@pytest.mark.django_db
def test_the_shared_layout_costs_less_than_the_naive_one():
    from bench.cache_layout import run_variant

    emulator = Emulator(min_cache_tokens=1024).start_in_thread()
    try:
        shared = asyncio.run(run_variant(emulator, "shared", True, 3))
        simultaneous = asyncio.run(run_variant(emulator, "shared", False, 3))
        naive = asyncio.run(run_variant(emulator, "naive", False, 3))
    finally:
        emulator.stop()
    assert shared.read > naive.read
    assert shared.cost < simultaneous.cost < naive.cost


@pytest.mark.django_db
def test_across_a_long_pause_parleys_ttl_choice_costs_less_than_either_fixed_ttl():
    from bench.cache_layout import run_pause

    emulator = Emulator(min_cache_tokens=1024).start_in_thread()
    try:
        costs = {
            policy: asyncio.run(run_pause(emulator, policy, 8, paced=False)).cost
            for policy in ("5m", "1h", "parley")
        }
    finally:
        emulator.stop()
    assert costs["parley"] < costs["5m"] and costs["parley"] < costs["1h"], costs
