"""Keeps a streamed reply to its own speaker.

Models that read a speaker-labelled transcript sometimes open with their own label
("[Director]: …") or run on into another participant's turn ("\n[Sound Designer]: …"). The
guard strips the first and ends the reply at the second. It holds back only the start of a
line that could still become a label, so text streams on without a visible delay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "[Name]:", "**Name:**", "**Name**:", "@handle:" at the start of a line.
LABEL = re.compile(
    r"[ \t]*(?:\[@?(?P<bracket>[^\]\n]{1,60})\]|\*\*@?(?P<bold>[^*\n]{1,60}?)(?::\*\*|\*\*:)"
    r"|@(?P<handle>[A-Za-z][\w-]{0,39}))[ \t]*:?[ \t]*"
)
LABEL_START = re.compile(r"[ \t]*(?:\[|\*|@)")
MAX_LABEL_CHARS = 70


def _normal(name: str) -> str:
    return " ".join(name.replace("_", " ").replace("-", " ").lower().split())


@dataclass
class GuardResult:
    text: str  # what may be shown now
    ended: bool  # the reply started someone else's turn: stop the stream


class TurnGuard:
    def __init__(self, *, own: list[str], others: list[str]):
        self.own = {_normal(name) for name in own if name}
        self.others = {_normal(name) for name in others if name} - self.own
        self.pending = ""  # held back: the start of a line that may be a label
        self.at_line_start = True
        self.after_own_label = False  # drop the spaces that follow a stripped label
        self.ended = False

    def feed(self, chunk: str) -> GuardResult:
        if self.ended:
            return GuardResult("", True)
        self.pending += chunk
        return self._drain(final=False)

    def finish(self) -> GuardResult:
        if self.ended:
            return GuardResult("", True)
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> GuardResult:
        out: list[str] = []
        while self.pending:
            if self.after_own_label:
                self.pending = self.pending.lstrip(" \t")
                if not self.pending:
                    break
                self.after_own_label = False
            if not self.at_line_start:
                newline = self.pending.find("\n")
                if newline < 0:
                    out.append(self.pending)
                    self.pending = ""
                    break
                out.append(self.pending[: newline + 1])
                self.pending = self.pending[newline + 1 :]
                self.at_line_start = True
                continue
            if not LABEL_START.match(self.pending):
                if self.pending.strip(" \t") == "" and not final:
                    break  # only indentation so far: wait for the next character
                self.at_line_start = False
                continue
            match = LABEL.match(self.pending)
            line_done = "\n" in self.pending or len(self.pending) >= MAX_LABEL_CHARS
            if match is None or not match.group(0).rstrip().endswith((":", ":**")):
                if line_done or final:
                    self.at_line_start = False
                    continue
                break  # could still become a label
            name = _normal(match.group("bracket") or match.group("bold") or match.group("handle"))
            if name in self.others:
                self.ended = True
                self.pending = ""
                text = "".join(out).rstrip()
                return GuardResult(text, True)
            if name in self.own:
                self.pending = self.pending[match.end() :]
                self.at_line_start = False
                self.after_own_label = True
                continue
            self.at_line_start = False
        return GuardResult("".join(out), False)
