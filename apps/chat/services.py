"""Writes for sessions, threads and messages. Each service owns one whole state change."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.chat import events, livestate, orchestration
from apps.chat.models import (
    IN_FLIGHT,
    NOTICE_SPEAKER,
    USER_SPEAKER,
    Message,
    MessageKind,
    MessageStatus,
    Session,
    SessionRole,
    Stage,
    Thread,
    Turn,
)
from apps.chat.selectors import session_links, transcript_messages
from apps.providers.registry import get_adapter
from apps.roles.models import Role
from apps.roles.routing import RosterRole, Route, route_message
from apps.roles.selectors import default_roles, group_members
from apps.roles.services import role_ensure_default


def session_create(*, owner, name: str = "") -> Session:
    """Create a session with the default roles and a first, empty thread."""
    name = name.strip()[:120] or "New session"
    with transaction.atomic():
        session = Session.objects.create(owner=owner, name=name)
        roles = default_roles() or [role_ensure_default()]
        SessionRole.objects.bulk_create(SessionRole(session=session, role=role) for role in roles)
        thread = Thread.objects.create(session=session)
        session.active_thread = thread
        session.save(update_fields=["active_thread"])
    return session


def thread_create(*, session: Session) -> Thread:
    with transaction.atomic():
        thread = Thread.objects.create(session=session)
        session.active_thread = thread
        session.save(update_fields=["active_thread", "updated_at"])
        events.publish_thread_tree_on_commit(session_id=session.pk)
    return thread


def allocate_seqs(thread: Thread, count: int) -> list[int]:
    """Reserve `count` consecutive sequence numbers; the row lock serialises concurrent posts."""
    Thread.objects.filter(pk=thread.pk).update(
        next_seq=F("next_seq") + count, updated_at=timezone.now()
    )
    end = Thread.objects.filter(pk=thread.pk).values_list("next_seq", flat=True).get()
    return list(range(end - count, end))


def validate_message_text(text: str) -> str:
    text = (text or "").strip()
    if not text:
        raise ValidationError("Write something before sending.", code="empty")
    limit = settings.PARLEY_MAX_MESSAGE_CHARS
    if len(text) > limit:
        raise ValidationError(
            f"That message is {len(text):,} characters; the limit is {limit:,}. "
            "Shorten it or split it into parts.",
            code="too_long",
        )
    return text


def reply_provider(*, session: Session, role: Role, link: SessionRole | None = None):
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


def reply_placeholder(
    *, thread: Thread, session: Session, role: Role, seq: int, turn: Turn, stage: int
) -> Message:
    """A queued reply bubble for `role`, with the provider and model it will use."""
    provider, model, credential = reply_provider(session=session, role=role)
    return Message.objects.create(
        thread=thread,
        seq=seq,
        speaker=role.handle,
        status=MessageStatus.QUEUED,
        provider=provider,
        model=model,
        credential=credential,
        turn=turn,
        stage=stage,
    )


def notice_create(*, thread: Thread, text: str, seq: int | None = None) -> Message:
    """A line from Parley itself: shown in the thread, never sent to a model."""
    if seq is None:
        (seq,) = allocate_seqs(thread, 1)
    return Message.objects.create(
        thread=thread,
        seq=seq,
        speaker=NOTICE_SPEAKER,
        kind=MessageKind.NOTICE,
        content=[{"type": "text", "text": text}],
        status=MessageStatus.DONE,
    )


def session_set_provider(*, session: Session, credential, model: str) -> Session:
    """Choose the credential (None: demo) and model for the session's next replies."""
    session.credential = credential
    session.model = model.strip()[:120]
    session.save(update_fields=["credential", "model", "updated_at"])
    return session


def session_set_roles(*, session: Session, roles: list[Role]) -> Session:
    """Choose the roles taking part; a role that stays keeps its mute and overrides."""
    if not roles:
        raise ValidationError("A session needs at least one role.")
    with transaction.atomic():
        keep = {role.pk for role in roles}
        session.session_roles.exclude(role_id__in=keep).delete()
        present = set(session.session_roles.values_list("role_id", flat=True))
        SessionRole.objects.bulk_create(
            SessionRole(session=session, role=role) for role in roles if role.pk not in present
        )
        if session.sticky_handle not in {role.handle for role in roles}:
            session.sticky_handle = ""
        session.save(update_fields=["sticky_handle", "updated_at"])
    return session


def session_set_memory(*, session: Session, memory: str) -> Session:
    session.memory = memory
    session.save(update_fields=["memory", "updated_at"])
    return session


def clean_name(value: str, *, what: str, limit: int = 120) -> str:
    """A name on one line with single spaces; empty or too long is refused."""
    name = " ".join((value or "").split())
    if not name:
        raise ValidationError(f"A {what} cannot be empty.")
    if len(name) > limit:
        raise ValidationError(f"A {what} holds at most {limit} characters, not {len(name)}.")
    return name


def thread_rename(*, thread: Thread, label: str) -> Thread:
    thread.label = clean_name(label, what="thread name")
    thread.save(update_fields=["label", "updated_at"])
    events.publish_thread_renamed_on_commit(thread=thread)
    return thread


@dataclass(frozen=True)
class PostedMessage:
    user_message: Message | None
    replies: list[Message]
    notices: list[Message] = field(default_factory=list)
    redirect_to: Thread | None = None  # a command moved the person to another thread

    @property
    def messages(self) -> list[Message]:
        return sorted(
            [m for m in (self.user_message, *self.replies, *self.notices) if m is not None],
            key=lambda m: m.seq,
        )


def _route(*, session: Session, links: list[SessionRole], text: str) -> Route:
    roster = [
        RosterRole(
            handle=link.role.handle,
            is_default=link.role.is_default,
            answers_last=link.role.answers_last,
            muted=link.muted,
        )
        for link in links
    ]
    return route_message(
        text,
        roles=roster,
        groups=group_members(),
        mode=session.addressing_mode,
        sticky=session.sticky_handle,
    )


def _routing_notices(route: Route, links: list[SessionRole]) -> list[str]:
    notices = []
    if route.unknown:
        names = ", ".join(f"@{h}" for h in route.unknown)
        known = ", ".join(f"@{link.role.handle}" for link in links)
        notices.append(f"Nobody in this chat is called {names}. The roles here: {known}, @all.")
    for handle in route.muted:
        notices.append(
            f"@{handle} is muted and was skipped. Send `/unmute @{handle}` to hear from them."
        )
    return notices


def message_post(*, thread: Thread, author, text: str) -> PostedMessage:
    """Save a user's message, route it and queue one reply per target.

    Slash commands are run instead of posted. The replies are published and enqueued when the
    transaction commits; the answers-last roles wait for the others (see `orchestration`).
    """
    from apps.chat.commands import is_command, run_command

    text = validate_message_text(text)
    if is_command(text):
        return run_command(thread=thread, author=author, text=text)
    text = text.removeprefix("/") if text.startswith("//") else text
    session = Session.objects.select_related("credential").get(pk=thread.session_id)
    links = session_links(session=session)
    route = _route(session=session, links=links, text=text)
    notices = _routing_notices(route, links)
    if not route.targets:
        raise ValidationError(
            " ".join(notices) or "This session has no roles to answer; add one in its settings.",
            code="no_target",
        )
    roles = {link.role.handle: link.role for link in links}
    with transaction.atomic():
        orchestration.turns_stop_rounds(thread=thread)
        seqs = iter(allocate_seqs(thread, 1 + len(notices) + len(route.targets)))
        user_message = Message.objects.create(
            thread=thread,
            seq=next(seqs),
            speaker=USER_SPEAKER,
            author=author,
            content=[{"type": "text", "text": text}],
            status=MessageStatus.DONE,
        )
        notice_messages = [
            notice_create(thread=thread, text=notice, seq=next(seqs)) for notice in notices
        ]
        turn = Turn.objects.create(
            thread=thread, user_message=user_message, auto_rounds=session.auto_rounds
        )
        replies = [
            reply_placeholder(
                thread=thread,
                session=session,
                role=roles[handle],
                seq=next(seqs),
                turn=turn,
                stage=Stage.LAST if handle in route.last else Stage.PARALLEL,
            )
            for handle in route.targets
        ]
        Session.objects.filter(pk=session.pk).update(
            updated_at=timezone.now(), sticky_handle=route.sticky
        )
        if route.sticky != session.sticky_handle:  # other tabs show the new sticky role
            events.publish_session_controls_on_commit(session=session)
        events.publish_messages_added_on_commit(
            thread=thread, messages=[user_message, *notice_messages, *replies]
        )
        if not thread.label:
            thread_autoname(thread=thread, text=text)
        stagger = settings.PARLEY_STAGGER_FANOUT and all(
            reply.provider == "anthropic" for reply in replies
        )
        orchestration.first_dispatch(replies=replies, stagger=stagger)
    return PostedMessage(user_message=user_message, replies=replies, notices=notice_messages)


def reply_rerun(*, message: Message) -> Message:
    """Run a role's reply again (Retry after an error, Regenerate after any ending).

    The message keeps its place in the transcript; its previous text, if any, is kept in
    `alternatives`. The current session settings apply, so a fixed key or a new model is used.
    """
    if message.kind != MessageKind.CHAT or message.is_user:
        raise ValidationError("Only a role's reply can be run again.")
    thread = message.thread
    session = Session.objects.select_related("credential").get(pk=thread.session_id)
    role = Role.objects.filter(handle=message.speaker).first()
    if role is None:
        raise ValidationError(f"The role @{message.speaker} no longer exists.")
    with transaction.atomic():
        # Re-read under a row lock: a double-click must not queue the reply twice or keep
        # the same earlier text twice.
        message = Message.objects.select_for_update().get(pk=message.pk)
        if message.in_flight:
            raise ValidationError("That reply is still running; stop it first.")
        alternatives = list(message.alternatives)
        if message.text:
            alternatives.append(
                {
                    "content": message.content,
                    "status": message.status,
                    "model": message.model,
                    "finished_at": message.finished_at.isoformat() if message.finished_at else "",
                }
            )
        provider, model, credential = reply_provider(session=session, role=role)
        message.alternatives = alternatives
        message.status = MessageStatus.QUEUED
        message.content, message.error, message.usage = [], "", {}
        message.provider, message.model, message.credential = provider, model, credential
        message.ttft_ms = message.duration_ms = message.started_at = message.finished_at = None
        message.save()
        events.publish_message_replaced_on_commit(message=message, seq=0)
        orchestration.dispatch([message])
    return message


def replies_to_retry(*, thread: Thread) -> list[Message]:
    """The failed or interrupted replies of the thread's latest turn, for /retry."""
    latest = Turn.objects.filter(thread=thread).order_by("-pk").first()
    if latest is None:
        return []
    return list(
        latest.messages.filter(
            status__in=[MessageStatus.ERROR, MessageStatus.INTERRUPTED]
        ).order_by("seq")
    )


@dataclass(frozen=True)
class ClaimedReply:
    message: Message
    restarted: bool


def message_claim(*, message_id: int) -> ClaimedReply | None:
    """Take a queued reply for streaming; None when it is already settled.

    A reply found `streaming` was being streamed by a worker that died (the broker redelivers
    unacknowledged tasks), so it restarts from empty: text is never appended twice.
    """
    now = timezone.now()
    claimed = Message.objects.filter(pk=message_id, status=MessageStatus.QUEUED).update(
        status=MessageStatus.STREAMING, started_at=now, attempt=F("attempt") + 1
    )
    restarted = False
    if not claimed:
        restarted = bool(
            Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
                content=[], started_at=now, attempt=F("attempt") + 1
            )
        )
        if not restarted:
            return None
    message = Message.objects.select_related("thread__session").get(pk=message_id)
    return ClaimedReply(message=message, restarted=restarted)


def reply_is_queued(*, message_id: int) -> bool:
    return Message.objects.filter(pk=message_id, status=MessageStatus.QUEUED).exists()


def message_checkpoint(*, message_id: int, text: str) -> None:
    """Persist a streaming reply's partial text so a dead worker loses nothing shown."""
    Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
        content=[{"type": "text", "text": text}], updated_at=timezone.now()
    )


def reply_secret(*, message: Message) -> tuple[str, str]:
    """The API key and base URL for a reply's call: decrypted here, on the call path only."""
    credential = message.credential
    if credential is None:
        return "", ""
    return credential.api_key(), credential.base_url


def message_finish(
    *,
    message_id: int,
    status: str,
    content: list[dict],
    error: str = "",
    usage: dict | None = None,
    ttft_ms: int | None = None,
    duration_ms: int | None = None,
) -> Message:
    """Store a reply's final state; the caller publishes the final push."""
    Message.objects.filter(pk=message_id).update(
        status=status,
        content=content,
        error=error,
        usage=usage or {},
        ttft_ms=ttft_ms,
        duration_ms=duration_ms,
        finished_at=timezone.now(),
    )
    return Message.objects.select_related("thread").get(pk=message_id)


def thread_interrupt(*, thread: Thread) -> int:
    """Stop every queued and streaming reply of a thread; partial text is kept.

    Pending auto-rounds are cancelled and queued replies (waiting answers-last roles too) are
    settled here, so their tasks find nothing to claim; streaming ones are flagged, and their
    workers close the provider stream and store what they had.
    """
    with transaction.atomic():
        orchestration.turns_stop_rounds(thread=thread)
        queued = list(thread.messages.filter(status=MessageStatus.QUEUED))
        Message.objects.filter(pk__in=[m.pk for m in queued]).update(
            status=MessageStatus.INTERRUPTED, finished_at=timezone.now()
        )
        for message in queued:
            message.status = MessageStatus.INTERRUPTED
            events.publish_message_replaced_on_commit(message=message, seq=events.SETTLED_SEQ)
    streaming = list(
        thread.messages.filter(status__in=IN_FLIGHT).values_list("public_id", flat=True)
    )
    livestate.request_cancel([str(public_id) for public_id in streaming])
    return len(queued) + len(streaming)


def session_rename(*, session: Session, name: str) -> Session:
    session.name = clean_name(name, what="session name")
    session.save(update_fields=["name", "updated_at"])
    return session


def session_delete(*, session: Session) -> None:
    """Delete a session with its threads; its running replies are stopped first."""
    for thread in session.threads.all():
        thread_interrupt(thread=thread)
    session.delete()


def thread_autoname(*, thread: Thread, text: str) -> Thread:
    """Name an unnamed thread from its first substantive message (unique in the session)."""
    from apps.chat.naming import thread_name, unique_name

    if thread.label:
        return thread
    name = thread_name(text)
    if not name:
        return thread
    taken = set(
        Thread.objects.filter(session_id=thread.session_id)
        .exclude(pk=thread.pk)
        .values_list("label", flat=True)
    )
    return thread_rename(thread=thread, label=unique_name(name, taken))


def thread_branch(*, thread: Thread, message: Message | None) -> Thread:
    """A new thread whose history is `thread`'s transcript up to and including `message`.

    `message` may be inherited from an ancestor; the branch then hangs off the thread that
    owns it. None makes an empty branch of `thread`.
    """
    from apps.chat.naming import unique_name

    parent = message.thread if message is not None else thread
    base = (parent.label or "Untitled chat")[:50]
    taken = set(Thread.objects.filter(session_id=parent.session_id).values_list("label", flat=True))
    with transaction.atomic():
        branch = Thread.objects.create(
            session_id=parent.session_id,
            parent=parent,
            forked_from=message,
            label=unique_name(f"{base} · branch", taken),
        )
        Session.objects.filter(pk=parent.session_id).update(
            active_thread=branch, updated_at=timezone.now()
        )
        events.publish_thread_tree_on_commit(session_id=parent.session_id)
    return branch


def message_edit(*, message: Message, author, text: str) -> PostedMessage:
    """Send an edited version of a user message: a branch from just before it, then the text."""
    if not message.is_user:
        raise ValidationError("Only your own messages can be edited.")
    text = validate_message_text(text)
    before = transcript_messages(thread=message.thread, before_seq=message.seq)
    branch = thread_branch(thread=message.thread, message=before[-1] if before else None)
    posted = message_post(thread=branch, author=author, text=text)
    return PostedMessage(
        user_message=posted.user_message,
        replies=posted.replies,
        notices=posted.notices,
        redirect_to=posted.redirect_to or branch,
    )


def _materialise_inherited(child: Thread) -> None:
    """Copy a branch's inherited history into it, so it survives its parent being cleared."""
    fork = child.forked_from
    inherited = (
        transcript_messages(thread=fork.thread, before_seq=fork.seq + 1) if fork is not None else []
    )
    count = len(inherited)
    if count:
        # Two steps keep (thread, seq) unique at every moment on every database.
        Message.objects.filter(thread=child).update(seq=F("seq") + 1_000_000)
        Message.objects.filter(thread=child).update(seq=F("seq") - 1_000_000 + count)
        Message.objects.bulk_create(
            Message(
                thread=child,
                seq=index,
                speaker=m.speaker,
                author=m.author,
                kind=m.kind,
                content=m.content,
                status=m.status,
                error=m.error,
                provider=m.provider,
                model=m.model,
                usage=m.usage,
                ttft_ms=m.ttft_ms,
                duration_ms=m.duration_ms,
                alternatives=m.alternatives,
            )
            for index, m in enumerate(inherited, start=1)
        )
    Thread.objects.filter(pk=child.pk).update(
        parent=None, forked_from=None, next_seq=F("next_seq") + count
    )


def thread_clear(*, thread: Thread) -> Thread:
    """Delete every message of the thread (permanently); branches keep their history."""
    thread_interrupt(thread=thread)
    with transaction.atomic():
        for child in thread.children.select_related("forked_from__thread"):
            _materialise_inherited(child)
        thread.messages.all().delete()
        thread.turns.all().delete()
        thread.summaries.all().delete()
        thread.save(update_fields=["updated_at"])
    return thread


@dataclass(frozen=True)
class SettingsChange:
    credential: object
    model: str
    persona: str
    memory: str
    addressing_mode: str
    auto_rounds: int
    disabled_tools: list[str]
    roles: list[Role]
    overrides: dict[int, str]  # role pk -> model override ("" for none)
    role_credentials: dict = field(default_factory=dict)  # role pk -> Credential or None


def session_apply_settings(*, session: Session, change: SettingsChange, apply_now: bool) -> Session:
    """Save the session's settings. With `apply_now`, replies in flight restart with them;
    otherwise the running calls finish unchanged and the next turn uses the new settings."""
    with transaction.atomic():
        session.credential = change.credential
        session.model = change.model.strip()[:120]
        session.persona = change.persona
        session.memory = change.memory
        session.addressing_mode = change.addressing_mode
        session.auto_rounds = change.auto_rounds
        session.disabled_tools = sorted(change.disabled_tools)
        session.save()
        session_set_roles(session=session, roles=change.roles)
        for link in session.session_roles.all():
            link.model_override = change.overrides.get(link.role_id, "").strip()[:120]
            link.credential = change.role_credentials.get(link.role_id)
            link.save(update_fields=["model_override", "credential"])
        events.publish_session_controls_on_commit(session=session)
    if apply_now:
        session_restart_in_flight(session=session)
    return session


def session_restart_in_flight(*, session: Session) -> int:
    """Restart the session's running replies with its current settings.

    Waiting replies take the new provider and model in place; streaming ones are stopped and
    their workers run them again (the partial text is kept as an alternative).
    """
    in_flight = list(
        Message.objects.filter(thread__session=session, status__in=IN_FLIGHT).select_related(
            "thread"
        )
    )
    streaming = []
    for message in in_flight:
        if message.status == MessageStatus.QUEUED:
            role = Role.objects.filter(handle=message.speaker).first()
            if role is not None:
                provider, model, credential = reply_provider(session=session, role=role)
                Message.objects.filter(pk=message.pk, status=MessageStatus.QUEUED).update(
                    provider=provider, model=model, credential=credential
                )
        else:
            streaming.append(str(message.public_id))
    livestate.request_restart(streaming)
    return len(in_flight)


def replies_recover(*, grace_seconds: int = livestate.LEASE_TTL_SECONDS) -> list[int]:
    """Restart the replies that a dead worker or a lost broker message left behind.

    Runs when a worker starts and then periodically (`PARLEY_RECOVERY_INTERVAL_SECONDS`). A
    reply in flight whose lease has lapsed (nobody is streaming it) is enqueued again and its
    dispatch time renewed, so the next look gives its task another grace period; the lease
    makes a duplicate harmless. A turn whose replies have all settled but whose next stage
    never started is advanced.
    """
    from apps.chat.tasks import run_reply

    cutoff = timezone.now() - timedelta(seconds=grace_seconds)
    stalled = list(
        Message.objects.filter(
            status__in=IN_FLIGHT, dispatched_at__isnull=False, dispatched_at__lt=cutoff
        ).values_list("pk", flat=True)
    )
    held = livestate.leases_held(stalled)
    restarted = [pk for pk in stalled if pk not in held]
    Message.objects.filter(pk__in=restarted).update(dispatched_at=timezone.now())
    for pk in restarted:
        run_reply.delay(pk)
    waiting_turns = set(
        Message.objects.filter(
            status=MessageStatus.QUEUED, dispatched_at__isnull=True, turn__isnull=False
        ).values_list("turn_id", flat=True)
    )
    for turn_id in waiting_turns:
        orchestration.turn_advance(turn_id=turn_id)
    return restarted
