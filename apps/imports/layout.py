"""A conversation's tree as Parley's threads: the line to the leaf the person last looked at is
the main thread; every other leaf is a branch forked where its line leaves the ones already
laid out (an edited question forks before the question, a regenerated answer before the
answer). Pure: plain data in, plain data out."""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.imports.sources.common import SourceConversation, SourceMessage

MAX_BRANCHES = 200  # per conversation; a tree with more keeps its newest lines


@dataclass
class ThreadPlan:
    messages: list[SourceMessage]
    parent: int | None = None  # the plan this one forks from
    fork_at: int | None = None  # index in the parent's own messages of the last shared one;
    # None with a parent: a branch that shares nothing (a different first message)
    branches_dropped: int = 0


@dataclass
class Layout:
    threads: list[ThreadPlan] = field(default_factory=list)
    branches_dropped: int = 0

    @property
    def branches(self) -> int:
        return len(self.threads) - 1


def layout(conversation: SourceConversation) -> Layout:
    messages = conversation.messages
    if not messages:
        return Layout([ThreadPlan([])])
    by_key = {m.key: m for m in messages}
    children: dict[str | None, list[SourceMessage]] = {}
    for message in messages:  # in tree order: siblings oldest first
        children.setdefault(message.parent, []).append(message)
    leaves = [m for m in messages if m.key not in children]

    main_leaf = _down_to_leaf(by_key.get(conversation.current or ""), children) or leaves[-1]
    others = [leaf for leaf in leaves if leaf is not main_leaf]
    dropped = max(0, len(others) - MAX_BRANCHES)
    others = others[dropped:]

    plans: list[ThreadPlan] = []
    placed: dict[str, tuple[int, int]] = {}  # message key -> (plan, index in its messages)
    for leaf in [main_leaf, *others]:
        line = _line_to(leaf, by_key)
        shared = 0
        while shared < len(line) and line[shared].key in placed:
            shared += 1
        if plans and shared == 0:
            plan = ThreadPlan(line, parent=0, fork_at=None)
        elif plans:
            parent, index = placed[line[shared - 1].key]
            plan = ThreadPlan(line[shared:], parent=parent, fork_at=index)
        else:
            plan = ThreadPlan(line)
        for index, message in enumerate(plan.messages):
            placed[message.key] = (len(plans), index)
        plans.append(plan)
    return Layout(plans, branches_dropped=dropped)


def _down_to_leaf(
    message: SourceMessage | None, children: dict[str | None, list[SourceMessage]]
) -> SourceMessage | None:
    """The leaf under `message`, following the newest child (a current node inside the tree)."""
    while message is not None and children.get(message.key):
        message = children[message.key][-1]
    return message


def _line_to(leaf: SourceMessage, by_key: dict[str, SourceMessage]) -> list[SourceMessage]:
    line = [leaf]
    while line[-1].parent is not None and line[-1].parent in by_key:
        line.append(by_key[line[-1].parent])
    return line[::-1]
