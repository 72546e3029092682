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
