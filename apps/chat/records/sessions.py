"""Writes for sessions: creation, names, provider, roles, memory and settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files import File
from django.db import transaction

from apps.chat.display import events
from apps.chat.models import ContextKind, ContextVersion, Session, SessionRole, Thread
from apps.chat.models import person_name as person_name_of
from apps.chat.records.context import context_save, thread_snapshot
from apps.chat.records.messages import greetings_post
from apps.chat.records.text import clean_name, storable
from apps.chat.selectors import attachments_bytes
from apps.library.selectors import library_bytes
from apps.providers.models import Credential
from apps.roles.models import Role
from apps.roles.selectors import default_roles
from apps.roles.services import role_ensure_default
from apps.workspace.files import FileInfo, Workspace


def session_create(
    *,
    owner,
    name: str = "",
    mcp_servers: list | None = None,
    credential: Credential | None = None,
    model: str = "",
    persona: str = "",
    memory: str = "",
    roles: list[Role] | None = None,
    disabled_tools: list[str] | None = None,
    persona_name: str = "",
    greet: bool = True,
) -> Session:
    """Create a session and its first thread: with the roles chosen (else the default
    ones), the credential and model (else the demo provider), the persona and memory, the
    tools switched off, and the MCP servers (the caller has checked the owner may use the
    credential and the servers). With `greet`, characters from cards open it with their
    greeting (an imported chat's session is written as it was, without)."""
    name = " ".join(storable(name).split())[:120] or "New session"
    if roles is not None and not roles:
        raise ValidationError("A session needs at least one role.")
    with transaction.atomic():
        session = Session.objects.create(
            owner=owner,
            name=name,
            credential=credential,
            model=model.strip()[:120],
            persona_name=" ".join(storable(persona_name).split())[:80],
            persona=storable(persona),
            memory=storable(memory),
            disabled_tools=list(disabled_tools or []),
        )
        # Version 1 of each, even empty: every thread pins what its roles are told.
        ContextVersion.objects.bulk_create(
            ContextVersion(
                session=session,
                kind=kind,
                number=1,
                author=owner,
                note="the session began",
                name=getattr(session, f"{kind}_name"),
                text=getattr(session, kind),
            )
            for kind in ContextKind.values
        )
        roles = roles or default_roles() or [role_ensure_default()]
        SessionRole.objects.bulk_create(SessionRole(session=session, role=role) for role in roles)
        thread = Thread.objects.create(session=session)
        thread_snapshot(thread=thread)
        session.active_thread = thread
        session.save(update_fields=["active_thread"])
        if greet:
            greetings_post(thread=thread, roles=roles, person_name=person_name_of(owner))
        if mcp_servers:
            session.mcp_servers.set(mcp_servers)
    return session


def session_rename(*, session: Session, name: str) -> Session:
    session.name = clean_name(name, what="session name")
    session.save(update_fields=["name", "updated_at"])
    return session


def session_set_provider(*, session: Session, credential: Credential | None, model: str) -> Session:
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
        # A thread's sticky role that left the session no longer catches messages.
        Thread.objects.filter(session=session).exclude(sticky_handle="").exclude(
            sticky_handle__in=[role.handle for role in roles]
        ).update(sticky_handle="")
        session.save(update_fields=["updated_at"])
    return session


def session_set_memory(
    *, session: Session, memory: str, thread: Thread | None = None, role: str = "", author=None
) -> Session:
    """A new version of the memory; `thread` (where a role or person wrote it) takes it."""
    note = f"@{role} wrote to it" if role else "edited"
    context_save(
        session=session, kind=ContextKind.MEMORY, text=memory, author=author, role=role,
        note=note, thread=thread,
    )  # fmt: skip
    return session


@dataclass(frozen=True)
class SettingsChange:
    credential: Credential | None
    model: str
    persona: str
    memory: str
    addressing_mode: str
    auto_rounds: int
    disabled_tools: list[str]
    roles: list[Role]
    overrides: dict[int, str]  # role pk -> model override ("" for none)
    role_credentials: dict[int, Credential | None] = field(default_factory=dict)
    turn_mode: str = "broadcast"
    round_order: list[str] = field(default_factory=list)
    group_rules: str = ""  # blank: Parley's default rules
    reply_length: str = "normal"
    turn_token_budget: int = 0
    turn_time_limit: int = 0
    stop_phrase: str = ""
    ai_mentions: bool = False
    auto_route: bool = False
    tool_mode: str = "as_it_goes"
    library_passages: bool = False
    mcp_servers: list | None = None  # None: leave the session's servers as they are
    persona_name: str | None = None  # None: keep the names
    memory_name: str | None = None
    from_thread: Thread | None = None  # the thread the settings were changed from takes them


def session_save_settings(*, session: Session, change: SettingsChange) -> Session:
    """Store the session's settings and show them in every tab open on it."""
    with transaction.atomic():
        session.credential = change.credential
        session.model = change.model.strip()[:120]
        session.addressing_mode = change.addressing_mode
        session.auto_rounds = change.auto_rounds
        session.disabled_tools = sorted(change.disabled_tools)
        session.turn_mode = change.turn_mode
        session.round_order = list(change.round_order)
        session.group_rules = storable(change.group_rules.strip())
        session.reply_length = change.reply_length
        session.turn_token_budget = change.turn_token_budget
        session.turn_time_limit = change.turn_time_limit
        session.stop_phrase = storable(" ".join(change.stop_phrase.split()))
        session.ai_mentions = change.ai_mentions
        session.auto_route = change.auto_route
        session.tool_mode = change.tool_mode
        session.library_passages = change.library_passages
        session.save()
        for kind, text, name in (
            (ContextKind.PERSONA, change.persona, change.persona_name),
            (ContextKind.MEMORY, change.memory, change.memory_name),
        ):
            context_save(
                session=session, kind=kind, text=text, name=name, author=session.owner,
                note="changed in the settings", thread=change.from_thread,
            )  # fmt: skip
        if change.mcp_servers is not None:
            session.mcp_servers.set(change.mcp_servers)
        session_set_roles(session=session, roles=change.roles)
        for link in session.session_roles.all():
            link.model_override = change.overrides.get(link.role_id, "").strip()[:120]
            link.credential = change.role_credentials.get(link.role_id)
            link.save(update_fields=["model_override", "credential"])
        events.publish_session_controls_on_commit(session=session)
    return session


def session_files_write(*, session: Session, path: str, data: bytes | File) -> FileInfo:
    """Write a file into the session's workspace under the one quota it shares with the
    session's attachments: the session's row is locked for the arithmetic and the write, as
    an attachment's is (concurrent uploads of both kinds cannot overrun it together)."""
    with transaction.atomic():
        Session.objects.select_for_update().filter(pk=session.pk).first()
        return session_workspace(session).write(path, data)


def session_storage_used(session: Session) -> int:
    """Bytes the session's files take in its one quota: the workspace's, its attachments'
    and its library's."""
    return (
        attachments_bytes(session=session)
        + session_workspace(session).used_bytes()
        + library_bytes(session_id=session.pk)
    )


def session_workspace(session: Session) -> Workspace:
    """The session's folder of files (created when first used)."""
    # One quota for the session's files: the workspace's, its attachments and its library.
    quota = settings.PARLEY_WORKSPACE_QUOTA_MB * 1024 * 1024
    return Workspace(
        session.public_id.hex,
        quota_bytes=max(
            quota - attachments_bytes(session=session) - library_bytes(session_id=session.pk), 0
        ),
    )
