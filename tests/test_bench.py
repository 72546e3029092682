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


@pytest.mark.django_db
def test_an_attached_image_is_read_from_the_cache_by_every_role_after_the_first():
    """The bench's image row: four roles of an `@all` about a 1 MB image; with the shared
    layout the first writes the image into the cache and the other three read it (the
    emulator's usage says so), where per-role prompts write it four times."""
    from bench.cache_layout import photo, run_image_turn

    image = photo(1.0)
    emulator = Emulator(min_cache_tokens=1024).start_in_thread()
    try:
        shared = asyncio.run(run_image_turn(emulator, "shared", image))
        naive = asyncio.run(run_image_turn(emulator, "naive", image))
    finally:
        emulator.stop()
    first, *others = shared
    assert first[3] > 1_568 and first[4] == 0  # written, with the image's tokens in it
    assert all(row[4] == first[3] and row[3] == 0 for row in others)  # read, not written
    assert all(row[1] > len(image) for row in shared)  # each request carries the image
    assert all(row[4] == 0 and row[3] > 1_568 for row in naive)
