"""Prompt-cache cost of Parley's shared request layout against a naive per-role layout.

Runs a scripted film-crew discussion (each turn: four roles in parallel, then the director)
through the real Anthropic adapter against the loopback emulator, whose cache accounting
follows Anthropic's rules (exact prefix at a breakpoint, 20-block lookback, minimum length,
entries usable once the writing response has begun). Three variants, side by side in one run:

- shared + staggered: Parley's layout; one parallel role starts first, the rest once its
  response has begun (the default for Anthropic);
- shared + simultaneous: Parley's layout, every parallel role fired at once;
- naive: each role's persona as its own system prompt, then the transcript.

Cost is in input-token units at Anthropic's multipliers: uncached 1, cache write 1.25,
cache read 0.1. Run: `make bench` (or `python -m bench.cache_layout --turns 8`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

import yaml  # noqa: E402

from apps.chat.council.prompting import (  # noqa: E402
    LAST_CUE,
    RosterEntry,
    TranscriptEntry,
    build_role_request,
)
from apps.chat.council.tools import tool_definitions  # noqa: E402
from apps.providers.emulator import Emulator, Script  # noqa: E402
from apps.providers.registry import get_adapter  # noqa: E402
from apps.providers.types import SystemBlock, TextDelta, Usage  # noqa: E402

PACK = Path(__file__).resolve().parent.parent / "apps/roles/packs/film-crew.yaml"
PARALLEL = ["editorial_architect", "visual_architect", "sound_designer", "actor_agent"]
ANSWER = (
    "From where I sit, the scene works if we hold the moment a beat longer, let the harbour "
    "breathe, and keep the audience a step behind the character until the reveal lands. "
) * 3


@dataclass
class Tally:
    uncached: int = 0
    written: int = 0
    read: int = 0
    seconds: float = 0.0

    def add(self, usage: Usage) -> None:
        self.uncached += usage.input_tokens
        self.written += usage.cache_write_tokens
        self.read += usage.cache_read_tokens

    @property
    def cost(self) -> float:
        return self.uncached + 1.25 * self.written + 0.1 * self.read


def roster() -> list[RosterEntry]:
    data = yaml.safe_load(PACK.read_text())
    return [
        RosterEntry(r["handle"], r["display_name"], r.get("description", ""), r.get("persona", ""))
        for r in data["roles"]
    ]


def request_for(layout: str, speaker: RosterEntry, transcript, last: bool, everyone):
    request = build_role_request(
        model="claude-sonnet-5",
        roster=everyone,
        speaker=speaker,
        transcript=transcript,
        tools=tool_definitions(),
        cue=LAST_CUE if last else "",
    )
    if layout == "naive":
        # The common alternative: each role's own persona is its system prompt.
        system = f"You are {speaker.display_name}. {speaker.persona}"
        request = replace(request, system=(SystemBlock(system, cache=True),))
    return request


async def call(adapter, emulator_url: str, request, tally: Tally, began: asyncio.Event | None):
    async for event in adapter.stream(request, api_key="bench-key", base_url=emulator_url):
        if began is not None and isinstance(event, TextDelta):
            began.set()
        if isinstance(event, Usage):
            tally.add(event)
    if began is not None:
        began.set()


async def run_variant(emulator: Emulator, layout: str, stagger: bool, turns: int) -> Tally:
    emulator.reset()
    adapter = get_adapter("anthropic")
    everyone = roster()
    by_handle = {entry.handle: entry for entry in everyone}
    transcript: list[TranscriptEntry] = []
    tally = Tally()
    started = time.monotonic()
    for turn in range(turns):
        question = f"Turn {turn}: how should the harbour scene at dawn feel? " * 2
        transcript.append(TranscriptEntry("User", question, is_user=True))
        emulator.script(
            *(Script(text=ANSWER, ttft_ms=150, tokens_per_second=400) for _ in range(5))
        )
        frozen = list(transcript)
        requests = [request_for(layout, by_handle[h], frozen, False, everyone) for h in PARALLEL]
        if stagger:
            began = asyncio.Event()
            first = asyncio.ensure_future(call(adapter, emulator.url, requests[0], tally, began))
            await began.wait()
            await asyncio.gather(
                first, *(call(adapter, emulator.url, r, tally, None) for r in requests[1:])
            )
        else:
            await asyncio.gather(*(call(adapter, emulator.url, r, tally, None) for r in requests))
        for handle in PARALLEL:
            transcript.append(TranscriptEntry(by_handle[handle].display_name, ANSWER))
        director = request_for(layout, by_handle["director"], list(transcript), True, everyone)
        await call(adapter, emulator.url, director, tally, None)
        transcript.append(TranscriptEntry("Director", ANSWER))
    tally.seconds = time.monotonic() - started
    return tally


def main() -> None:
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    emulator = Emulator(min_cache_tokens=1024).start_in_thread()
    try:
        variants = [("shared", True), ("shared", False), ("naive", False)]
        results = {
            (layout, stagger): asyncio.run(run_variant(emulator, layout, stagger, args.turns))
            for layout, stagger in variants
        }
    finally:
        emulator.stop()
    baseline = results[("naive", False)].cost
    print(f"{args.turns} turns x (4 parallel roles + director), emulated Anthropic cache\n")
    columns = ("uncached", "written", "read", "cost", "vs naive")
    print(f"{'variant':<24}" + "".join(f"{c:>10}" for c in columns) + f"{'wall s':>8}")
    for (layout, stagger), tally in results.items():
        name = f"{layout} + {'staggered' if stagger else 'simultaneous'}"
        print(
            f"{name:<24}{tally.uncached:>10}{tally.written:>10}{tally.read:>10}"
            f"{tally.cost:>10.0f}{tally.cost / baseline:>10.2f}{tally.seconds:>8.2f}"
        )


if __name__ == "__main__":
    main()
