"""The routing table: who answers which message."""

import pytest

from apps.roles.routing import RosterRole, Route, leading_mentions, mentions, route_message

ROLES = [
    RosterRole("assistant", is_default=True),
    RosterRole("director", answers_last=True),
    RosterRole("editorial_architect"),
    RosterRole("visual_architect"),
    RosterRole("sound_designer"),
    RosterRole("actor_agent", muted=True),
]
GROUPS = {
    "all-creatives": [
        "director",
        "editorial_architect",
        "visual_architect",
        "sound_designer",
        "actor_agent",
    ]
}
CREATIVE_PARALLEL = ("editorial_architect", "visual_architect", "sound_designer")

ALL_PARALLEL = ("assistant", *CREATIVE_PARALLEL)
A, D, E, V, S, ACT = (
    "assistant", "director", "editorial_architect", "visual_architect", "sound_designer",
    "actor_agent",
)  # fmt: skip

# text, mode, sticky → parallel, last, unknown, muted, new sticky, fan-out (auto-rounds follow)
TABLE = [
    # No mention: the sticky role, else the default role; broadcast mode: everyone.
    ("hello", "sticky", "", ((A,), (), (), (), "", False)),
    ("hello", "sticky", V, ((V,), (), (), (), V, False)),
    ("hello", "broadcast", "", (ALL_PARALLEL, (D,), (), (), "", True)),
    # A message that starts with mentions addresses just those, whoever is sticky (000).
    ("@director darker?", "sticky", V, ((), (D,), (), (), D, False)),
    ("@Director @VISUAL_architect redo", "sticky", "", ((V,), (D,), (), (), V, False)),
    ("@director, @sound_designer: redo", "sticky", A, ((S,), (D,), (), (), S, False)),
    ("@director first, then @sound_designer", "sticky", "", ((S,), (D,), (), (), S, False)),
    ("@director @visual_architect", "broadcast", "", ((V,), (D,), (), (), V, False)),
    # Scattered mentions: the sticky role plus every mentioned role; the sticky role stays (000).
    ("How? @visual_architect light it. @editorial_architect tone?", "sticky", D,
     ((V, E), (D,), (), (), D, False)),
    ("How? @visual_architect light it. @editorial_architect tone?", "sticky", "",
     ((A, V, E), (), (), (), "", False)),
    ("Thoughts, @sound_designer?", "sticky", S, ((S,), (), (), (), S, False)),
    ("Thoughts, @sound_designer?", "broadcast", "", (ALL_PARALLEL, (D,), (), (), "", True)),
    ("and @typo here", "sticky", D, ((), (D,), ("typo",), (), D, False)),
    # Groups and @all fan out: auto-rounds may follow (001).
    ("@all-creatives full redo", "sticky", A, (CREATIVE_PARALLEL, (D,), (), (), A, True)),
    ("@all thoughts?", "sticky", "", (ALL_PARALLEL, (D,), (), (), "", True)),
    ("what now? @all", "sticky", D, (ALL_PARALLEL, (D,), (), (), D, True)),
    # Muted roles are skipped; the person is told when they named one.
    ("@actor_agent your line?", "sticky", "", ((), (), (), (ACT,), ACT, False)),
    ("@actor_agent @director scene 2", "sticky", "", ((), (D,), (), (ACT,), D, False)),
    # Not mentions: e-mail addresses and code.
    ("mail me at bob@director.com", "sticky", "", ((A,), (), (), (), "", False)),
    ("use `@director` or ```\n@visual_architect\n``` in code", "sticky", "",
     ((A,), (), (), (), "", False)),
    # Only typos: nobody is called, the person is told.
    ("@directr typo", "sticky", "", ((), (), ("directr",), (), "", False)),
    ("@directr and @visual_architect", "sticky", "", ((V,), (), ("directr",), (), V, False)),
    ("@director, @director again.", "sticky", "", ((), (D,), (), (), D, False)),
]  # fmt: skip


@pytest.mark.parametrize(("text", "mode", "sticky", "expected"), TABLE)
def test_routing_table(text, mode, sticky, expected):
    parallel, last, unknown, muted, new_sticky, fan_out = expected
    assert route_message(text, roles=ROLES, groups=GROUPS, mode=mode, sticky=sticky) == Route(
        parallel=parallel,
        last=last,
        unknown=unknown,
        muted=muted,
        sticky=new_sticky,
        fan_out=fan_out,
    )


def test_leading_mentions_are_only_those_before_the_text():
    assert leading_mentions("@a, @b: then @c") == ["a", "b"]
    assert leading_mentions("  @a hi") == ["a"]
    assert leading_mentions("hi @a") == []
    assert leading_mentions("@a") == ["a"]


def test_mentions_are_case_insensitive_ordered_and_unique():
    assert mentions("@B hi @a and @b again, @c.") == ["b", "a", "c"]
