"""Server time to open a long thread: a 5,000-message thread and a fresh branch of a
10,000-message thread, through Django's full request path (middleware, view, templates).

Builds the threads in a scratch database (a SQLite file by default; `--database-url` for
PostgreSQL, whose test database it creates and drops), then times `GET /t/<id>/` and one
"earlier" page a number of times each and prints p50/p95, queries and HTML size.

Run: `make bench` (everything) or `python -m bench.long_threads --runs 20`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def configure(database_url: str | None) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="parley-bench-threads-"))
    os.environ["DATABASE_URL"] = database_url or f"sqlite:///{scratch / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "false")
    import django

    django.setup()


def thread_fill(thread, count: int, *, notices_every: int = 0) -> list:
    """`count` settled messages, alternating the person and the assistant (and a notice now
    and then), written in one go as a long-lived thread would hold them."""
    from django.db.models import F

    from apps.chat.models import Message, MessageKind, MessageStatus, Thread

    start = thread.next_seq
    rows = []
    for n in range(count):
        notice = notices_every and n % notices_every == notices_every - 1
        rows.append(
            Message(
                thread=thread,
                seq=start + n,
                speaker="parley" if notice else ("user" if n % 2 == 0 else "assistant"),
                kind=MessageKind.NOTICE if notice else MessageKind.CHAT,
                content=[{"type": "text", "text": f"Message number {start + n}."}],
                status=MessageStatus.DONE,
            )
        )
    Message.objects.bulk_create(rows, batch_size=1000)
    Thread.objects.filter(pk=thread.pk).update(next_seq=F("next_seq") + count)
    thread.refresh_from_db()
    return list(Message.objects.filter(thread=thread, seq__gte=start).order_by("seq"))


def timed(client, url: str, runs: int) -> tuple[list[float], int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm: templates compiled, connection open
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    with CaptureQueriesContext(connection) as queries:
        size = len(client.get(url).content)
    return times, len(queries), size


def report(label: str, times: list[float], queries: int, size: int) -> None:
    ordered = sorted(times)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    print(
        f"| {label} | {statistics.median(ordered):.1f} ms | {p95:.1f} ms | {queries} | "
        f"{size / 1024:.0f} KiB |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--database-url", help="default: a scratch SQLite file")
    args = parser.parse_args()
    configure(args.database_url)

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from apps.chat.records.sessions import session_create
    from apps.chat.records.threads import thread_branch
    from apps.chat.selectors import PAGE_SIZE
    from apps.roles.services import role_pack_load

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        role_pack_load("film-crew")
        user = get_user_model().objects.create_user("bench")  # force_login: no password
        long = session_create(owner=user, name="Long").active_thread
        thread_fill(long, 5_000)
        longer = session_create(owner=user, name="Longer").active_thread
        messages = thread_fill(longer, 10_000)
        branch = thread_branch(thread=longer, message=messages[-1])
        client = Client()
        client.force_login(user)

        print(
            f"\nOpening long threads ({connection.vendor}, {args.runs} runs each, "
            f"{PAGE_SIZE} messages a page):\n"
        )
        print("| request | p50 | p95 | queries | HTML |")
        print("|---|---|---|---|---|")
        report("5,000-message thread", *timed(client, f"/t/{long.public_id}/", args.runs))
        report(
            "fresh branch of a 10,000-message thread",
            *timed(client, f"/t/{branch.public_id}/", args.runs),
        )
        cursor = messages[-PAGE_SIZE].public_id
        report(
            "one earlier page (100 messages)",
            *timed(client, f"/t/{branch.public_id}/earlier/?before={cursor}", args.runs),
        )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
