"""Prompt-cache cost of Parley's shared request layout against a naive per-role layout.

Runs a scripted film-crew discussion (each turn: four roles in parallel, then the director)
through the real Anthropic adapter against the loopback emulator, whose cache accounting
follows Anthropic's rules (exact prefix at a breakpoint, 20-block lookback, minimum length,
entries usable once the writing response has begun). Three variants, side by side in one run:

- shared + staggered: Parley's layout; one parallel role starts first, the rest once its
  response has begun (the default for Anthropic);
- shared + simultaneous: Parley's layout, every parallel role fired at once;
- naive: each role's persona as its own system prompt, then the transcript.

Cost is in input-token units at Anthropic's multipliers: uncached 1, cache write 1.25 (2 for
a 1-hour entry), cache read 0.1.

A second run is the cache's TTL: 10 turns of the same `@all` with a person who reads each
turn's replies for 90-150 s before answering and, after the fifth turn, leaves for 6 minutes
(the emulator's clock is advanced; nothing waits). Its three policies, side by side: every
entry for 5 minutes, every entry for an hour, and Parley's choice (`council/cache_ttl.py`,
learning from the gaps so far). Its cost is against sending every token uncached.

Run: `make bench` (or `python -m bench.cache_layout --turns 8`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

import yaml  # noqa: E402

from apps.chat.council import cache_ttl  # noqa: E402
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
EVERYONE = ["assistant", *PARALLEL]  # `@all`: every role but the director, then the director
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

    written_1h: int = 0

    def add_1h(self, usage: Usage) -> None:
        self.written_1h += usage.cache_write_1h_tokens

    @property
    def cost(self) -> float:
        return self.uncached + 1.25 * self.written + 0.75 * self.written_1h + 0.1 * self.read

    @property
    def sent(self) -> int:
        return self.uncached + self.written + self.read


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
            tally.add_1h(event)
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


READING_GAPS = [95, 140, 110, 150, 120, 100, 130, 90, 145, 115]  # seconds before each turn
PAUSE_AFTER_TURN, PAUSE_SECONDS = 5, 360


def with_ttl(policy: str, request, *, gaps: list[float], new_texts: list[str], closing: bool):
    if policy == "parley":
        return cache_ttl.for_request(request, new_texts=new_texts, gaps=gaps, closing=closing)
    ttl = "1h" if policy == "1h" else "5m"
    return replace(request, system_cache_ttl=ttl, history_cache_ttl=ttl)


async def run_pause(
    emulator: Emulator, policy: str, turns: int, pause: bool = True, paced: bool = True
) -> Tally:
    """The staggered shared layout over `turns` with reading gaps and one long pause
    (`paced=False`: replies stream at once, for the tests; the tokens are the same)."""
    emulator.reset()
    adapter = get_adapter("anthropic")
    everyone = roster()
    by_handle = {entry.handle: entry for entry in everyone}
    transcript: list[TranscriptEntry] = []
    gaps: list[float] = []
    tally = Tally()
    started = time.monotonic()
    for turn in range(turns):
        if turn:
            gap = PAUSE_SECONDS if pause and turn == PAUSE_AFTER_TURN else READING_GAPS[turn]
            emulator.advance(gap)
            gaps.append(gap)
        # What the previous turn's closing (director's) request did not send.
        new_texts = [entry.text for entry in transcript[-1:]]
        question = f"Turn {turn}: how should the harbour scene at dawn feel? " * 2
        transcript.append(TranscriptEntry("User", question, is_user=True))
        new_texts.append(question)
        emulator.script(
            *(
                Script(text=ANSWER, ttft_ms=150 if paced else 0, tokens_per_second=400 * paced)
                for _ in range(len(EVERYONE) + 1)
            )
        )
        frozen = list(transcript)
        requests = [
            with_ttl(
                policy,
                request_for("shared", by_handle[h], frozen, False, everyone),
                gaps=gaps,
                new_texts=new_texts,
                closing=False,
            )
            for h in EVERYONE
        ]
        began = asyncio.Event()
        first = asyncio.ensure_future(call(adapter, emulator.url, requests[0], tally, began))
        await began.wait()
        await asyncio.gather(
            first, *(call(adapter, emulator.url, r, tally, None) for r in requests[1:])
        )
        for handle in EVERYONE:
            transcript.append(TranscriptEntry(by_handle[handle].display_name, ANSWER))
        director = with_ttl(
            policy, request_for("shared", by_handle["director"], list(transcript), True, everyone),
            gaps=gaps, new_texts=new_texts + [ANSWER] * len(EVERYONE), closing=True,
        )  # fmt: skip
        await call(adapter, emulator.url, director, tally, None)
        transcript.append(TranscriptEntry("Director", ANSWER))
    tally.seconds = time.monotonic() - started
    return tally


IMAGE_KEY = "bench-image"


def photo(megabytes: float = 1.0) -> bytes:
    """A photo-like PNG of about `megabytes` (noise does not compress)."""
    import io

    from PIL import Image

    side = int((megabytes * 1_000_000 / 3) ** 0.5)
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, "PNG")
    return out.getvalue()


async def run_image_turn(emulator: Emulator, layout: str, image: bytes) -> list[tuple]:
    """One `@all` turn of four parallel roles about one attached image (a person's message
    with it, as Parley sends it): per role, the request's bytes and its cache figures."""
    emulator.reset()
    adapter = get_adapter("anthropic")
    everyone = roster()
    by_handle = {entry.handle: entry for entry in everyone}
    media = (
        {"type": "text", "text": "[image 1 of this message: storyboard.png]"},
        {"type": "image", "attachment": IMAGE_KEY, "media_type": "image/png",
         "name": "storyboard.png"},
    )  # fmt: skip
    question = "How should the harbour scene at dawn look, given this storyboard frame? " * 3
    transcript = [TranscriptEntry("User", question, is_user=True, media=media)]
    emulator.script(*(Script(text=ANSWER, ttft_ms=150, tokens_per_second=400) for _ in PARALLEL))
    requests = [request_for(layout, by_handle[h], transcript, False, everyone) for h in PARALLEL]
    requests = [replace(request, blobs={IMAGE_KEY: image}) for request in requests]
    tallies = [Tally() for _ in PARALLEL]
    began = asyncio.Event()
    first = asyncio.ensure_future(call(adapter, emulator.url, requests[0], tallies[0], began))
    await began.wait()
    rest = zip(requests[1:], tallies[1:], strict=True)
    await asyncio.gather(first, *(call(adapter, emulator.url, r, t, None) for r, t in rest))
    rows = []
    for handle, tally in zip(PARALLEL, tallies, strict=True):
        name = by_handle[handle].display_name
        (record,) = [r for r in emulator.requests if name in json.dumps(r.body["messages"][-1])]
        rows.append(
            (handle, len(json.dumps(record.body)), tally.uncached, tally.written, tally.read)
        )
    return rows


def main() -> None:
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--pause-turns", type=int, default=10)
    args = parser.parse_args()
    emulator = Emulator(min_cache_tokens=1024).start_in_thread()
    try:
        variants = [("shared", True), ("shared", False), ("naive", False)]
        results = {
            (layout, stagger): asyncio.run(run_variant(emulator, layout, stagger, args.turns))
            for layout, stagger in variants
        }
        paused = {
            policy: asyncio.run(run_pause(emulator, policy, args.pause_turns))
            for policy in ("5m", "1h", "parley")
        }
        # The floor no TTL policy can beat: the same run without the pause.
        paused["floor"] = asyncio.run(run_pause(emulator, "5m", args.pause_turns, pause=False))
        image = photo(1.0)
        pictured = {
            layout: asyncio.run(run_image_turn(emulator, layout, image))
            for layout in ("shared", "naive")
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
    print(
        f"\n{args.pause_turns} turns of @all (5 parallel roles + director), reading gaps of "
        f"90-150 s, a {PAUSE_SECONDS // 60}-minute pause after turn {PAUSE_AFTER_TURN}\n"
    )
    columns = ("uncached", "written", "of it 1h", "read", "cost", "vs none")
    print(f"{'cache TTL':<24}" + "".join(f"{c:>10}" for c in columns))
    names = {
        "5m": "5 minutes always",
        "1h": "1 hour always",
        "parley": "Parley's choice",
        "floor": "(no pause, 5 minutes)",
    }
    for policy, tally in paused.items():
        print(
            f"{names[policy]:<24}{tally.uncached:>10}{tally.written:>10}{tally.written_1h:>10}"
            f"{tally.read:>10}{tally.cost:>10.0f}{tally.cost / tally.sent:>10.3f}"
        )

    print(
        f"\nOne @all turn of 4 parallel roles about one attached {len(image) / 1e6:.1f} MB image "
        "(staggered; cost against sending every token uncached)\n"
    )
    columns = ("bytes sent", "uncached", "written", "read")
    print(f"{'layout, role':<32}" + "".join(f"{c:>11}" for c in columns))
    for layout, rows in pictured.items():
        for handle, size, uncached, written, read in rows:
            print(f"{layout + ', ' + handle:<32}{size:>11,}{uncached:>11}{written:>11}{read:>11}")
        total = Tally(
            uncached=sum(r[2] for r in rows), written=sum(r[3] for r in rows),
            read=sum(r[4] for r in rows),
        )  # fmt: skip
        sent = sum(r[1] for r in rows)
        print(
            f"{layout + ', the turn':<32}{sent:>11,}{total.uncached:>11}{total.written:>11}"
            f"{total.read:>11}   cost {total.cost / total.sent:.3f}"
        )


if __name__ == "__main__":
    main()
