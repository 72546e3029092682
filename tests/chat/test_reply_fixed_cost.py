"""A reply's fixed cost (issue 36): every query of a one-token reply, counted in every thread of
the process — the composer POST, the worker's claim and start, the settle, the turn's end and
the pushes that show it — each step against its budget, so a query added on the way is seen."""

from __future__ import annotations

import sys
import threading
from collections import Counter

import pytest
from django.db.backends.utils import CursorWrapper

from apps.chat.live.hub import stream_hub
from apps.chat.models import Message
from tests.chat.test_write_transactions import settle
from tests.conftest import wait_until

ROOT_MARK = "/apps/"


class Queries:
    """Every query on every connection, with the Parley functions it was made under."""

    def __init__(self, monkeypatch) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, str]] = []  # (thread, step, sql)
        execute = CursorWrapper._execute
        many = CursorWrapper._executemany
        recorder = self

        def recording(cursor, sql, params, *args):
            recorder.add(sql)
            return execute(cursor, sql, params, *args)

        def recording_many(cursor, sql, param_list, *args):
            recorder.add(sql)
            return many(cursor, sql, param_list, *args)

        monkeypatch.setattr(CursorWrapper, "_execute", recording)
        monkeypatch.setattr(CursorWrapper, "_executemany", recording_many)

    def add(self, sql: str) -> None:
        frame, chain = sys._getframe(2), []
        while frame is not None:
            path = frame.f_code.co_filename
            if ROOT_MARK in path and "/tests/" not in path:
                chain.append(frame.f_code.co_name)
            frame = frame.f_back
        step = " < ".join(chain) or "?"  # innermost first
        with self.lock:
            self.seen.append((threading.current_thread().name, step, sql[:90]))

    def by_phase(self) -> Counter:
        """Each query's place on the reply's path (the test's own reads left out)."""
        phases: Counter = Counter()
        for thread, step, _ in self.seen:
            for phase, marks in PHASES:
                if (thread.startswith("parley-announcer") and phase == "pushes announced") or any(
                    mark in step for mark in marks
                ):
                    phases[phase] += 1
                    break
            else:
                if step != "?":
                    phases["other: " + step] += 1
        return phases


# Where each query is made, in the order of a reply's life.
PHASES = (
    ("composer POST", ("message_create", "__call__")),  # (Django's session and user reads)
    ("worker claim and start", ("reply_start",)),
    ("settle", ("reply_settle", "reply_settled_next", "turn_release")),
    ("counts push", ("settled_counts_events",)),
    ("pushes announced", ()),  # the announcer thread: rendered once for every tab
)
# The budget of each phase (what it makes today on SQLite, whose transactions add a BEGIN):
# a query more fails the test. What they are, and why each is there:
# - POST: Django's session and user; the thread, scoped to the person's access; one write
#   transaction (the thread's lock-read, queue and busy checks, the session and its roles,
#   the sequence numbers, the topic's previous message, the message, the turn, the reply's
#   placeholder, the session's updated time, the dispatch time); the models' reads (for the
#   composer's "reads a description") and the bubble's attachments for the answer.
# - start: the claim (the update, then the row with its session and owner), the roster,
#   whether the room is shared, the history and its turns, the models' reads and the
#   attachments, the speakers' names, the context version, the stage's cue, the MCP tools.
# - settle: one write transaction (the final text), the bubble's roles and prices; then, once
#   the bubble is out, one more (the turn, locked, and its next stage; the queue's next), the
#   turn's release (nothing else waits).
# - counts push: once a second for every reply settled in it: the threads, the session's and
#   threads' usage (one grouped query each), the strip's last turn and recent replies, the
#   room's people and their unread threads, and the price table, read once for them all.
# - pushes announced: the turn's bubbles (with the replies' status as it is by then: a worker
#   may have claimed one) and its end, rendered once for every tab of the room.
BUDGET = {
    "composer POST": 20,
    "worker claim and start": 12,
    "settle": 18,
    "counts push": 11,
    "pushes announced": 11,
}


@pytest.mark.django_db(transaction=True)
def test_a_one_token_reply_makes_few_queries_each_counted(
    client, alice, alice_thread, celery_worker, fast_demo, monkeypatch
):
    fast_demo.PARLEY_CHECKPOINT_INTERVAL_MS = 60_000
    client.force_login(alice)
    url = f"/t/{alice_thread.public_id}/messages/"
    first = client.post(url, {"text": "@assistant How should the harbour scene open?"},
                        HTTP_HX_REQUEST="true")  # fmt: skip
    assert first.status_code == 200
    settle(Message.objects.filter(thread=alice_thread).exclude(speaker="user").latest("pk").pk)
    wait_until(lambda: not stream_hub().counts_pending)  # the first reply's counts are out
    queries = Queries(monkeypatch)
    answer = client.post(url, {"text": "And the closing shot?"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    settle(Message.objects.filter(thread=alice_thread).exclude(speaker="user").latest("pk").pk)
    wait_until(lambda: not stream_hub().counts_pending)
    phases = queries.by_phase()
    report = "\n".join(f"{count:3d}  {phase}" for phase, count in phases.items())
    print(report)
    assert set(phases) == set(BUDGET), report
    assert all(phases[phase] <= BUDGET[phase] for phase in BUDGET), report
