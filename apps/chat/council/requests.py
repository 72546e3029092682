"""Gathers what a reply's request needs from the database and hands it to `prompting`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef

from apps.chat.access import session_roles_by_handle
from apps.chat.council import cache_ttl
from apps.chat.council.attachment_parts import MessageMedia, media_for
from apps.chat.council.intent import format_rule, intent_of, worth_asking
from apps.chat.council.prompting import (
    AUTO_ROUND_CUE,
    LAST_CUE,
    SEQUENTIAL_CUE,
    RosterEntry,
    TranscriptEntry,
    build_role_request,
    length_rule,
)
from apps.chat.council.tools import ToolContext, passages_block, session_tool_definitions
from apps.chat.display.citations import cited_markdown
from apps.chat.models import Message, Stage, ToolMode, Turn, person_name, reply_words
from apps.chat.records.context import thread_context
from apps.chat.selectors import message_block_text, speaker_names, transcript_messages
from apps.library.search import Hit, library_search
from apps.providers.registry import describe
from apps.providers.selectors import model_reads
from apps.providers.types import ChatRequest
from apps.roles.lorebook import DEFAULT_SCAN_DEPTH, MAX_TOKEN_BUDGET, Lore, lore_block, lore_for
from apps.roles.models import LoreEntry, Role


def _roster_entry(role: Role) -> RosterEntry:
    return RosterEntry(
        handle=role.handle,
        display_name=role.display_name,
        description=role.description,
        persona=role.persona,
    )


def session_roster(session) -> list[Role]:
    """The session's roles in roster order, read once per session object: a reply's start
    asks for them for its setup, its request and its streaming bubble."""
    roster = session.__dict__.get("_roster")
    if roster is None:
        links = (
            session.session_roles.select_related("role")
            .annotate(has_lore=Exists(LoreEntry.objects.filter(role=OuterRef("role"))))
            .order_by("role__sort_order", "role__handle")
        )
        roster = session.__dict__["_roster"] = []
        for link in links:
            link.role.has_lore = link.has_lore  # a reply reads the lorebook only if there is one
            roster.append(link.role)
    return roster


def roster_by_handle(session) -> dict[str, Role]:
    return {role.handle: role for role in session_roster(session)}


def reply_history(*, message: Message) -> list[Message]:
    """What a reply sees: the settled transcript before it, without its parallel siblings.

    Roles answering in parallel never see each other (so their requests are identical up to
    the history breakpoint); the answers-last roles see every earlier stage; auto-round
    replies see everything before them.
    """
    history = transcript_messages(thread=message.thread, before_seq=message.seq)
    turn = message.turn  # read once per reply, cached on the message
    siblings = turn is not None and message.stage != Stage.AUTO_ROUND and not turn.sequential
    return [
        entry
        for entry in history
        if not entry.in_flight
        and not (siblings and entry.turn_id == message.turn_id and entry.stage == message.stage)
        # A whisper reaches only the roles it names: the others never get it.
        and (not entry.private or message.speaker in entry.audience_roles)
    ]


def _shared_room(session) -> bool:
    """Whether people besides the owner are in the session's room (read once per session
    object): then the transcript names each person, else the one person is "User"."""
    shared = session.__dict__.get("_shared_room")
    if shared is None:
        shared = session.__dict__["_shared_room"] = session.memberships.exists()
    return shared


def human_name(entry: Message, session) -> str:
    """How a request's transcript names a person's message."""
    return person_name(entry.author) if _shared_room(session) and entry.author_id else "User"


def transcript_entries(
    *,
    message: Message,
    media: MessageMedia | None = None,
    history: list[Message] | None = None,
) -> list[TranscriptEntry]:
    """The reply's history as the request's entries; `media`: its attachments as the reply's
    model takes them (see `attachment_parts`); `history`, when the caller has read it."""
    session = message.thread.session
    names = speaker_names(session=session)
    entries = []
    for entry in reply_history(message=message) if history is None else history:
        text = message_block_text(entry)
        parts = media.parts.get(entry.pk, ()) if media is not None else ()
        if text or parts:
            entries.append(
                TranscriptEntry(
                    speaker_name=human_name(entry, session)
                    if entry.is_user
                    else names.get(entry.speaker, entry.speaker),
                    text=text,
                    is_user=entry.is_user,
                    message_id=entry.pk,
                    private=entry.private,
                    media=parts,
                )
            )
    return entries


def history_media(*, message: Message, history: list[Message] | None = None) -> MessageMedia:
    """The attachments of the reply's history, as its model reads them."""
    history = reply_history(message=message) if history is None else history
    ids = [entry.pk for entry in history if entry.is_user]
    return media_for(ids, model_reads(provider=message.provider, model=message.model))


def request_for_reply(
    *,
    message: Message,
    summary=None,
    transcript: list[TranscriptEntry] | None = None,
    media: MessageMedia | None = None,
) -> ChatRequest:
    """The provider request for a queued reply: everything said before it, then its cue.

    `summary` (a `summaries.Summary`) replaces the transcript up to the message it covers;
    `transcript` and `media` pass the entries and their attachments when the caller has
    already read them.
    """
    thread = message.thread
    session = thread.session
    roles = session_roster(session)
    by_handle = {role.handle: role for role in roles}
    speaker = (
        by_handle.get(message.speaker)
        or session_roles_by_handle(session, {message.speaker})[message.speaker]
    )
    if transcript is None or media is None:
        history = reply_history(message=message)  # read once for both
        media = media or history_media(message=message, history=history)
        if transcript is None:
            transcript = transcript_entries(message=message, media=media, history=history)
    summary_text = ""
    if summary is not None:
        ids = [entry.message_id for entry in transcript]
        if summary.covers_id in ids:
            transcript = transcript[ids.index(summary.covers_id) + 1 :]
            summary_text = summary.text
    turn = message.turn if message.turn_id else None
    persona, memory = thread_context(thread=thread, session=session)
    asked = next((entry.text for entry in reversed(transcript) if entry.is_user), "")
    intent = _intent(turn, session, asked)
    lore = _lore(speaker, transcript)
    passages = _library_passages(session, message, asked)
    cue = "\n\n".join(
        filter(
            None,
            [
                _stage_cue(message, turn),
                _citation_cue(message, transcript, session_id=session.pk),
                length_rule(reply_words((turn and turn.reply_length) or session.reply_length)),
                format_rule(intent or "", role_has_rules=bool(speaker.output_rules.strip())),
                lore_block(lore),
                passages_block(passages),
            ],
        )
    )
    request = build_role_request(
        model=message.model,
        roster=[_roster_entry(role) for role in roles],
        speaker=_roster_entry(speaker),
        transcript=transcript,
        session_persona=persona,
        memory=memory,
        tools=session_tool_definitions(session),
        summary=summary_text,
        cue=cue,
        group_rules=session.group_rules,
        output_rules=speaker.output_rules,
        max_tokens=describe(message.provider).max_tokens_for(message.model),
        blobs=media.blobs,
    )
    if speaker.output_rules.strip():  # a rule the cheap model picks later says theirs win
        request = replace(request, metadata={**request.metadata, "role_rules": True})
    if session.tool_mode == ToolMode.TOOLS_FIRST and request.tools:
        request = replace(request, metadata={**request.metadata, "tools_first": True})
    if passages:  # the engine notes them in the reply's log
        marks = [f"[L{hit.chunk.pk}]" for hit in passages]
        request = replace(request, metadata={**request.metadata, "library": marks})
    if lore:  # the engine notes which entries came in, in the reply's log (its Details)
        names = [entry.name or ", ".join(entry.keys[:2]) or "constant" for entry in lore]
        request = replace(request, metadata={**request.metadata, "lore": names})
    if intent:  # the engine notes it in the reply's log (its Details)
        request = replace(request, metadata={**request.metadata, "format": intent})
    elif intent == "" and worth_asking(asked):  # the rules are unsure: the cheap model says
        request = replace(request, metadata={**request.metadata, "ask_intent": asked})
    if message.provider == "anthropic":
        request = _with_cache_ttl(request, message=message, turn=turn, transcript=transcript)
    return request


def _lore(speaker: Role, transcript: list[TranscriptEntry]) -> list[Lore]:
    """The speaker's lorebook entries the last messages it sees bring in (in the cue, after
    the shared history: the prompt cache the roles share is not touched)."""
    if not getattr(speaker, "has_lore", True):
        return []
    entries = [
        Lore(content=e.content, keys=e.keys, secondary_keys=e.secondary_keys,
             selective=e.selective, constant=e.constant, case_sensitive=e.case_sensitive,
             insertion_order=e.insertion_order, priority=e.priority, name=e.name)
        for e in speaker.lore.filter(enabled=True)
    ]  # fmt: skip
    if not entries:
        return []
    book = (speaker.card or {}).get("lorebook") or {}
    depth = book.get("scan_depth") or DEFAULT_SCAN_DEPTH
    budget = min(book.get("token_budget") or settings.PARLEY_LOREBOOK_TOKENS, MAX_TOKEN_BUDGET)
    recent = [entry.text for entry in transcript[-depth:]]
    return lore_for(entries, recent, budget=budget, recursive=bool(book.get("recursive_scanning")))


def _with_cache_ttl(
    request: ChatRequest, *, message: Message, turn: Turn | None, transcript: list
) -> ChatRequest:
    """The request with the cache TTLs its thread's pauses call for (noted in its Details)."""
    # What the previous turn's closing request did not send: from its turn's last reply on.
    first_new = next(
        (
            index
            for index, entry in enumerate(transcript)
            if turn is not None and entry.message_id >= (turn.user_message_id or 0)
        ),
        0,
    )
    return cache_ttl.for_request(
        request,
        new_texts=[entry.text for entry in transcript[max(0, first_new - 1) :]]
        if first_new
        else [block.text for block in request.system] + [e.text for e in transcript],
        gaps=cache_ttl.thread_gaps(thread_id=message.thread_id, before_seq=message.seq),
        closing=cache_ttl.closes_turn(message=message, turn=turn),
    )


def _intent(turn: Turn | None, session, asked: str) -> str | None:
    """The shape the person's last message (`asked`) asks for ("": the rules are unsure) —
    None (off) when they set a reply length (for the turn or the session). A role's own output
    rules do not turn it off: both apply, the role's winning where they differ."""
    if turn is None:
        return None
    if turn.reply_length or (session.reply_length or "normal") != "normal":
        return None
    return intent_of(asked)


def _stage_cue(message: Message, turn: Turn | None) -> str:
    """What the role is told about its place in the turn. "The others' answers are above"
    only when others of this turn have answered before it."""
    if message.stage == Stage.AUTO_ROUND:
        return AUTO_ROUND_CUE
    if turn is None:
        return ""
    answered_before = (
        Message.objects.filter(turn=turn, seq__lt=message.seq, stage__lte=message.stage)
        .exclude(pk=message.pk)
        .exclude(content=[])
        .exists()
    )
    if not answered_before:
        return ""
    if message.stage == Stage.LAST:
        return LAST_CUE
    return SEQUENTIAL_CUE if turn.sequential else ""


def _library_passages(session, message: Message, asked: str) -> list[Hit]:
    """The library's best passages for the question, for a role the message addresses, when
    the session puts them in the request (after the shared history: the cache is kept)."""
    if not session.library_passages or message.stage == Stage.AUTO_ROUND or not asked.strip():
        return []
    return library_search(session=session, question=asked, limit=PASSAGES_IN_REQUEST)


def _citation_cue(message: Message, transcript: list[TranscriptEntry], *, session_id: int) -> str:
    """The convergence role is told which quotations of this turn's answers were not found
    in the library passages they cite (it weighs them, and need not repeat them)."""
    if message.stage != Stage.LAST:
        return ""
    since_asked: list[TranscriptEntry] = []
    for entry in reversed(transcript):
        if entry.is_user:
            break
        since_asked.append(entry)
    failed = [
        f"“{check.quote}” ({entry.speaker_name})"
        for entry in reversed(since_asked)
        if "[L" in entry.text
        for check in cited_markdown(entry.text, session_id=session_id)[1]
        if not check.verified
    ]
    if not failed:
        return ""
    return (
        "Citation check: these quotations were not found in the library passages they cite, "
        "so do not rely on them as quoted: " + "; ".join(failed) + "."
    )


PASSAGES_IN_REQUEST = 4


@dataclass(frozen=True)
class ReplySetup:
    """What the worker needs besides the request: who speaks, who else does, tool rights."""

    own_names: list[str]
    other_names: list[str]
    tool_context: ToolContext


def reply_setup(*, message: Message) -> ReplySetup:
    session = message.thread.session
    role = roster_by_handle(session).get(message.speaker)
    if role is None:  # a role since taken off the session still finishes its reply
        role = session_roles_by_handle(session, {message.speaker}).get(message.speaker)
    others = [
        name
        for other in session_roster(session)
        if other.handle != message.speaker
        for name in (other.handle, other.display_name)
    ]
    others += ["User", session.owner.get_username()]
    if _shared_room(session):
        people = get_user_model().objects.filter(room_memberships__session=session)
        others += [
            name for person in people for name in (person.get_username(), person_name(person))
        ]
    return ReplySetup(
        own_names=[message.speaker, role.display_name if role else message.speaker],
        other_names=others,
        tool_context=ToolContext(
            session_id=session.pk,
            thread_id=message.thread_id,
            reply_pk=message.pk,
            role_handle=message.speaker,
            can_write=bool(role and role.can_write),
        ),
    )
