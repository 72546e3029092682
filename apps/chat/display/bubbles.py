"""The one rendering path for a message bubble: HTTP responses and websocket pushes alike."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import prefetch_related_objects
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from apps.chat.access import session_roles_by_handle
from apps.chat.display import frames
from apps.chat.display.citations import cited_markdown
from apps.chat.display.details import reply_details
from apps.chat.display.markdown import render_markdown
from apps.chat.models import (
    NOTICE_SPEAKER,
    USER_SPEAKER,
    Message,
    MessageKind,
    MessageStatus,
    Thread,
    person_hue,
    person_initials,
    person_name,
    speaker_name,
)
from apps.chat.reading import session_unread, thread_unread
from apps.chat.selectors import (
    roles_reading_descriptions,
    round_state,
    session_links,
    thread_queue,
    thread_tree,
    turn_outcome,
)
from apps.chat.usage import (
    RECENT_REPLIES,
    ThreadFigures,
    UsageSummary,
    session_figures,
    session_usage,
)
from apps.providers.pricing import PriceTable, format_money
from apps.roles.models import Role


def tool_activity(message: Message) -> tuple[list[dict], list[dict]]:
    """The tools a reply used (call with its result) and its routing suggestions."""
    results = {
        part.get("tool_call_id"): part
        for part in message.content
        if part.get("type") == "tool_result"
    }
    activity, suggestions = [], []
    for part in message.content:
        if part.get("type") != "tool_call":
            continue
        result = results.get(part.get("id"), {})
        arguments = part.get("arguments") if isinstance(part.get("arguments"), dict) else {}
        activity.append(
            {
                "name": part.get("name", ""),
                "arguments": ", ".join(f"{k}={v!r}" for k, v in arguments.items())[:200],
                "result": str(result.get("content", ""))[:500],
                # The whole result, shown on demand: it may be far longer than the line.
                "full_result": str(result.get("content", "")),
                "trimmed": "sent" in result,
                "is_error": bool(result.get("is_error")),
                "pending": not result,
            }
        )
        if part.get("name") == "suggest_route" and result and not result.get("is_error"):
            handle = str(arguments.get("handle", "")).lstrip("@").lower()
            text = " ".join(str(arguments.get("message", "")).split())
            suggestions.append({"handle": handle, "prefill": f"@{handle} {text}".strip()})
    return activity, suggestions


def shown_text(message: Message) -> str:
    """A settled message's text as its bubble shows it: text on either side of a tool call is
    a paragraph of its own (joined bare, "good." and "Quirky" ran together)."""
    runs = [part.get("text", "") for part in message.content if part.get("type") == "text"]
    return (
        "\n\n".join(run.strip("\n") for run in runs if run.strip())
        if len(runs) > 1
        else message.text
    )


def reply_figures(message: Message, prices: PriceTable | None) -> dict:
    """A settled reply's tokens, cost (by the price table) and how long it took."""
    if message.is_user or message.kind != MessageKind.CHAT or not message.finished_at:
        return {}
    usage = message.usage or {}
    figures: dict = {}
    if message.duration_ms is not None:
        figures["took"] = f"{message.duration_ms / 1000:.1f} s"
    if usage:
        figures["tokens"] = (
            f"{usage.get('input', 0):,} in · {usage.get('output', 0):,} out · "
            f"{usage.get('cache_read', 0):,} cache read · {usage.get('cache_write', 0):,} "
            "cache write"
        )
        cost = prices.cost(message.provider, message.model, usage) if prices else None
        if cost is not None:
            figures["cost"] = format_money(cost.amount)
            figures["cache_saved"] = format_money(cost.cache_saved)
    return figures


def bubble_context(
    message: Message,
    *,
    role: Role | None,
    live_text: str | None = None,
    prices: PriceTable | None = None,
) -> dict:
    text = shown_text(message) if live_text is None else live_text
    streaming = message.status in (MessageStatus.QUEUED, MessageStatus.STREAMING)
    activity, suggestions = tool_activity(message)
    # Prefetched by `render_bubbles` (mypy's plugin sees the reverse relation by cache order).
    attachments = (
        list(message.attachments.all())  # type: ignore[attr-defined, unused-ignore]
        if message.is_user
        else []
    )
    return {
        "message": message,
        "role": role,
        "speaker_name": speaker_name(message, role),
        "initials": person_initials(message.author) if message.is_user else "",
        "person_hue": person_hue(message.author) if message.is_user else 0,
        "whisper": whisper_label(message),
        "is_notice": message.kind == MessageKind.NOTICE,
        "streaming": streaming,
        "text": text,
        # Markdown is rendered once a reply settles; while it streams the raw text grows.
        "body_html": None
        if streaming
        else render_markdown(_with_citations(message, text), breaks=message.is_user),
        "tools": activity,
        "suggestions": suggestions,
        "can_rerun": message.kind == MessageKind.CHAT and not message.is_user and not streaming,
        "earlier_versions": [] if streaming else earlier_versions(message),
        "figures": reply_figures(message, prices),
        "details": None if streaming else reply_details(message),
        "attachments": attachments,
        "describing": _describing(message, attachments),
    }


def _with_citations(message: Message, text: str) -> str:
    """A reply's library marks as links to their passages, its quotations checked."""
    if message.is_user or "[L" not in text:
        return text
    return cited_markdown(text, session_id=message.thread.session_id)[0]


def _describing(message: Message, attachments: list) -> list[str]:
    """The roles that read a description of this message's images (their models cannot
    see), worked out once per session object."""
    if not any(attachment.is_image for attachment in attachments):
        return []
    session = message.thread.session
    handles = session.__dict__.get("_describing")
    if handles is None:
        links = session_links(session=session)
        handles = session.__dict__["_describing"] = roles_reading_descriptions(
            session=session, links=links
        )
    if message.private:  # a whisper reaches only its audience
        return [handle for handle in handles if handle in message.audience_roles]
    return handles


def whisper_label(message: Message) -> str:
    """Who a whisper is for, as its bubble names them ("" for a message the room sees)."""
    if not message.private:
        return ""
    roles = session_roles_by_handle(message.thread.session, set(message.audience_roles))
    names = [roles[h].display_name if h in roles else h for h in message.audience_roles]
    people = message.audience.order_by("pk")
    return ", ".join(names + [person_name(person) for person in people])


def earlier_versions(message: Message) -> list[dict]:
    """Texts a reply had before it was regenerated or retried, newest first, rendered."""
    versions = []
    for number, alternative in enumerate(message.alternatives, start=1):
        text = "".join(
            part.get("text", "")
            for part in alternative.get("content", [])
            if part.get("type") == "text"
        )
        versions.append(
            {"number": number, "model": alternative.get("model", ""), "html": render_markdown(text)}
        )
    return versions[::-1]


def render_thread_label(thread: Thread, variant: str) -> SafeString:
    """An out-of-band fragment with a thread's name: `label` in the sidebar, `title` in the
    header."""
    context = {"thread": thread, "oob": True, "variant": variant}
    return mark_safe(render_to_string("chat/_thread_label.html", context))  # noqa: S308


def _bubble_html(
    message: Message,
    *,
    role: Role | None,
    live_text: str | None,
    oob: bool,
    inherited: bool = False,
    prices: PriceTable | None = None,
) -> str:
    # A new bubble is rendered for the composer's answer and again for the other tabs: the
    # second time, the same message in the same state reuses the first rendering.
    key = (oob, inherited, live_text, message.status, message.updated_at, message.seq,
           message.speaker, role.pk if role else None)  # fmt: skip
    cached = message.__dict__.get("_rendered_bubble")
    if cached is not None and cached[0] == key:
        return cached[1]
    context = {
        **bubble_context(message, role=role, live_text=live_text, prices=prices),
        "oob": oob,
        "inherited": inherited,
    }
    html = render_to_string("chat/_message.html", context)
    message.__dict__["_rendered_bubble"] = (key, html)
    return html


def _speaking_roles(messages: list[Message], known: dict[str, Role] | None) -> dict[str, Role]:
    speakers = {message.speaker for message in messages} - {USER_SPEAKER, NOTICE_SPEAKER}
    missing = speakers - set(known or ())
    if not missing:
        return known or {}
    return {**(known or {}), **session_roles_by_handle(messages[0].thread.session, missing)}


def render_bubbles(
    messages: Iterable[Message],
    *,
    live_texts: dict[str, str] | None = None,
    oob: bool = False,
    inherited: bool = False,
    roles: dict[str, Role] | None = None,
) -> SafeString:
    """Render bubbles in order; `oob` marks each for an out-of-band replace by id. `roles`:
    the session's roles by handle, when the caller has read them (others are looked up)."""
    messages = list(messages)
    roles = _speaking_roles(messages, roles)
    # The people's messages' attachments in one query, not one per bubble.
    prefetch_related_objects([m for m in messages if m.is_user], "attachments")
    live_texts = live_texts or {}
    prices = PriceTable() if any(message.finished_at for message in messages) else None
    html = "".join(
        _bubble_html(
            message,
            role=roles.get(message.speaker),
            live_text=live_texts.get(str(message.public_id)),
            oob=oob,
            inherited=inherited,
            prices=prices,
        )
        for message in messages
    )
    return mark_safe(html)  # noqa: S308  (concatenated template output, escaped by the engine)


def bubble_fragments(
    messages: Iterable[Message],
    *,
    live_texts: dict[str, str] | None = None,
    oob: bool = False,
    roles: dict[str, Role] | None = None,
) -> list[str]:
    """Bubbles for a websocket push, one fragment each, every one small enough for a frame.

    A streaming bubble too large goes as its start plus appended pieces of its text; a settled
    one as a stub that the tab replaces with the bubble fetched over HTTP. `roles`: as for
    `render_bubbles`.
    """
    messages = list(messages)
    roles = _speaking_roles(messages, roles)
    # The people's messages' attachments in one query, not one per bubble.
    prefetch_related_objects([m for m in messages if m.is_user], "attachments")
    live_texts = live_texts or {}
    prices = PriceTable() if any(message.finished_at for message in messages) else None
    fragments: list[str] = []
    for message in messages:
        role = roles.get(message.speaker)
        live_text = live_texts.get(str(message.public_id))
        html = _bubble_html(message, role=role, live_text=live_text, oob=oob, prices=prices)
        if frames.size(html) <= frames.MAX_FRAME_BYTES:
            fragments.append(html)
        elif message.in_flight:
            text = message.text if live_text is None else live_text
            first, *rest = frames.text_pieces(text) or [""]
            fragments.append(_bubble_html(message, role=role, live_text=first, oob=oob))
            fragments += frames.appended_text(str(message.public_id), "".join(rest))
        else:
            fragments.append(_fetched_bubble(message, oob=oob))
    return fragments


def _fetched_bubble(message: Message, *, oob: bool) -> str:
    """A placeholder that loads the whole bubble over HTTP, where no frame limit applies."""
    return format_html(
        '<article id="msg-{}" class="msg msg--{}" data-seq="{}" data-status="{}"{} '
        'hx-get="{}" hx-trigger="load" hx-swap="outerHTML" aria-busy="true">'
        '<p class="msg-body muted">Loading a long message…</p></article>',
        message.public_id,
        message.status,
        message.seq,
        message.status,
        mark_safe(' hx-swap-oob="true"') if oob else "",
        reverse("chat:message_bubble", kwargs={"message": message.public_id}),
    )


def session_controls_context(session, usage=None) -> dict:
    """What the summary strip, the role picker and the addressing line show (`usage`: the
    session's totals, when the caller has read them)."""
    usage = session_usage(session=session) if usage is None else usage
    links = session_links(session=session)
    return {
        **_strip_context(session, usage),
        "links": links,
        "describing": roles_reading_descriptions(session=session, links=links),
    }


def _strip_context(session, usage: UsageSummary, prices: PriceTable | None = None) -> dict:
    """What the session's strip of figures shows: its totals, its last turn, the averages of
    its most recent replies."""
    label = session.credential.get_provider_display() if session.credential else "Demo"
    last_turn, recent = session_figures(session=session, prices=prices)
    return {
        "session": session,
        "usage": usage,
        "provider_label": label,
        "last_turn": last_turn,
        "recent": recent,
        "recent_count": RECENT_REPLIES,
    }


def render_unread_badge(
    thread_id: int, *, user, item: Thread | None = None, anywhere: bool = False
) -> SafeString:
    """One thread's count of what `user` has not read, for their sidebars, as an out-of-band
    fragment (cheaper than the whole tree when many replies settle at once); `item`: the
    thread with `unread`, when the caller has read it. `anywhere`: for every page of theirs,
    applied by the page's script only where it shows the thread (pages of other sessions
    have no such badge)."""
    item = thread_unread(thread_id=thread_id, user=user) if item is None else item
    html = render_to_string("chat/_unread_badge.html", {"item": item, "oob": not anywhere})
    return mark_safe(badge_updates([html]) if anywhere else html)  # noqa: S308


def badge_updates(badges: list[str]) -> str:
    """Badges for every page of a person, each replacing its twin where a page has one."""
    return format_html_join(
        "",
        '<div id="turn-notices" hx-swap-oob="beforeend"><div class="badge-update">{}</div></div>',
        ((mark_safe(badge),) for badge in badges),  # noqa: S308  (rendered templates)
    )


def render_turn_finished(thread: Thread, *, user) -> SafeString:
    """For every tab of one person in the room, whatever it shows: the session's badge on the
    sessions list and, when the turn left replies they have not read, a notice the page may
    raise as a browser notification (hidden tabs, tabs on another session)."""
    session = session_unread(session_id=thread.session_id, user=user)
    context: dict = {"item": session, "notice": None}
    replies = turn_outcome(thread=thread)
    unread = thread_unread(thread_id=thread.pk, user=user).unread
    if replies and unread:
        roles = session_roles_by_handle(session, {reply.speaker for reply in replies})
        names = list(dict.fromkeys(speaker_name(r, roles.get(r.speaker)) for r in replies))
        said = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        endings = [
            "timed out" if r.timed_out else {"error": "failed", "interrupted": "stopped"}[r.status]
            for r in replies
            if r.status in (MessageStatus.ERROR, MessageStatus.INTERRUPTED)
        ]
        unfinished = [
            f"{count} {label}"
            for label in ("failed", "timed out", "stopped")
            if (count := endings.count(label))
        ]
        context["notice"] = {
            "session": session,
            "thread": thread,
            "seq": replies[-1].seq,
            "title": f"{said} replied" + (f" — {', '.join(unfinished)}" if unfinished else ""),
            "body": f"{thread.label or 'Untitled chat'} · {session.name}",
            "url": reverse("chat:thread_detail", kwargs={"thread": thread.public_id}),
        }
    return mark_safe(render_to_string("chat/_owner_update.html", context))  # noqa: S308


def render_session_unread_badge(session_id: int, *, user) -> SafeString:
    """A session's count of what `user` has not read, for the sessions list of their pages."""
    context = {"item": session_unread(session_id=session_id, user=user), "notice": None}
    return mark_safe(render_to_string("chat/_owner_update.html", context))  # noqa: S308


def render_thread_usage(usage: UsageSummary, figures: ThreadFigures) -> SafeString:
    """A thread's own line of figures, as an out-of-band fragment for the tabs on it."""
    context = {**thread_usage_context(usage, figures), "oob": True}
    return mark_safe(render_to_string("chat/_thread_usage.html", context))  # noqa: S308


def render_summary_strip(
    session, usage: UsageSummary, prices: PriceTable | None = None
) -> SafeString:
    """Only the session's strip of figures, out of band: what settled replies change (the
    role picker and the addressing line stay as they are)."""
    context = {**_strip_context(session, usage, prices), "oob": True}
    return mark_safe(render_to_string("chat/_summary_strip.html", context))  # noqa: S308


def render_session_controls(session) -> SafeString:
    """The session's strip, role picker and addressing line as out-of-band fragments."""
    context = {**session_controls_context(session), "oob": True}
    return mark_safe(render_to_string("chat/_session_controls.html", context))  # noqa: S308


def render_thread_tree(session) -> SafeString:
    """The sidebar's thread tree as an out-of-band fragment for every tab on the session;
    each page marks its own thread as current."""
    context = {"tree": thread_tree(session=session), "oob": True}
    return mark_safe(render_to_string("chat/_thread_tree.html", context))  # noqa: S308


def removed_fragment(message_id) -> str:
    """Takes a bubble out of the page (htmx's out-of-band delete)."""
    return format_html('<article id="msg-{}" hx-swap-oob="delete"></article>', message_id)


def thread_status_context(thread: Thread, *, empty: bool = False) -> dict:
    """What the composer shows about the thread: queued messages, auto-rounds, sticky role.
    `empty`: the caller has just read the thread without a message (a fresh branch), so it has
    no turn and no queue to read."""
    return {
        "thread": thread,
        "session": thread.session,
        "queue": [] if empty else thread_queue(thread=thread),
        "rounds": None if empty else round_state(thread=thread),
    }


def render_thread_status(thread: Thread) -> SafeString:
    context = {**thread_status_context(thread), "oob": True}
    return mark_safe(render_to_string("chat/_thread_status.html", context))  # noqa: S308


def render_someone_posted(message: Message, *, user, mentioned: bool) -> SafeString:
    """For every tab of one person when someone else in the room posts: their badges for the
    thread and the session and a notice (which says so when it mentions them)."""
    thread = message.thread
    session = session_unread(session_id=thread.session_id, user=user)
    who = person_name(message.author)
    text = " ".join(message.text.split())
    context = {
        "item": session,
        "notice": {
            "session": session,
            "thread": thread,
            "seq": message.seq,
            "title": f"{who} mentioned you" if mentioned else f"{who} wrote",
            "body": (text[:140] + "…") if len(text) > 140 else text,
            "url": reverse("chat:thread_detail", kwargs={"thread": thread.public_id}),
            "always": mentioned,
        },
    }
    badge = render_unread_badge(thread.pk, user=user, anywhere=True)
    return mark_safe(badge + render_to_string("chat/_owner_update.html", context))  # noqa: S308


def thread_usage_context(usage: UsageSummary, figures: ThreadFigures) -> dict:
    """A thread's own line: its totals, its last turn, its recent replies and its models."""
    return {
        "thread_usage": usage,
        "thread_figures": figures,
        "recent_count": RECENT_REPLIES,
    }
