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

# text, mode, sticky → parallel, last, unknown, muted, new sticky, fan-out (auto-rounds follow)
TABLE = [
    # No mention: the sticky role, else the default role; broadcast mode: everyone.
    ("hello", "sticky", "", (("assistant",), (), (), (), "", False)),
    ("hello", "sticky", "visual_architect", (("visual_architect",), (), (), (), "visual_architect", False)),
    ("hello", "broadcast", "", (ALL_PARALLEL, ("director",), (), (), "", True)),
    # A message that starts with mentions addresses just those, whoever is sticky (000).
    ("@director darker?", "sticky", "visual_architect", ((), ("director",), (), (), "director", False)),
    ("@Director @VISUAL_architect redo", "sticky", "", (("visual_architect",), ("director",), (), (), "visual_architect", False)),
    ("@director, @sound_designer: redo", "sticky", "assistant", (("sound_designer",), ("director",), (), (), "sound_designer", False)),
    ("@director first, then @sound_designer", "sticky", "", (("sound_designer",), ("director",), (), (), "sound_designer", False)),
    ("@director @visual_architect", "broadcast", "", (("visual_architect",), ("director",), (), (), "visual_architect", False)),
    # Scattered mentions: the sticky role plus every mentioned role; the sticky role stays (000).
    ("How? @visual_architect light it. @editorial_architect tone?", "sticky", "director",
     (("visual_architect", "editorial_architect"), ("director",), (), (), "director", False)),
    ("How? @visual_architect light it. @editorial_architect tone?", "sticky", "",
     (("assistant", "visual_architect", "editorial_architect"), (), (), (), "", False)),
    ("Thoughts, @sound_designer?", "sticky", "sound_designer", (("sound_designer",), (), (), (), "sound_designer", False)),
    ("Thoughts, @sound_designer?", "broadcast", "", (ALL_PARALLEL, ("director",), (), (), "", True)),
    ("and @typo here", "sticky", "director", ((), ("director",), ("typo",), (), "director", False)),
    # Groups and @all fan out: auto-rounds may follow (001).
    ("@all-creatives full redo", "sticky", "assistant", (CREATIVE_PARALLEL, ("director",), (), (), "assistant", True)),
    ("@all thoughts?", "sticky", "", (ALL_PARALLEL, ("director",), (), (), "", True)),
    ("what now? @all", "sticky", "director", (ALL_PARALLEL, ("director",), (), (), "director", True)),
    # Muted roles are skipped; the person is told when they named one.
    ("@actor_agent your line?", "sticky", "", ((), (), (), ("actor_agent",), "actor_agent", False)),
    ("@actor_agent @director scene 2", "sticky", "", ((), ("director",), (), ("actor_agent",), "director", False)),
    # Not mentions: e-mail addresses and code.
    ("mail me at bob@director.com", "sticky", "", (("assistant",), (), (), (), "", False)),
    ("use `@director` or ```\n@visual_architect\n``` in code", "sticky", "", (("assistant",), (), (), (), "", False)),
    # Only typos: nobody is called, the person is told.
    ("@directr typo", "sticky", "", ((), (), ("directr",), (), "", False)),
    ("@directr and @visual_architect", "sticky", "", (("visual_architect",), (), ("directr",), (), "visual_architect", False)),
    ("@director, @director again.", "sticky", "", ((), ("director",), (), (), "director", False)),
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
