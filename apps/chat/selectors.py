"""Reads scoped to the requesting user: strangers see nothing (views turn that into 404)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Max, Q, QuerySet, Value

from apps.chat.access import Need, session_q, session_roles_by_handle, visible_to
from apps.chat.models import (
    IN_FLIGHT,
    Attachment,
    Message,
    MessageKind,
    QueuedMessage,
    Session,
    SessionRole,
    Stage,
    Thread,
    Turn,
)
from apps.chat.reading import with_unread_threads
from apps.providers.models import Credential
from apps.providers.registry import get_adapter
from apps.providers.selectors import models_reads
from apps.roles.models import Role

if TYPE_CHECKING:
    from typing import TypedDict

    class Unread(TypedDict):
        unread: int


def session_links(*, session: Session) -> list[SessionRole]:
    """The session's roles with their per-session settings, in roster order."""
    return list(
        session.session_roles.select_related("role", "credential").order_by(
            "role__sort_order", "role__handle"
        )
    )


def sessions_for_user(*, user, need: Need) -> QuerySet[Session]:
    """The sessions `user` may reach for `need` (see `access`)."""
    return Session.objects.filter(session_q(user, need))


def threads_for_user(*, user, need: Need) -> QuerySet[Thread]:
    return Thread.objects.filter(session_q(user, need, "session__")).select_related(
        "session", "persona_version", "memory_version"
    )


def messages_for_user(*, user, need: Need) -> QuerySet[Message]:
    """The messages of the threads `user` may reach for `need` that they may see (a whisper
    only by its audience)."""
    return (
        Message.objects.filter(session_q(user, need, "thread__session__"))
        .filter(visible_to(user))
        .select_related("thread")
    )


def thread_messages(*, thread: Thread) -> QuerySet[Message]:
    """A thread's own messages in transcript order."""
    return Message.objects.filter(thread=thread).order_by("seq")


def thread_in_flight_for_session(*, session: Session) -> bool:
    return Message.objects.filter(thread__session=session, status__in=IN_FLIGHT).exists()


def messages_to_sync(*, thread: Thread, user, after_seq: int, known: list[str]) -> list[Message]:
    """What a (re)connecting tab of `user`'s lacks: newer messages, the ones it shows, and
    live ones (of those they may see)."""
    condition = Q(seq__gt=after_seq) | Q(status__in=IN_FLIGHT)
    if known:
        condition |= Q(public_id__in=known)
    messages = list(thread_messages(thread=thread).filter(condition).filter(visible_to(user)))
    for message in messages:
        message.thread = thread  # their bubbles read its session: no query per sync for it
    return messages


def thread_message(*, thread: Thread, public_id: str) -> Message | None:
    """One of the thread's own messages, or None."""
    return thread_messages(thread=thread).filter(public_id=public_id).first()


def transcript_messages(
    *, thread: Thread, before_seq: int | None = None, user=None
) -> list[Message]:
    """The thread's transcript: a fork's inherited history, then its own; with `user`, only
    what they may see (without, every whisper too: a reply's request picks its own).

    Notices are left out (they are never sent to models); `before_seq` cuts the thread's own
    part just before that sequence number.
    """
    own = thread_messages(thread=thread).exclude(kind="notice").select_related("author")
    if before_seq is not None:
        own = own.filter(seq__lt=before_seq)
    if user is not None:
        own = own.filter(visible_to(user))
    return inherited_messages(thread=thread, user=user) + list(own)


PAGE_SIZE = 100


@dataclass(frozen=True)
class TranscriptPage:
    """A window of a thread as its page shows it, oldest first: the inherited history of a
    branch (notices left out) above the thread's own messages."""

    inherited: list[Message]
    own: list[Message]
    earlier: Message | None  # the oldest message shown, when older ones exist: the next cursor


def _lineage(thread: Thread) -> list[tuple[int, int | None]]:
    """(thread id, last sequence number shown) for the thread, then each ancestor it forks
    from, newest first."""
    lineage: list[tuple[int, int | None]] = [(thread.pk, None)]
    fork_id = thread.forked_from_id if thread.parent_id else None
    while fork_id is not None:  # one query per ancestor: the fork point and its thread's
        thread_id, seq, parent_id, fork_id = Message.objects.values_list(
            "thread_id", "seq", "thread__parent_id", "thread__forked_from_id"
        ).get(pk=fork_id)
        lineage.append((thread_id, seq))
        if parent_id is None:
            fork_id = None
    return lineage


def transcript_page(
    *,
    thread: Thread,
    user,
    before: Message | None = None,
    size: int = PAGE_SIZE,
    own: bool = True,
) -> TranscriptPage | None:
    """The `size` latest messages of the thread's transcript `user` may see, or those just
    before `before`; None when `before` is not in this thread's transcript. A few queries
    whatever its length. `own=False`: the caller knows the thread has no message of its own
    (a fresh branch)."""
    lineage = _lineage(thread)
    newest_first: list[tuple[bool, Message]] = []
    wanted = size + 1  # one more than shown tells whether older ones exist
    start = 0
    if before is not None:
        starts = [i for i, (thread_id, _) in enumerate(lineage) if thread_id == before.thread_id]
        last = lineage[starts[0]][1] if starts else None
        if not starts or (last is not None and before.seq > last):
            return None
        start = starts[0]
    for index in range(start, len(lineage)):
        thread_id, last_seq = lineage[index]
        if index == 0 and not own:
            continue
        rows = (
            Message.objects.filter(thread_id=thread_id)
            .filter(visible_to(user))
            .select_related("author")
        )
        if index > 0:
            rows = rows.exclude(kind="notice").filter(seq__lte=last_seq)
        if before is not None and index == start:
            rows = rows.filter(seq__lt=before.seq)
        found = list(rows.order_by("-seq")[: wanted - len(newest_first)])
        newest_first += [(index == 0, message) for message in found]
        if len(newest_first) == wanted:
            break
    shown = newest_first[:size][::-1]
    return TranscriptPage(
        inherited=[message for own, message in shown if not own],
        own=[message for own, message in shown if own],
        earlier=shown[0][1] if len(newest_first) > size else None,
    )


def transcript_after(
    *, thread: Thread, user, after: Message, size: int = PAGE_SIZE
) -> tuple[list[Message], Message | None]:
    """The thread's own messages `user` may see just after `after` (a page opened at a search
    hit loads them as the reader scrolls down), and the cursor for the next ones (None: that
    was the end)."""
    later = thread.messages.filter(seq__gt=after.seq).filter(visible_to(user))
    rows = list(later.select_related("author").order_by("seq")[: size + 1])
    shown = rows[:size]
    return shown, (shown[-1] if len(rows) > size else None)


def transcript_page_around(
    *, thread: Thread, user, message: Message
) -> tuple[TranscriptPage | None, Message | None]:
    """The page with `message` in its middle, and the last message it shows (after which
    `transcript_after` goes on); the latest page when `message` is near the end."""
    following = thread.messages.filter(seq__gt=message.seq).order_by("seq")
    boundary = following[PAGE_SIZE // 2 : PAGE_SIZE // 2 + 1].first()
    if boundary is not None:
        page = transcript_page(thread=thread, user=user, before=boundary)
        if page is not None and page.own:
            return page, page.own[-1]
    return transcript_page(thread=thread, user=user), None


def inherited_messages(*, thread: Thread, user=None) -> list[Message]:
    """A branch's history from its ancestors, up to and including its fork point (with
    `user`: what they may see of it)."""
    if thread.parent_id is None or thread.forked_from_id is None:
        return []
    fork_point = Message.objects.select_related("thread").get(pk=thread.forked_from_id)
    return transcript_messages(thread=fork_point.thread, before_seq=fork_point.seq + 1, user=user)


def speaker_names(*, session: Session) -> dict[str, str]:
    """How each speaker is named in a transcript: roles by display name, the person as 'User'
    (the owner's name would leak into every request and break sharing between users)."""
    names = {
        handle: role.display_name for handle, role in session_roles_by_handle(session, None).items()
    }
    names["user"] = "User"
    return names


def turn_outcome(*, thread: Thread) -> list[Message]:
    """The replies of the thread's latest turn, in order (what a finished turn tells)."""
    turn = Turn.objects.filter(thread=thread).order_by("-pk").first()
    if turn is None:
        return []
    return list(
        Message.objects.filter(turn=turn, kind=MessageKind.CHAT, finished_at__isnull=False)
        .only("seq", "speaker", "status")
        .order_by("seq")
    )


def thread_tree(*, session: Session, user=None) -> list[tuple[Thread, int]]:
    """The session's threads depth-first (newest first among siblings), with their depth and
    what `user` has not read of each as `unread` (no `user`: none, for a tree every tab of
    the room is sent, each keeping its own badges)."""
    rows = Thread.objects.filter(session=session).order_by("-updated_at")
    threads = list(
        with_unread_threads(rows, user=user) if user is not None else rows.annotate(unread=Value(0))
    )
    children: dict[int | None, list[Thread]] = {}
    ids = {thread.pk for thread in threads}
    for thread in threads:
        parent = thread.parent_id if thread.parent_id in ids else None
        children.setdefault(parent, []).append(thread)
    ordered: list[tuple[Thread, int]] = []

    def walk(parent: int | None, depth: int) -> None:
        for thread in children.get(parent, []):
            ordered.append((thread, depth))
            walk(thread.pk, depth + 1)

    walk(None, 0)
    return ordered


def thread_queue(*, thread: Thread) -> list[QueuedMessage]:
    """Messages waiting for the thread's running turn to settle, in the order they will run."""
    return list(QueuedMessage.objects.filter(thread=thread).select_related("author"))


def queued_for_user(*, user, need: Need) -> QuerySet[QueuedMessage]:
    return QueuedMessage.objects.filter(session_q(user, need, "thread__session__")).select_related(
        "thread"
    )


@dataclass(frozen=True)
class RoundState:
    round: int  # the auto-round running now; 0 while the turn's own replies run
    rounds: int
    next_handle: str  # the member shown as waiting next
    mentions_only: bool


def round_state(*, thread: Thread) -> RoundState | None:
    """Where the thread's running turn is in its auto-rounds (None: no rounds to come)."""
    turn = Turn.objects.filter(thread=thread).order_by("-pk").first()
    if turn is None or not turn.auto_rounds or turn.rounds_stopped:
        return None
    replies = list(turn.messages.values_list("stage", "status", "dispatched_at", "speaker"))
    if not any(status in IN_FLIGHT for _, status, _, _ in replies):
        return None
    members = SessionRole.objects.filter(session_id=thread.session_id, muted=False).count()
    if members < 2:
        return None
    started = sum(1 for stage, _, at, _ in replies if stage == Stage.AUTO_ROUND and at)
    waiting = [h for stage, status, at, h in replies if stage == Stage.AUTO_ROUND and not at]
    return RoundState(
        round=(started - 1) // members + 1 if started else 0,
        rounds=min(turn.auto_rounds, settings.PARLEY_MAX_AUTO_ROUNDS),
        next_handle=waiting[0] if waiting else "",
        mentions_only=turn.mentions_only,
    )


def message_block_text(message: Message) -> str:
    """A message as the transcript shows it to models: its text, with its tool calls and
    results inline as labelled text — the same for every role and every provider, so a thread
    that moves to another provider keeps its tool history and the roles share the cache."""
    pieces = []
    for part in message.content:
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            pieces.append(part["text"])
        elif kind == "tool_call":
            arguments = json.dumps(part.get("arguments") or {}, ensure_ascii=False)
            pieces.append(f"(called {part.get('name')} {arguments})")
        elif kind == "tool_result":  # what the model was sent (a trimmed result's short form)
            label = "tool error" if part.get("is_error") else "tool result"
            name = f" of {part['name']}" if part.get("name") else ""
            pieces.append(f"({label}{name}: {part.get('sent') or part.get('content', '')})")
    return "\n".join(pieces).strip()


def attachments_bytes(*, session: Session) -> int:
    """What a session's attachments take in its storage: each stored file once, with its
    first-page preview."""
    distinct = (
        Attachment.objects.filter(session=session)
        .order_by()
        .values("sha256")
        .annotate(size=Max("size"), preview=Max("preview_size"))  # the same bytes, the same
    )
    return sum(row["size"] + row["preview"] for row in distinct)


def attachments_for_user(*, user, need: Need) -> QuerySet[Attachment]:
    """Attachments of the sessions `user` may reach for `need` that they may see: their own
    (sent or still waiting in their composer), and those of messages they see (a whisper's
    only by its audience)."""
    seen = Q(message__isnull=False) & visible_to(user, "message__")
    return (
        Attachment.objects.filter(session_q(user, need, "session__"))
        .filter(Q(owner=user) | seen)
        .select_related("session")
    )


def attachments_waiting(*, owner, thread: Thread, ids: list[str]) -> list[Attachment]:
    """`owner`'s attachments still in their composer for `thread`'s session, in `ids`' order
    (ids that are not such an attachment are left out)."""
    wanted = []
    for value in ids:
        try:
            wanted.append(str(uuid.UUID(str(value))))
        except ValueError:
            continue
    if not wanted:  # most messages: no query at all
        return []
    found = {
        str(attachment.public_id): attachment
        for attachment in Attachment.objects.filter(
            owner=owner, session_id=thread.session_id, message__isnull=True,
            queued__isnull=True, public_id__in=wanted,
        )
    }  # fmt: skip
    return [found[i] for i in dict.fromkeys(wanted) if i in found]


def reply_provider(
    *, session: Session, role: Role, link: SessionRole | None = None
) -> tuple[str, str, Credential | None]:
    """The provider kind, model and credential a role's reply uses in this session.

    A per-role credential in the session wins, then the session's credential; without either
    the demo provider answers. The model: the session's per-role override, the role's own
    override, the session's model (for the session's credential), the provider default.
    """
    if link is None:
        link = (
            SessionRole.objects.select_related("credential")
            .filter(session=session, role=role)
            .first()
        )
    role_credential = link.credential if link else None
    credential = role_credential or session.credential
    adapter = get_adapter(credential.provider if credential else "demo")
    if credential is None:
        return adapter.kind, adapter.default_model, None
    session_model = "" if role_credential else session.model
    override = link.model_override if link else ""
    model = override or role.model_override or session_model or adapter.default_model
    return adapter.kind, model, credential


def roles_reading_descriptions(*, session: Session, links: list[SessionRole]) -> list[str]:
    """The handles of the session's roles whose model cannot see images: they read each
    image's description instead (see `council.descriptions`)."""
    chosen = {
        link.role.handle: reply_provider(session=session, role=link.role, link=link)[:2]
        for link in links
    }
    reads = models_reads(chosen.values())
    return [handle for handle, pair in chosen.items() if not reads[pair].images]
