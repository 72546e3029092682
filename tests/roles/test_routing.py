"""The routing table: who answers which message."""

import pytest

from apps.roles.routing import RosterRole, Route, mentions, route_message

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

TABLE = [
    # text, mode, sticky → parallel, last, unknown, muted, new sticky
    ("hello", "sticky", "", (("assistant",), (), (), (), "")),
    (
        "hello",
        "sticky",
        "visual_architect",
        (("visual_architect",), (), (), (), "visual_architect"),
    ),
    (
        "hello",
        "broadcast",
        "",
        (
            ("assistant", "editorial_architect", "visual_architect", "sound_designer"),
            ("director",),
            (),
            (),
            "",
        ),
    ),
    ("@director darker?", "sticky", "", ((), ("director",), (), (), "director")),
    (
        "@Director @VISUAL_architect redo",
        "sticky",
        "",
        (("visual_architect",), ("director",), (), (), "visual_architect"),
    ),
    (
        "How? @visual_architect light it. @editorial_architect tone?",
        "sticky",
        "",
        (("visual_architect", "editorial_architect"), (), (), (), "editorial_architect"),
    ),
    (
        "@director first, then @sound_designer",
        "sticky",
        "",
        (("sound_designer",), ("director",), (), (), "sound_designer"),
    ),
    (
        "@all-creatives full redo",
        "sticky",
        "assistant",
        (CREATIVE_PARALLEL, ("director",), (), (), "assistant"),
    ),
    (
        "@all thoughts?",
        "sticky",
        "",
        (("assistant", *CREATIVE_PARALLEL), ("director",), (), (), ""),
    ),
    ("@actor_agent your line?", "sticky", "", ((), (), (), ("actor_agent",), "actor_agent")),
    (
        "@actor_agent @director scene 2",
        "sticky",
        "",
        ((), ("director",), (), ("actor_agent",), "director"),
    ),
    ("mail me at bob@director.com", "sticky", "", (("assistant",), (), (), (), "")),
    (
        "use `@director` or ```\n@visual_architect\n``` in code",
        "sticky",
        "",
        (("assistant",), (), (), (), ""),
    ),
    ("@directr typo", "sticky", "", ((), (), ("directr",), (), "")),
    (
        "@directr and @visual_architect",
        "sticky",
        "",
        (("visual_architect",), (), ("directr",), (), "visual_architect"),
    ),
    ("@director, @director again.", "sticky", "", ((), ("director",), (), (), "director")),
]


@pytest.mark.parametrize(("text", "mode", "sticky", "expected"), TABLE)
def test_routing_table(text, mode, sticky, expected):
    parallel, last, unknown, muted, new_sticky = expected
    assert route_message(text, roles=ROLES, groups=GROUPS, mode=mode, sticky=sticky) == Route(
        parallel=parallel, last=last, unknown=unknown, muted=muted, sticky=new_sticky
    )


def test_mentions_are_case_insensitive_ordered_and_unique():
    assert mentions("@B hi @a and @b again, @c.") == ["b", "a", "c"]
