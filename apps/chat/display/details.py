"""A settled reply's Details: its life from queued to settled, with times, from its stored
timestamps and event log, and what its request used."""

from __future__ import annotations

from apps.chat.models import Message, MessageKind

LOG_WORDS = {
    "started": "started",
    "first_token": "first text",
    "takeover": "taken over",
    "handed_over": "handed over",
    "retry": "retried",
    "continuation": "continued",
    "tool_limit": "tool rounds used up",
    "format": "answer shaped by intent",
    "cache_ttl": "prompt cache",
    "lore": "lorebook entries brought in",
    "library": "library passages put in the request",
    "described": "images put in words for a model that cannot see",
    "attachments": "attachments sent",
    "tool_prose": "prose held back",
    "synthesis": "answered from the evidence",
    "tools_first": "tools first given up",
    "guard": "stopped early",
    "trimmed": "repeat trimmed",
    "done": "done",
    "error": "failed",
    "interrupted": "stopped",
}


def _log_line(entry: dict) -> str:
    event, detail = entry.get("event", ""), entry.get("detail", "")
    if event == "tool_call":
        return f"called {detail} ({entry.get('size', 0):,} characters of arguments)"
    if event == "tool_result":
        line = f"{detail} returned {entry.get('size', 0):,} characters"
        if "trimmed_to" in entry:
            line += f", {entry['trimmed_to']:,} sent to the model"
        return line + (" — an error" if entry.get("error") else "")
    words = LOG_WORDS.get(event, event.replace("_", " "))
    return f"{words}: {detail}" if detail else words


def reply_details(message: Message) -> dict | None:
    """A settled reply's Details: its life from queued to settled, with times, and what its
    request used (tokens, the cache)."""
    if message.is_user or message.kind != MessageKind.CHAT or not message.finished_at:
        return None
    born = message.created_at

    def since(moment) -> str:
        return f"+{(moment - born).total_seconds():.2f} s"

    timeline = [("+0.00 s", "queued")]
    if message.dispatched_at:
        timeline.append((since(message.dispatched_at), "sent to a worker"))
    started = message.started_at
    run_start = (started - born).total_seconds() if started else 0.0
    for entry in message.log or []:
        timeline.append((f"+{run_start + entry.get('t', 0) / 1000:.2f} s", _log_line(entry)))
    if not message.log:
        timeline.append((since(message.finished_at), f"settled: {message.get_status_display()}"))
    usage = message.usage or {}
    sent = sum(usage.get(key, 0) for key in ("input", "cache_read", "cache_write"))
    return {
        "timeline": timeline,
        "sent": sent,
        "usage": usage,
        "cache_share": round(100 * usage.get("cache_read", 0) / sent) if sent else None,
    }
