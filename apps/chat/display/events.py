"""The only module that publishes to open tabs: topic names, payloads, publishers.

Pushes go out on the live bus (`livebus`), each topic's numbered in order. Persisted changes
are published on commit by services; streamed deltas are batched by the worker and published
directly. Message events go to every tab on the thread; the session's
controls (summary strip, role picker, addressing line) to every tab on any of its threads.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import uuid
from collections.abc import Callable, Iterable

from django.contrib.auth import get_user_model
from django.db import close_old_connections, transaction
from redis.exceptions import RedisError

from apps.chat import livebus, livestate
from apps.chat.access import mentioned_people, message_audience, room_users
from apps.chat.display.bubbles import (
    bubble_fragments,
    removed_fragment,
    render_session_controls,
    render_session_unread_badge,
    render_someone_posted,
    render_summary_strip,
    render_thread_label,
    render_thread_status,
    render_thread_tree,
    render_thread_usage,
    render_turn_finished,
    render_unread_badge,
)
from apps.chat.display.rooms import render_digest
from apps.chat.models import Message, MessageStatus, Session, Thread, Turn
from apps.chat.reading import threads_unread
from apps.chat.usage import session_and_threads_usage, threads_figures
from apps.providers.pricing import PriceTable
from apps.roles.models import Role

# A settled bubble outranks every delta of its stream, whatever arrives late.
SETTLED_SEQ = 2**31 - 1

logger = logging.getLogger(__name__)


def html_event(html: str) -> dict:
    """A pre-rendered out-of-band fragment that is not a message, for every tab in a group."""
    return {"type": "chat.html", "html": html}


def thread_group(thread_public_id: uuid.UUID | str) -> str:
    return f"thread.{uuid.UUID(str(thread_public_id)).hex}"


def session_group(session_public_id: uuid.UUID | str) -> str:
    return f"session.{uuid.UUID(str(session_public_id)).hex}"


def user_group(user_id: int) -> str:
    """Every open tab of one person, whatever page it shows."""
    return f"user.{int(user_id)}"


def _send_on_commit(events_of: Callable[[], Iterable[tuple[str, dict]]]) -> None:
    """After commit, build the (topic, event) pairs — from committed rows — and publish them,
    off the committing thread: a request's answer or a worker's next step does not wait for
    the rendering and the round trip (see `Announcer`)."""
    transaction.on_commit(lambda: announcer().put(events_of))


class Announcer:
    """One thread per process that builds and publishes committed changes, in commit order.

    What has piled up while it worked goes out together: one Redis round trip for a burst of
    commits (a hundred composer POSTs at once, a worker settling many replies).
    """

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[Callable[[], Iterable[tuple[str, dict]]]] = (
            queue.SimpleQueue()
        )
        self.thread = threading.Thread(target=self._run, name="parley-announcer", daemon=True)
        self.thread.start()

    def put(self, events_of: Callable[[], Iterable[tuple[str, dict]]]) -> None:
        self.queue.put(events_of)

    def _run(self) -> None:
        while True:
            batch = [self.queue.get()]
            while not self.queue.empty() and len(batch) < ANNOUNCE_BATCH:
                batch.append(self.queue.get_nowait())
            try:
                self._announce(batch)
            except Exception:  # the thread must outlive any one burst (a database gone away)
                logger.exception("Could not finish announcing %d changes", len(batch))

    def _announce(self, batch: list[Callable[[], Iterable[tuple[str, dict]]]]) -> None:
        pushes: list[tuple[str, dict]] = []
        try:
            for events_of in batch:
                try:
                    pushes += events_of()
                except Exception:  # one change's rows are gone (deleted since): skip it
                    logger.exception("Could not render a change for open tabs")
            livebus.publish_sync(livestate.shared_sync_client(), pushes)
        except (RedisError, OSError) as exc:
            # The change is saved; the tabs' resync catches up once Redis is back.
            logger.warning("Could not announce %d changes to open tabs (%s)", len(batch), exc)
        finally:
            close_old_connections()  # a pooled connection goes back between bursts

    def drain(self, timeout: float = 10) -> None:
        """Wait until everything put so far has gone out (tests, shutdown)."""
        done = threading.Event()

        def mark() -> list[tuple[str, dict]]:
            done.set()
            return []

        self.queue.put(mark)
        done.wait(timeout)


ANNOUNCE_BATCH = 500
_announcer: Announcer | None = None
_announcer_lock = threading.Lock()


def announcer() -> Announcer:
    global _announcer
    with _announcer_lock:
        if _announcer is None or not _announcer.thread.is_alive():
            _announcer = Announcer()
        return _announcer


def publish_messages_added_on_commit(
    *, thread: Thread, messages: list[Message], roles: dict[str, Role] | None = None
) -> None:
    """After commit, append new bubbles to every tab showing the thread (`roles`: the
    session's roles by handle, when the caller has read them). A whisper's bubbles (a post's
    messages share one audience) reach only its audience's tabs."""
    _send_on_commit(
        lambda: [
            (
                thread_group(thread.public_id),
                {
                    "type": "chat.append",
                    "fragments": bubble_fragments(with_current_status(messages), roles=roles),
                    "messages": [str(message.public_id) for message in messages],
                    "seqs": [message.seq for message in messages],
                    **audience_of(messages[0] if messages else None),
                },
            )
        ]
    )


def with_current_status(messages: list[Message]) -> list[Message]:
    """The announcer renders after the commit, when a worker may already have claimed a reply
    and pushed its "streaming" state — to tabs that had no bubble yet to apply it to. So the
    waiting replies are shown as they are now, not as they were posted."""
    waiting = [message for message in messages if message.status == MessageStatus.QUEUED]
    if waiting:
        now = dict(
            Message.objects.filter(pk__in=[message.pk for message in waiting]).values_list(
                "pk", "status"
            )
        )
        for message in waiting:
            message.status = now.get(message.pk, message.status)
    return messages


def audience_of(message: Message | None) -> dict:
    """What a push about a whisper carries for the tabs to drop it: {"audience": user ids};
    nothing for a message the whole room sees."""
    if message is None or not message.private:
        return {}
    return {"audience": message_audience(message=message)}


def publish_message_replaced_on_commit(*, message: Message, seq: int) -> None:
    """After commit, replace one bubble everywhere with its stored state.

    `seq=0` starts the message over (a retried or regenerated reply): tabs forget the
    sequence numbers of its previous run.
    """
    _send_on_commit(
        lambda: [(thread_group(message.thread.public_id), state_event(message=message, seq=seq))]
    )


def publish_message_removed_on_commit(*, message: Message) -> None:
    """After commit, take a bubble out of every tab (a waiting reply that will not run)."""
    group, html = thread_group(message.thread.public_id), removed_fragment(message.public_id)
    _send_on_commit(lambda: [(group, html_event(html))])


def removed_fragments(message_ids: list[str]) -> list[str]:
    return [removed_fragment(message_id) for message_id in message_ids]


def thread_status_event(*, thread_id: int) -> dict:
    """The thread's queue and auto-round line, read afresh."""
    thread = Thread.objects.select_related("session").get(pk=thread_id)
    return html_event(render_thread_status(thread))


def publish_thread_status_on_commit(*, thread: Thread) -> None:
    """After commit, show the thread's queued messages, auto-round state and sticky role in
    every tab on it."""
    _send_on_commit(
        lambda: [(thread_group(thread.public_id), thread_status_event(thread_id=thread.pk))]
    )


def publish_thread_renamed_on_commit(*, thread: Thread) -> None:
    """After commit, show a thread's new name wherever a tab shows it: in the sidebar of every
    tab on the session, and in the title of the tabs on the thread itself."""
    _send_on_commit(
        lambda: [
            (group, html_event(render_thread_label(thread, variant)))
            for group, variant in (
                (session_group(thread.session.public_id), "label"),
                (thread_group(thread.public_id), "title"),
            )
        ]
    )


def thread_title_fragment(*, thread_id: int) -> str:
    """The thread's name as the tabs on it show it, read afresh: its title, and its label in
    the sidebar."""
    thread = Thread.objects.get(pk=thread_id)
    return render_thread_label(thread, "title") + render_thread_label(thread, "label")


def thread_tree_event(*, session_id: int) -> dict:
    """The session's thread tree with its unread counts, read afresh."""
    return html_event(render_thread_tree(Session.objects.get(pk=session_id)))


def publish_thread_tree_on_commit(*, session_id: int) -> None:
    """After commit, show a new thread or branch in the sidebar of every tab on the session."""

    def events_of():
        public_id = Session.objects.values_list("public_id", flat=True).get(pk=session_id)
        return [(session_group(public_id), thread_tree_event(session_id=session_id))]

    _send_on_commit(events_of)


def session_controls_event(*, session_id: int) -> dict:
    """The session's strip, role picker and addressing line, read afresh (settings, mutes or
    the sticky role may have changed while a reply streamed)."""
    session = Session.objects.select_related("credential").get(pk=session_id)
    return html_event(render_session_controls(session))


def settled_counts_events(*, thread_ids: list[int]) -> list[tuple[str, dict]]:
    """What tabs show anew once replies of these threads have settled, read in one go: each
    session's strip once on every tab of the session; each person's unread badges for the
    threads on their own tabs; each thread's usage line on the tabs showing it."""
    threads = Thread.objects.select_related("session__credential").filter(pk__in=thread_ids)
    by_session: dict[int, list[Thread]] = {}
    for thread in threads:
        by_session.setdefault(thread.session_id, []).append(thread)
    pushes = []
    for session_threads in by_session.values():
        session = session_threads[0].session
        ids = [thread.pk for thread in session_threads]
        prices = PriceTable()  # one read of the price table for the strip and the lines
        total, own = session_and_threads_usage(session=session, thread_ids=ids, prices=prices)
        figures = threads_figures(thread_ids=ids, prices=prices)
        strip: str = render_summary_strip(session, total, prices)
        people = _people(session_id=session.pk)
        for person in people:
            unread = threads_unread(thread_ids=ids, user=person)
            if len(people) == 1:  # a room of one: its badges go with the strip, as one push
                strip += "".join(render_unread_badge(t.pk, user=person, item=t) for t in unread)
            else:  # each person's own, to every page of theirs
                badges = (
                    render_unread_badge(t.pk, user=person, item=t, anywhere=True) for t in unread
                )
                pushes.append((user_group(person.pk), html_event("".join(badges))))
        pushes.append((session_group(session.public_id), html_event(strip)))
        pushes += [
            (
                thread_group(thread.public_id),
                html_event(render_thread_usage(own[thread.pk], figures[thread.pk])),
            )
            for thread in session_threads
        ]
    return pushes


def _people(*, session_id: int, audience: list[int] | None = None) -> list:
    """The people in a session's room (only `audience` among them, for a whisper)."""
    people = room_users(session_id=session_id)
    if audience is not None:
        people = [person for person in people if person.pk in audience]
    return people


def publish_turn_finished_on_commit(*, thread: Thread) -> None:
    """After commit, tell every tab of each person in the room (of a whisper's audience)
    that the thread's turn has finished, with their own badges."""

    def events_of():
        fresh = Thread.objects.select_related("session").get(pk=thread.pk)
        turn = Turn.objects.filter(thread=fresh).select_related("user_message").last()
        audience = audience_of(turn.user_message if turn else None).get("audience")
        return [
            (user_group(person.pk), html_event(render_turn_finished(fresh, user=person)))
            for person in _people(session_id=fresh.session_id, audience=audience)
        ]

    _send_on_commit(events_of)


def publish_posted_on_commit(*, message: Message) -> None:
    """After commit, tell everyone else in the room (the audience, for a whisper) that
    someone posted: their badges, and a notice (which says so when it names them). Nothing
    for a room of one."""

    def events_of():
        people = _people(session_id=message.thread.session_id)  # one query for a room of one
        if len(people) < 2:
            return []
        fresh = Message.objects.select_related("thread__session", "author").get(pk=message.pk)
        audience = audience_of(fresh).get("audience")
        if audience is not None:
            people = [person for person in people if person.pk in audience]
        mentions = mentioned_people(session=fresh.thread.session, text=fresh.text)
        return [
            (
                user_group(person.pk),
                html_event(
                    render_someone_posted(fresh, user=person, mentioned=person.pk in mentions)
                ),
            )
            for person in people
            if person.pk != fresh.author_id
        ]

    _send_on_commit(events_of)


def publish_seen_on_commit(*, thread: Thread, user_id: int) -> None:
    """After commit, clear what a thread one person has read counted as unread for them: its
    badge in their sidebars, its session's on their sessions lists."""

    def events_of():
        person = get_user_model().objects.get(pk=user_id)
        html = render_unread_badge(
            thread.pk, user=person, anywhere=True
        ) + render_session_unread_badge(thread.session_id, user=person)
        return [(user_group(user_id), html_event(html))]

    _send_on_commit(events_of)


def publish_session_controls_on_commit(*, session: Session) -> None:
    """After commit, show the session's current controls in every tab open on it."""
    _send_on_commit(
        lambda: [(session_group(session.public_id), session_controls_event(session_id=session.pk))]
    )


def state_event(
    *,
    message: Message,
    seq: int,
    live_text: str | None = None,
    roles: dict[str, Role] | None = None,
) -> dict:
    live = {str(message.public_id): live_text} if live_text is not None else None
    return {
        "type": "chat.state",
        "message": str(message.public_id),
        "seq": seq,
        "reset": seq == 0,
        "fragments": bubble_fragments([message], live_texts=live, oob=True, roles=roles),
        **audience_of(message),
    }


def session_snapshot(*, session_id: int) -> list[str]:
    """The session's controls and thread tree as they are now (a tab that missed pushes)."""
    return [session_controls_event(session_id=session_id)["html"],
            thread_tree_event(session_id=session_id)["html"]]  # fmt: skip


async def publish(redis, pushes: list[tuple[str, dict]]) -> None:
    """Publish (topic, event) pairs from the worker's loop, in one round trip."""
    await livebus.publish(redis, pushes)


async def publish_state(redis, *, group: str, event: dict) -> None:
    await livebus.publish(redis, [(group, event)])


def publish_room_left_on_commit(*, session: Session, user_id: int, left: bool) -> None:
    """After commit, tell one person's tabs on a session that they are out of its room
    (`left`; the tabs close) or have another role in it (the tabs reload)."""
    event = {"type": "room.left" if left else "room.changed", "session": str(session.public_id)}
    _send_on_commit(lambda: [(user_group(user_id), event)])


def publish_token_revoked_on_commit(*, user_id: int, token_id: int) -> None:
    """After commit, end the live streams read with a token its person has revoked."""
    event = {"type": "token.revoked", "token": token_id}
    _send_on_commit(lambda: [(user_group(user_id), event)])


def session_digest(session_key: str | None) -> str:
    """A browser session's name on the bus: its key itself never travels."""
    return hashlib.sha256((session_key or "").encode()).hexdigest()[:32]


def publish_account_ended_on_commit(*, user_id: int) -> None:
    """After commit, close every tab and end every live stream of a person whose account was
    disabled."""
    _send_on_commit(lambda: [(user_group(user_id), {"type": "account.ended"})])


def publish_signed_out_on_commit(*, user_id: int, session_key: str | None) -> None:
    """After commit (now, outside a transaction), close the tabs of the browser session that
    signed out; the person's other browsers stay."""
    event = {"type": "account.signed_out", "session": session_digest(session_key)}
    _send_on_commit(lambda: [(user_group(user_id), event)])


def publish_digest_on_commit(*, digest) -> None:
    """After commit, fill in a "while you were away" card on its person's tabs."""
    _send_on_commit(lambda: [(user_group(digest.user_id), html_event(render_digest(digest)))])
