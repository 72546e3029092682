"""Trimming big tool results: relevant items kept in order, the rest named as left out."""

import json

from apps.providers.evidence import trim, trim_round


def test_a_small_result_goes_whole():
    assert trim("short", query="anything", budget=100) is None
    assert trim_round(["a" * 50, "b" * 50], query="", round_chars=1000) == [None, None]


def test_the_most_relevant_items_are_kept_in_their_order():
    items = [{"scene": n, "text": "harbour at dawn" if n in (3, 17) else "office lunch"}
             for n in range(40)]  # fmt: skip
    out = trim(json.dumps(items), query="What happens at the harbour at dawn?", budget=400)
    assert out is not None
    assert out.index('"scene": 3') < out.index('"scene": 17')
    assert "[Trimmed:" in out and "left out" in out and len(out) < 700


def test_an_item_over_its_cap_is_shortened_even_when_the_total_fits():
    out = trim("x" * 3000, query="", budget=10_000, item_chars=1500)
    assert out is not None and out.startswith("x" * 1500) and "…[item cut]" in out
    assert "1 of them shortened" in out


def test_a_round_shares_its_budget_small_results_whole():
    small, big = "small result", "\n".join(f"line {n} of noise" for n in range(2000))
    trimmed_small, trimmed_big = trim_round([small, big], query="noise", round_chars=3000)
    assert trimmed_small is None and trimmed_big is not None
    assert len(trimmed_big) < 3000 + 300
