"""`parley ask "…" --session NAME [--attach FILE …]`: post one message (with its attachments),
wait for the turn's replies, print them (or JSON with --json), exit 0 when every reply finished,
1 when one failed or was stopped."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from parley_cli.client import Api, ThreadState, follow

IN_FLIGHT = {"queued", "streaming"}
MARK = re.compile(r"\[(L\d{1,12})\]")


def with_citations(text: str, citations: list[dict]) -> str:
    """A reply as a terminal shows it: its library marks ([L12]) numbered as the web page
    numbers them, and a footnote for each: the document, the page, and each quotation made
    with it, checked (✓, ✓ close, or ⚠ not found in the cited passage)."""
    if not citations:
        return text
    numbers = {cited["mark"]: cited["number"] for cited in citations}
    shown = MARK.sub(lambda m: f"[{numbers[m[1]]}]" if m[1] in numbers else m[0], text).rstrip()
    notes = []
    for cited in citations:
        page = f", page {cited['page']}" if cited["page"] else ""
        notes.append(f"[{cited['number']}] {cited['document_name']}{page}")
        for quote in cited["quotes"]:
            verdict = (
                "✓" if quote["verified"] and quote["exact"]
                else "✓ close" if quote["verified"]
                else "⚠ not found in the cited passage"
            )  # fmt: skip
            notes.append(f"  “{quote['quote'][:120]}” {verdict}")
    # Two spaces before each line's end: a line break in Markdown (`parley chat` renders it).
    return shown + "\n\n" + "  \n".join(notes)


async def ask(
    api: Api,
    text: str,
    *,
    session: str,
    thread: str | None,
    timeout: float,
    attach: Sequence[Path] = (),
):
    """The turn's replies (each a message dict with its final text), in transcript order;
    `attach`: files sent with the message (images, PDFs, text files)."""
    found = await api.find_session(session)
    thread_id = thread or found["active_thread"]
    attached = [a["id"] for a in await api.attach(thread_id, list(attach))] if attach else []
    state = ThreadState()
    events = follow(api, thread_id)
    async for kind, data in events:  # the stream is open before posting: nothing is missed
        state.apply(kind, data)
        if kind == "snapshot" or kind == "message":
            break
    posted = await api.post(thread_id, text, attached)
    wanted = {reply["id"] for reply in posted["replies"]}
    for message in posted["replies"] + posted["notices"]:
        state.know(message)
    mine_seq = posted["message"]["seq"] if posted["message"] else None
    if posted["queued"]:
        print("A turn is running: your message waits in the queue…", file=sys.stderr)

    def settled() -> bool:
        nonlocal wanted
        if mine_seq is None:
            return False
        if not wanted:  # a queued post: its replies are the role messages after it
            wanted = {
                reply.id for reply in state.messages.values()
                if reply.data["seq"] > mine_seq and reply.data["speaker"] != "user"
            }  # fmt: skip
        return bool(wanted) and all(state.messages[r].status not in IN_FLIGHT for r in wanted)

    if not posted["replies"] and not posted["queued"]:  # a command: its notices are the answer
        return posted["notices"]

    async def wait() -> None:
        nonlocal mine_seq
        async for kind, data in events:
            reply = state.apply(kind, data)
            if (
                mine_seq is None and reply is not None and reply.data["speaker"] == "user"
                and reply.data["text"] == text.strip()
            ):  # fmt: skip
                mine_seq = reply.data["seq"]
            if settled():
                return

    if not settled():
        await asyncio.wait_for(wait(), timeout)
    await events.aclose()
    replies = sorted((state.messages[r] for r in wanted), key=lambda r: r.data["seq"])
    return [{**reply.data, "text": reply.text} for reply in replies]


def print_replies(replies: list[dict], *, as_json: bool) -> int:
    if as_json:
        keep = ("id", "seq", "speaker", "speaker_name", "status", "text", "usage", "model")
        print(json.dumps([{key: reply.get(key) for key in keep} for reply in replies], indent=2))
    else:
        for reply in replies:
            status = "" if reply["status"] == "done" else f" ({reply['status']})"
            print(f"── {reply['speaker_name']}{status} ──")
            print(with_citations(reply["text"], reply.get("citations") or []).rstrip())
            print()
    return 0 if all(reply["status"] == "done" for reply in replies) else 1
