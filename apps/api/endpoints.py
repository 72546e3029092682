"""The token API, `/api/v1/`: sessions, threads, messages, posting, stop, retry and
regenerate — the same services, routing, queue and access rules as the web pages. Thin:
every decision is made by the chat app's services."""

from __future__ import annotations

from uuid import UUID

from django.core.exceptions import ValidationError
from django.db.models import QuerySet, prefetch_related_objects
from ninja import Field, File, Query, Router, Schema, UploadedFile
from ninja.responses import Status

from apps.api.auth import require_post_scope
from apps.api.schemas import (
    ERRORS,
    Accepted,
    AttachmentOut,
    CitationOut,
    CommandOut,
    Error,
    MessageOut,
    MessagePage,
    PostIn,
    PostOut,
    QueuedOut,
    QuoteOut,
    Refused,
    RoleOut,
    RoundsOut,
    SessionDetail,
    SessionIn,
    SessionOut,
    ThreadOut,
    ThreadStatus,
)
from apps.chat.access import Need, reach, rooms_for_user, session_roles_by_handle, visible_to
from apps.chat.council import posting, replies
from apps.chat.council.commands import command_list
from apps.chat.display.citations import citations_of, passage_url
from apps.chat.display.files import attachment_response
from apps.chat.models import (
    IN_FLIGHT,
    Attachment,
    Message,
    MessageStatus,
    Session,
    Stage,
    Thread,
    speaker_name,
)
from apps.chat.records import sessions, threads
from apps.chat.records.attachments import MAX_FILES_AT_ONCE, attachment_add, attachment_discard
from apps.chat.selectors import (
    attachments_for_user,
    attachments_waiting,
    messages_for_user,
    round_state,
    sessions_for_user,
    thread_queue,
    threads_for_user,
)
from apps.roles.models import Role
from apps.roles.selectors import roles_offered

router = Router()
PAGE_LIMIT = 200
STAGES: dict[int, str] = {
    Stage.PARALLEL: "parallel",
    Stage.LAST: "last",
    Stage.AUTO_ROUND: "auto_round",
}


def session_out(session, access: str) -> SessionOut:
    return SessionOut(
        id=session.public_id,
        name=session.name,
        access=access,
        model=session.model,
        provider=session.credential.provider if session.credential_id else "demo",
        active_thread=session.active_thread.public_id if session.active_thread_id else None,
        updated_at=session.updated_at,
    )


def message_out(message: Message, roles: dict[str, Role]) -> MessageOut:
    return MessageOut(
        id=message.public_id,
        seq=message.seq,
        speaker=message.speaker,
        speaker_name=speaker_name(message, roles.get(message.speaker)),
        author=message.author.get_username() if message.author is not None else None,
        kind=message.kind,
        stage=STAGES.get(message.stage, "parallel"),
        colour=role.colour if (role := roles.get(message.speaker)) and not message.is_user else "",
        status=message.status,
        text=message.text,
        usage=message.usage or {},
        provider=message.provider,
        model=message.model,
        created_at=message.created_at,
        attachments=[attachment_out(a) for a in message.attachments.all()]  # type: ignore[attr-defined, unused-ignore]
        if message.is_user
        else [],
        citations=_citations(message),
    )


def _citations(message: Message) -> list[CitationOut]:
    if message.is_user or message.status in IN_FLIGHT or "[L" not in message.text:
        return []
    cited = citations_of(message.text, session_id=message.thread.session_id)
    return [
        CitationOut(
            number=one.number, mark=f"L{one.chunk.pk}", document_name=one.chunk.document.name,
            page=one.chunk.page, url=passage_url(one.chunk),
            quotes=[QuoteOut(quote=c.quote, verified=c.verified, exact=c.exact)
                    for c in one.checks],
        )
        for one in cited
    ]  # fmt: skip


def attachment_out(attachment: Attachment) -> AttachmentOut:
    return AttachmentOut(
        id=attachment.public_id, name=attachment.name, kind=attachment.kind,
        media_type=attachment.media_type, size=attachment.size, width=attachment.width,
        height=attachment.height, pages=attachment.pages,
    )  # fmt: skip


def messages_out(messages: list[Message], *, session: Session) -> list[MessageOut]:
    roles = session_roles_by_handle(session, {message.speaker for message in messages})
    prefetch_related_objects([m for m in messages if m.is_user], "attachments")
    return [message_out(message, roles) for message in messages]


def _session(request, public_id: UUID, need: Need):
    return reach(sessions_for_user, user=request.user, need=need, public_id=public_id)


def _thread(request, public_id: UUID, need: Need) -> Thread:
    return reach(threads_for_user, user=request.user, need=need, public_id=public_id)


@router.get("/sessions", response={200: list[SessionOut], **ERRORS}, summary="Your sessions")
def list_sessions(request):
    """The sessions you own and the rooms you are in, most recent first."""
    rows: QuerySet = rooms_for_user(user=request.user).select_related("credential", "active_thread")
    return [session_out(row, row.access) for row in rows.order_by("-updated_at")]


@router.get("/sessions/{session_id}", response={200: SessionDetail, **ERRORS}, summary="A session")
def get_session(request, session_id: UUID):
    """The session with its roles (for `@` completion) and the slash commands."""
    session = _session(request, session_id, Need.READ)
    access = next(iter(rooms_for_user(user=request.user).filter(pk=session.pk)))
    links = session.session_roles.select_related("role").order_by("role__sort_order")
    return SessionDetail(
        **session_out(access, access.access).model_dump(),  # type: ignore[attr-defined, unused-ignore]
        roles=[
            RoleOut(
                handle=link.role.handle,
                display_name=link.role.display_name,
                colour=link.role.colour,
                icon=link.role.icon,
                muted=link.muted,
                answers_last=link.role.answers_last,
            )
            for link in links
        ],
        commands=[CommandOut(**command) for command in command_list()],
        auto_rounds=session.auto_rounds,
        turn_token_budget=session.turn_token_budget,
    )


@router.get(
    "/threads/{thread_id}", response={200: ThreadStatus, **ERRORS}, summary="A thread's state"
)
def get_thread(request, thread_id: UUID):
    """Its queue (messages waiting for the running turn) and where its auto-rounds are."""
    thread = _thread(request, thread_id, Need.READ)
    rounds = round_state(thread=thread)
    return ThreadStatus(
        id=thread.public_id,
        label=thread.label,
        latest_seq=thread.next_seq - 1,
        queue=[
            QueuedOut(
                id=item.public_id,
                author=item.author.get_username() if item.author is not None else None,
                text="" if item.private and item.author_id != request.user.pk else item.text,
                held=item.held_because,
            )
            for item in thread_queue(thread=thread)
        ],
        rounds=RoundsOut(round=rounds.round, rounds=rounds.rounds, next=rounds.next_handle)
        if rounds
        else None,
    )


@router.post("/sessions", response={201: SessionOut, **ERRORS}, summary="Create a session")
def create_session(request, body: SessionIn):
    require_post_scope(request)
    roles = None
    if body.roles:
        handles = {handle.lstrip("@") for handle in body.roles}
        found = {r.handle: r for r in roles_offered(request.user).filter(handle__in=handles)}
        unknown = sorted(handles - set(found))
        if unknown:
            raise Refused(404, f"No role {', '.join('@' + h for h in unknown)}.", "roles")
        roles = list(found.values())
    session = sessions.session_create(owner=request.user, name=body.name, roles=roles)
    return Status(201, session_out(session, "owner"))


@router.get(
    "/sessions/{session_id}/threads",
    response={200: list[ThreadOut], **ERRORS},
    summary="A session's threads",
)
def list_threads(request, session_id: UUID):
    session = _session(request, session_id, Need.READ)
    rows = threads_for_user(user=request.user, need=Need.READ).filter(session=session)
    return [
        ThreadOut(
            id=thread.public_id,
            label=thread.label,
            parent=thread.parent.public_id if thread.parent is not None else None,
            latest_seq=thread.next_seq - 1,
            updated_at=thread.updated_at,
        )
        for thread in rows.select_related("parent").order_by("-updated_at")
    ]


@router.post(
    "/sessions/{session_id}/threads",
    response={201: ThreadOut, **ERRORS},
    summary="Start a new thread",
)
def create_thread(request, session_id: UUID):
    require_post_scope(request)
    session = _session(request, session_id, Need.TALK)
    thread = threads.thread_create(session=session)
    return Status(
        201,
        ThreadOut(
            id=thread.public_id, label="", parent=None, latest_seq=0, updated_at=thread.updated_at
        ),
    )


class PageQuery(Schema):
    after: int = Field(0, ge=0, le=2**31 - 1, description="The sequence number to start after")
    limit: int = Field(50, ge=1, le=PAGE_LIMIT, description=f"At most {PAGE_LIMIT}")


@router.get(
    "/threads/{thread_id}/messages",
    response={200: MessagePage, **ERRORS},
    summary="A thread's messages, oldest first",
)
def list_messages(request, thread_id: UUID, page: Query[PageQuery]):
    """The thread's own messages after sequence number `after` (whispers only for their
    audience), at most `limit` (up to 200) a page."""
    thread = _thread(request, thread_id, Need.READ)
    if page.limit < 1 or page.limit > PAGE_LIMIT:
        raise ValidationError({"limit": f"Ask for 1 to {PAGE_LIMIT} messages a page."})
    rows = list(
        Message.objects.filter(thread=thread, seq__gt=max(page.after, 0))
        .filter(visible_to(request.user))
        .select_related("author")
        .order_by("seq")[: page.limit + 1]
    )
    more = len(rows) > page.limit
    rows = rows[: page.limit]
    return MessagePage(
        items=messages_out(rows, session=thread.session), next_after=rows[-1].seq if more else None
    )


@router.post(
    "/threads/{thread_id}/messages",
    response={201: PostOut, **ERRORS},
    summary="Post a message",
)
def post_message(request, thread_id: UUID, body: PostIn):
    """The same as the composer: `@handles` route it, slash commands run, and while a turn
    is running it waits in the queue (`queued`)."""
    require_post_scope(request)
    thread = _thread(request, thread_id, Need.TALK)
    ids = [str(i) for i in body.attachments]
    waiting = attachments_waiting(owner=request.user, thread=thread, ids=ids)
    if len(waiting) != len(set(ids)):
        raise Refused(
            404, "No such attachment of yours waiting in this session (sent already?).",
            "attachments",
        )  # fmt: skip
    try:
        posted = posting.message_post(
            thread=thread, author=request.user, text=body.text, client_token=body.client_token,
            attachments=waiting,
        )  # fmt: skip
    except ValidationError as exc:
        if getattr(exc, "code", None) == "budget":
            raise Refused(429, " ".join(exc.messages), "text") from None
        raise ValidationError({"text": " ".join(exc.messages)}) from None
    return Status(
        201,
        PostOut(
            message=(
                messages_out([posted.user_message], session=thread.session)[0]
                if posted.user_message
                else None
            ),
            replies=messages_out(posted.replies, session=thread.session),
            notices=messages_out(posted.notices, session=thread.session),
            queued=posted.queued is not None,
            thread=(posted.redirect_to or thread).public_id,
        ),
    )


@router.post("/threads/{thread_id}/stop", response={200: Accepted, **ERRORS}, summary="Stop")
def stop_thread(request, thread_id: UUID):
    """Stop the thread's queued and streaming replies (what they wrote is kept)."""
    require_post_scope(request)
    replies.thread_interrupt(thread=_thread(request, thread_id, Need.TALK), by=request.user)
    return Accepted()


def _rerun(request, message_id: UUID, *, failed_only: bool) -> MessageOut:
    require_post_scope(request)
    message = reach(messages_for_user, user=request.user, need=Need.TALK, public_id=message_id)
    if message.status in (MessageStatus.QUEUED, MessageStatus.STREAMING):
        raise Refused(409, "The reply is still running: stop it first, or wait.", "message_id")
    if failed_only and message.status == MessageStatus.DONE:
        raise Refused(409, "The reply did not fail: regenerate it instead.", "message_id")
    try:
        rerun = replies.reply_rerun(message=message, by=request.user)
    except ValidationError as exc:
        over_budget = getattr(exc, "code", None) == "budget"
        status = 429 if over_budget else 409
        raise Refused(status, " ".join(exc.messages), "message_id") from None
    return messages_out([rerun], session=message.thread.session)[0]


@router.post(
    "/messages/{message_id}/retry",
    response={200: MessageOut, **ERRORS},
    summary="Retry a failed or stopped reply",
)
def retry_reply(request, message_id: UUID):
    return _rerun(request, message_id, failed_only=True)


@router.post(
    "/messages/{message_id}/regenerate",
    response={200: MessageOut, **ERRORS},
    summary="Regenerate a reply (its earlier text is kept as a version)",
)
def regenerate_reply(request, message_id: UUID):
    return _rerun(request, message_id, failed_only=False)


@router.post(
    "/threads/{thread_id}/attachments",
    response={201: list[AttachmentOut], **ERRORS, 422: Error},
    summary="Attach files, to name in the next message",
)
def upload_attachments(
    request,
    thread_id: UUID,
    files: list[UploadedFile] = File(..., min_length=1, max_length=MAX_FILES_AT_ONCE),  # noqa: B008
):
    """Upload images (PNG, JPEG, WebP, GIF), PDFs or text files as multipart `files`; they wait
    for a message that names them in `attachments`. All or nothing: a refused file (its type,
    its size, the session's quota) is said in `detail` and none of them is kept."""
    require_post_scope(request)
    thread = _thread(request, thread_id, Need.TALK)
    kept: list[Attachment] = []
    try:
        for upload in files:
            name, data = upload.name or "", upload.read()
            added = attachment_add(
                session=thread.session, owner=request.user, thread=thread, name=name, data=data
            )
            kept.append(added)
    except ValidationError as exc:
        for attachment in kept:
            attachment_discard(attachment=attachment)
        raise Refused(422, " ".join(exc.messages), "files") from None
    return Status(201, [attachment_out(attachment) for attachment in kept])


FILE_TYPES = ("image/*", "application/pdf", "text/*", "application/json")


@router.get(
    "/attachments/{attachment_id}",
    response={200: bytes, **ERRORS},
    summary="An attachment's bytes",
    openapi_extra={
        "responses": {
            "200": {
                "description": "The stored file, with its sniffed type",
                "content": {
                    kind: {"schema": {"type": "string", "format": "binary"}} for kind in FILE_TYPES
                },
            }
        }
    },
)
def get_attachment(request, attachment_id: UUID):
    """The stored file, with its sniffed type (a whisper's only to its audience)."""
    found = reach(attachments_for_user, user=request.user, need=Need.READ, public_id=attachment_id)
    return attachment_response(found)
