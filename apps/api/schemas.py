"""What the API takes and returns (its OpenAPI schema is generated from these)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from ninja import Field, Schema
from ninja.errors import HttpError


class Error(Schema):
    detail: str
    field: str | None = None


ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 409: Error, 413: Error, 429: Error}


class Refused(HttpError):
    """An HTTP error about one field of the request (the error contract's `field`)."""

    def __init__(self, status_code: int, message: str, field: str | None = None) -> None:
        super().__init__(status_code, message)
        self.field = field


class SessionOut(Schema):
    id: UUID
    name: str
    access: str = Field(description="owner, member or viewer")
    model: str
    provider: str
    active_thread: UUID | None
    updated_at: datetime


class RoleOut(Schema):
    handle: str
    display_name: str
    colour: str
    icon: str
    muted: bool
    answers_last: bool


class CommandOut(Schema):
    name: str
    usage: str
    summary: str


class SessionDetail(SessionOut):
    roles: list[RoleOut]
    commands: list[CommandOut] = Field(description="The slash commands a message may start with")
    auto_rounds: int
    turn_token_budget: int


class QueuedOut(Schema):
    id: UUID
    author: str | None
    text: str = Field(description="Empty for another person's whisper")
    held: str = Field(description="Why it is held (someone left the room), if it is")


class RoundsOut(Schema):
    round: int
    rounds: int
    next: str


class ThreadStatus(Schema):
    id: UUID
    label: str
    latest_seq: int
    queue: list[QueuedOut]
    rounds: RoundsOut | None


class SessionIn(Schema):
    name: str = Field("", max_length=120)
    roles: list[Annotated[str, Field(pattern=r"^@?[A-Za-z0-9_-]{1,40}$")]] | None = Field(
        None, description="Role handles; empty: the default roles", max_length=50
    )


class ThreadOut(Schema):
    id: UUID
    label: str
    parent: UUID | None
    latest_seq: int
    updated_at: datetime


class AttachmentOut(Schema):
    id: UUID
    name: str
    kind: str = Field(description="image, pdf or text")
    media_type: str = Field(description="What the bytes are (sniffed; images re-encoded)")
    size: int
    width: int | None
    height: int | None
    pages: int | None


class QuoteOut(Schema):
    quote: str
    verified: bool = Field(description="Found in the cited passage (exactly, or close)")
    exact: bool


class CitationOut(Schema):
    number: int = Field(description="As the reply's links are numbered in the web page")
    mark: str = Field(description="As the reply wrote it: L123 for [L123]")
    document_name: str
    page: int | None
    url: str = Field(description="The passage in the web page")
    quotes: list[QuoteOut] = Field(description="Quotations made with this mark, checked")


class MessageOut(Schema):
    id: UUID
    seq: int
    speaker: str = Field(description="'user', a role handle, or 'parley' for notices")
    speaker_name: str
    author: str | None = Field(None, description="The person who wrote it (a room's member)")
    kind: str
    stage: str = Field(description="parallel, last (answers after the others) or auto_round")
    colour: str = Field(description="The role's colour (a person's message: empty)")
    status: str = Field(description="queued, streaming, done, error or interrupted")
    text: str
    usage: dict
    provider: str
    model: str
    created_at: datetime
    attachments: list[AttachmentOut] = Field(
        default_factory=list, description="A person's message: its images, PDFs and text files"
    )
    citations: list[CitationOut] = Field(
        default_factory=list,
        description="A finished reply: the library passages it cites, its quotations checked",
    )


class MessagePage(Schema):
    items: list[MessageOut]
    next_after: int | None = Field(description="Pass as `after` for the next page; null: none")


class PostIn(Schema):
    text: str = Field(
        min_length=1, pattern=r"\S", description="The message, a /command or a /whisper"
    )
    client_token: UUID | None = Field(
        None, description="The same token twice posts once (a retried request)"
    )
    attachments: list[UUID] = Field(
        default_factory=list,
        max_length=20,
        description="Attachments uploaded to this thread (`POST …/attachments`) to send with it",
    )


class PostOut(Schema):
    message: MessageOut | None
    replies: list[MessageOut]
    notices: list[MessageOut]
    queued: bool = Field(description="A turn was running: the message waits in the queue")
    thread: UUID = Field(description="Where it went (a command may open another thread)")


class Accepted(Schema):
    ok: bool = True


class ImportOut(Schema):
    id: UUID
    name: str
    size: int = Field(description="The file's size in bytes")
    received: int = Field(description="Bytes of it received so far (sent in pieces)")
    status: str = Field(
        description="uploading, reading, ready, importing, done, cancelled or failed"
    )
    done: int = Field(description="Conversations read (while reading) or imported so far")
    total: int = Field(description="Conversations to import, once the file is read")
    preview: dict[str, Any] = Field(
        description="What importing makes: counts, formats, voices (each to become a role), "
        "what is skipped and why, broken conversations, the first conversations by title"
    )
    roles: dict[str, str] = Field(description="Each voice's role: a handle, or `new`")
    report: dict[str, Any] = Field(
        description="What importing made: sessions, conversations already imported, broken ones"
    )
    error: str
    created_at: datetime
    finished_at: datetime | None


class UploadIn(Schema):
    name: str = Field(max_length=255, description="The file's name (`.zip` or `.json`)")
    size: int = Field(gt=0, description="Its size in bytes")


class ImportStartIn(Schema):
    roles: dict[str, str] = Field(
        default_factory=dict,
        description="For each voice of the preview, the handle of a role you may use, or `new` "
        "(a new role of yours named after it); a voice left out gets what the preview suggests",
    )
