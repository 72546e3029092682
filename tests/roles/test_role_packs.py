"""Role packs: the shipped ones load idempotently; a bad pack is refused with its reasons."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from apps.roles.models import Role, RoleGroup
from apps.roles.role_packs import read_pack
from apps.roles.selectors import default_roles

pytestmark = pytest.mark.django_db


def load(name: str) -> str:
    out = StringIO()
    call_command("load_role_pack", name, stdout=out)
    return out.getvalue()


def test_the_film_crew_is_installed_on_first_run_and_is_the_default():
    # The data migration loaded it into the test database.
    crew = {"assistant", "director", "editorial_architect", "visual_architect",
            "sound_designer", "actor_agent"}  # fmt: skip
    assert {role.handle for role in default_roles()} == crew
    director = Role.objects.get(handle="director")
    assert director.answers_last and not director.is_default
    assert Role.objects.get(handle="assistant").is_default
    group = RoleGroup.objects.get(handle="all-creatives")
    assert {r.handle for r in group.members.all()} == crew - {"assistant"}


def test_loading_is_idempotent_and_reports_what_changed():
    first = load("engineering-council")
    assert "created: @lead_engineer, @architect" in first
    assert "unchanged" not in first
    again = load("engineering-council")
    assert "created" not in again and "unchanged: @lead_engineer" in again
    Role.objects.filter(handle="architect").update(display_name="Renamed")
    assert "updated: @architect" in load("engineering-council")
    assert Role.objects.get(handle="architect").display_name == "Architect"
    assert Role.objects.get(handle="lead_engineer").answers_last


def test_a_pack_from_a_file(tmp_path):
    path = tmp_path / "writers.yaml"
    path.write_text(
        "pack: writers\nroles:\n  - handle: poet\n    display_name: Poet\n    colour: '#112233'\n"
        "groups:\n  - handle: verse\n    members: [poet]\n"
    )
    assert "created: @poet, @verse" in load(str(path))
    assert Role.objects.get(handle="poet").pack == "writers"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("roles: [", "not valid YAML"),
        ("- just a list", "must be a mapping"),
        ("pack: x\nroles: []", "'roles' must be a non-empty list"),
        ("pack: x\nroles:\n  - display_name: No handle", "roles[1] needs 'handle'"),
        (
            "pack: x\nroles:\n  - handle: a\n    display_name: A\n    mood: grumpy",
            "unknown field 'mood'",
        ),
        (
            "pack: x\nroles:\n  - handle: a\n    display_name: A\n    sort_order: high",
            "sort_order must be int",
        ),
        ("pack: x\nroles:\n  - handle: all\n    display_name: All", "@all is reserved"),
        (
            "pack: x\nroles:\n  - {handle: a, display_name: A}\n  - {handle: a, display_name: B}",
            "appears twice",
        ),
        (
            "pack: x\nroles:\n  - {handle: a, display_name: A}\ngroups:\n  - {handle: g}",
            "members must be",
        ),
    ],
)
def test_malformed_packs_are_refused_with_a_reason(text, reason):
    with pytest.raises(ValidationError) as error:
        read_pack(text, source="bad.yaml")
    assert reason in " ".join(error.value.messages)


def test_invalid_values_and_unknown_members_change_nothing(tmp_path):
    bad_colour = tmp_path / "bad.yaml"
    bad_colour.write_text(
        "pack: x\nroles:\n  - {handle: ok, display_name: OK}\n"
        "  - {handle: b, display_name: B, colour: red}\n"
    )
    with pytest.raises(CommandError, match="@b: Use a hex colour"):
        load(str(bad_colour))
    assert not Role.objects.filter(handle="ok").exists()  # all or nothing
    missing = tmp_path / "missing.yaml"
    missing.write_text(
        "pack: x\nroles:\n  - {handle: c, display_name: C}\n"
        "groups:\n  - {handle: g, members: [c, ghost]}\n"
    )
    with pytest.raises(CommandError, match="unknown roles: @ghost"):
        load(str(missing))
    with pytest.raises(CommandError, match="shipped packs are engineering-council, film-crew"):
        load("no-such-pack")
