"""How often one message writes to the database, counted in every thread of the process (the
post's and the real worker's): each write transaction is a turn of SQLite's single writer and
a commit PostgreSQL has to flush, so the hot path keeps them few."""

from __future__ import annotations

import threading
import time

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

from apps.chat.council.posting import message_post
from apps.chat.models import Message, MessageStatus, Thread
from tests.conftest import wait_worker_idle

WRITES = ("INSERT", "UPDATE", "DELETE")


class WriteTransactions:
    """Counts committed transactions that wrote rows, on every connection, and apart from
    them those that only locked rows (`SELECT … FOR UPDATE`, which SQLite does not have)."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        self.locked_only = 0
        self.lock = threading.Lock()
        self.pending: dict[int, list] = {}  # connection -> [its first statement, wrote rows]
        self.seen: list[str] = []
        counter = self
        execute, commit = CursorWrapper._execute, BaseDatabaseWrapper._commit

        def counting_execute(cursor, sql, params, *args):
            head = sql.lstrip()[:6].upper()
            if head in WRITES or " FOR UPDATE" in sql:
                if cursor.db.in_atomic_block:
                    entry = counter.pending.setdefault(id(cursor.db), [sql[:60], False])
                    entry[1] = entry[1] or head in WRITES
                elif head in WRITES:  # autocommit: a transaction of its own
                    counter.add(sql[:60])
            return execute(cursor, sql, params, *args)

        def counting_commit(db):
            if id(db) in counter.pending:
                sql, wrote = counter.pending.pop(id(db))
                if wrote:
                    counter.add(sql)
                else:
                    with counter.lock:
                        counter.locked_only += 1
            return commit(db)

        monkeypatch.setattr(CursorWrapper, "_execute", counting_execute)
        monkeypatch.setattr(BaseDatabaseWrapper, "_commit", counting_commit)

    def add(self, sql: str) -> None:
        with self.lock:
            self.count += 1
            self.seen.append(sql)


def settle(message_id: int) -> None:
    deadline = time.monotonic() + 20
    while Message.objects.get(pk=message_id).status != MessageStatus.DONE:
        assert time.monotonic() < deadline, "the reply did not settle"
        time.sleep(0.05)
    wait_worker_idle()  # what runs after the settle's commit has run


@pytest.mark.django_db(transaction=True)
def test_a_message_with_one_reply_commits_three_write_transactions(
    alice_thread, celery_worker, fast_demo, monkeypatch
):
    """The post (message, turn, reply placeholder), the worker's claim, and the settle (the
    final text) — not one more per step. What the settle lets go on runs after the settled
    bubble is out: it locks the turn, and writes nothing when the turn simply ends (no queue,
    no next stage). (A long reply adds a checkpoint of its text every few seconds: none within
    this one.)"""
    fast_demo.PARLEY_CHECKPOINT_INTERVAL_MS = 60_000
    first = message_post(thread=alice_thread, author=alice_thread.session.owner,
                         text="@assistant How should the harbour scene open?")  # fmt: skip
    settle(first.replies[0].pk)  # the thread's first message also names it: not counted
    writes = WriteTransactions(monkeypatch)
    posted = message_post(thread=alice_thread, author=alice_thread.session.owner,
                          text="And the closing shot?")  # fmt: skip
    assert len(posted.replies) == 1
    settle(posted.replies[0].pk)
    assert Message.objects.get(pk=posted.replies[0].pk).text
    assert writes.count == 3, writes.seen
    assert writes.locked_only <= 1, writes.seen  # the turn's lock (PostgreSQL's FOR UPDATE)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("again", ["continue", "regenerate"])
def test_continue_or_regenerate_waits_for_a_settle_holding_the_turn_and_does_not_deadlock(
    again, alice_thread, celery_worker, fast_demo
):
    """Clicked the moment a reply settles, Continue or Regenerate meets the settle's next step
    (`reply_settled_next`), which holds the turn and then locks the thread. Both take the turn
    first, so one waits for the other; on PostgreSQL the other order was a deadlock (the
    button's request failed)."""
    from django.db import transaction

    from apps.chat.council.orchestration import locked_turn
    from apps.chat.council.replies import reply_continue, reply_rerun

    posted = message_post(thread=alice_thread, author=alice_thread.session.owner,
                          text="@assistant How should the harbour scene open?")  # fmt: skip
    settle(posted.replies[0].pk)
    reply = Message.objects.get(pk=posted.replies[0].pk)
    if again == "continue":  # cut off at the length limit
        Message.objects.filter(pk=reply.pk).update(stop_reason="max_tokens")
        reply.refresh_from_db()
    holding, failed = threading.Event(), []

    def settle_s_next_step() -> None:
        try:
            with transaction.atomic():
                locked_turn(reply.turn_id)
                holding.set()
                time.sleep(0.5)  # the button's request gets as far as it can meanwhile
                # `queue_next`: the thread, which the button's request refers to as well
                list(Thread.objects.select_for_update().filter(pk=reply.thread_id))
        except Exception as error:  # the deadlock may be chosen on this side
            failed.append(error)
        finally:
            from django.db import connection

            connection.close()

    worker = threading.Thread(target=settle_s_next_step)
    worker.start()
    assert holding.wait(10)
    try:
        (reply_continue if again == "continue" else reply_rerun)(message=reply)
    finally:
        worker.join(20)
    assert not failed, failed
    settle(reply.pk)
