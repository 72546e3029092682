"""Builds the provider request for one role's reply from the shared transcript.

Pure functions over plain data: the transcript is rendered role-neutrally (every block is
labelled with its speaker and is the same for every role), and the part that differs per role
comes last, so that different roles' requests share the longest possible prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.providers.types import ChatMessage, ChatRequest, Part, SystemBlock, ToolDefinition

GROUP_RULES = (
    "You take part in a group chat between one person and a council of AI roles. Every "
    "message in the transcript is labelled with its speaker as [Name]. Speak only for "
    "yourself: never write another participant's turn and do not prefix your reply with your "
    "own label. Use Markdown when it helps. When a question belongs to another role, call "
    "suggest_route rather than answering for them."
)
SEQUENTIAL_CUE = (
    "The roles of this turn answer one at a time; the ones before you are above. Build on "
    "them — add what they missed or disagree where you do — rather than repeating them."
)
LAST_CUE = (
    "You answer after the other roles of this turn; their answers are above. Converge them: "
    "say where they agree, settle where they differ, and give a clear way forward."
)
AUTO_ROUND_CUE = (
    "This is an auto-round: the roles continue the discussion among themselves. Respond to "
    "what the others said — build on it or challenge it — in a few sentences. If you have "
    "nothing to add, say so in one line."
)
SUMMARY_SPEAKER = "Summary of the earlier conversation"


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
    message_id: int = 0  # which stored message it renders (for summaries)
    private: bool = False  # a whisper: never folded into a summary other roles share
    # The message's attachments as this model takes them: image and document parts (their
    # bytes in the request's blobs), or text that stands in for what it cannot read.
    media: tuple[Part, ...] = field(default=())


def estimate_tokens(text: str) -> int:
    """A provider-neutral estimate: about four characters per token."""
    return len(text) // 4 + 1


def length_rule(words: int) -> str:
    """The reply-length setting as an instruction (0: the role's own rules decide)."""
    if not words:
        return ""
    return f"Keep this reply under {words} words; put the most important point first."


def entry_block(entry: TranscriptEntry) -> str:
    return f"[{entry.speaker_name}]: {entry.text}"


def build_role_request(
    *,
    model: str,
    roster: list[RosterEntry],
    speaker: RosterEntry,
    transcript: list[TranscriptEntry],
    session_persona: str = "",
    memory: str = "",
    tools: tuple[ToolDefinition, ...] = (),
    summary: str = "",
    cue: str = "",
    group_rules: str = "",
    output_rules: str = "",
    max_tokens: int = 4096,
    blobs: dict[str, bytes] | None = None,
) -> ChatRequest:
    """Tools, system block and history are the same for every role of a turn; only the final
    instruction differs, so their requests share everything up to the history breakpoint.

    `group_rules` (the session's, else Parley's) and every role's persona are in the cached
    system block; the speaker's `output_rules` and the turn's `cue` (answers-last, auto-round,
    reply length) in the final instruction, after the breakpoints.
    """
    roster_text = "\n".join(
        f"- @{entry.handle} — {entry.display_name}: {entry.description}\n  {entry.persona}".rstrip()
        for entry in roster
    )
    shared = [group_rules.strip() or GROUP_RULES, f"The roles in this chat:\n{roster_text}"]
    if session_persona:
        shared.append(f"About the person you are talking with:\n{session_persona}")
    if memory:
        shared.append(f"Session memory:\n{memory}")
    blocks: list[tuple[Part, ...]] = [
        ({"type": "text", "text": entry_block(entry)}, *entry.media) for entry in transcript
    ]
    if summary:
        blocks.insert(0, ({"type": "text", "text": f"[{SUMMARY_SPEAKER}]: {summary}"},))
    history = [
        ChatMessage(role="user", parts=parts, cache=index == len(blocks) - 1)
        for index, parts in enumerate(blocks)
    ]
    instruction_text = (
        f"You are @{speaker.handle} ({speaker.display_name}). Reply now in your own voice."
    )
    for addition in (output_rules.strip(), cue.strip()):
        if addition:
            instruction_text += f"\n\n{addition}"
    instruction = ChatMessage(role="user", parts=({"type": "text", "text": instruction_text},))
    return ChatRequest(
        model=model,
        system=(SystemBlock("\n\n".join(shared), cache=True),),
        messages=(*history, instruction),
        tools=tools,
        max_tokens=max_tokens,
        blobs=blobs or {},
        metadata={
            "speaker_handle": speaker.handle,
            "speaker_name": speaker.display_name,
            "last_user_text": next(
                (entry.text for entry in reversed(transcript) if entry.is_user), ""
            ),
        },
    )
