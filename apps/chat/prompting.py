"""Builds the provider request for one role's reply from the shared transcript.

Pure functions over plain data: the transcript is rendered role-neutrally (every block is
labelled with its speaker and is the same for every role), and the part that differs per role
comes last, so that different roles' requests share the longest possible prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.providers.types import ChatMessage, ChatRequest, SystemBlock

GROUP_RULES = (
    "You take part in a group chat between one person and a council of AI roles. Every "
    "message in the transcript is labelled with its speaker as [Name]. Speak only for "
    "yourself: never write another participant's turn and do not prefix your reply with your "
    "own label. Use Markdown when it helps."
)


@dataclass(frozen=True)
class RosterEntry:
    handle: str
    display_name: str
    description: str
    persona: str


@dataclass(frozen=True)
class TranscriptEntry:
    speaker_name: str
    text: str
    is_user: bool = False


def build_role_request(
    *,
    model: str,
    roster: list[RosterEntry],
    speaker: RosterEntry,
    transcript: list[TranscriptEntry],
    session_persona: str = "",
    memory: str = "",
    max_tokens: int = 4096,
) -> ChatRequest:
    roster_text = "\n".join(
        f"- @{entry.handle} — {entry.display_name}: {entry.description}\n  {entry.persona}".rstrip()
        for entry in roster
    )
    shared = [GROUP_RULES, f"The roles in this chat:\n{roster_text}"]
    if session_persona:
        shared.append(f"About the person you are talking with:\n{session_persona}")
    if memory:
        shared.append(f"Session memory:\n{memory}")
    history = [
        ChatMessage(
            role="user",
            parts=({"type": "text", "text": f"[{entry.speaker_name}]: {entry.text}"},),
            cache=index == len(transcript) - 1,
        )
        for index, entry in enumerate(transcript)
    ]
    instruction = ChatMessage(
        role="user",
        parts=(
            {
                "type": "text",
                "text": (
                    f"You are @{speaker.handle} ({speaker.display_name}). "
                    "Reply now in your own voice."
                ),
            },
        ),
    )
    return ChatRequest(
        model=model,
        system=(SystemBlock("\n\n".join(shared), cache=True),),
        messages=(*history, instruction),
        max_tokens=max_tokens,
        metadata={
            "speaker_handle": speaker.handle,
            "speaker_name": speaker.display_name,
            "last_user_text": next(
                (entry.text for entry in reversed(transcript) if entry.is_user), ""
            ),
        },
    )
