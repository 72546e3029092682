"""Shared rooms, the records: who is in a session besides its owner, and invite links."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from apps.chat.access import room_access, rooms_for_user
from apps.chat.models import Membership, RoomInvite
from apps.chat.records.rooms import (
    invite_accept,
    invite_create,
    invite_revoke,
    member_add,
    member_remove,
    member_set_budget,
    member_set_role,
)
from apps.chat.records.sessions import session_create

pytestmark = pytest.mark.django_db


def test_the_owner_adds_people_by_username_as_member_or_viewer(alice_session, alice, bob, charlie):
    member = member_add(session=alice_session, by=alice, username="@Bob")
    member_add(session=alice_session, by=alice, username="charlie", role="viewer")
    assert (member.user, member.role, member.added_by) == (bob, "member", alice)
    assert room_access(user=bob, session=alice_session) == "member"
    assert room_access(user=charlie, session=alice_session) == "viewer"
    assert room_access(user=alice, session=alice_session) == "owner"


@pytest.mark.parametrize(
    ("username", "role", "message"),
    [
        ("nobody", "member", "Nobody here is called “nobody”"),
        ("alice", "member", "You own this session"),
        ("bob", "admin", "“admin” is not a room role"),
    ],
)
def test_adding_someone_says_clearly_what_is_wrong(
    alice_session, alice, bob, username, role, message
):
    with pytest.raises(ValidationError, match=message):
        member_add(session=alice_session, by=alice, username=username, role=role)
    assert not Membership.objects.exists()


def test_someone_already_in_the_room_is_not_added_twice(alice_session, alice, bob):
    member_add(session=alice_session, by=alice, username="bob")
    with pytest.raises(ValidationError, match="bob is already in the room"):
        member_add(session=alice_session, by=alice, username="bob", role="viewer")
    assert Membership.objects.get().role == "member"


def test_only_the_owner_changes_who_is_in_the_room(alice_session, alice, bob, charlie):
    bobs = member_add(session=alice_session, by=alice, username="bob")
    with pytest.raises(PermissionDenied):
        member_add(session=alice_session, by=bob, username="charlie")
    with pytest.raises(PermissionDenied):
        member_set_role(membership=bobs, by=bob, role="viewer")
    with pytest.raises(PermissionDenied):
        member_set_budget(membership=bobs, by=bob, tokens=10**9)
    with pytest.raises(PermissionDenied):
        invite_create(session=alice_session, by=bob)
    charlies = member_add(session=alice_session, by=alice, username="charlie")
    with pytest.raises(PermissionDenied):
        member_remove(membership=charlies, by=bob)
    member_set_role(membership=bobs, by=alice, role="viewer")
    member_set_budget(membership=bobs, by=alice, tokens=50_000)
    bobs.refresh_from_db()
    assert (bobs.role, bobs.daily_token_budget) == ("viewer", 50_000)


def test_the_owner_removes_someone_and_a_member_leaves(alice_session, alice, bob, charlie):
    bobs = member_add(session=alice_session, by=alice, username="bob")
    charlies = member_add(session=alice_session, by=alice, username="charlie")
    member_remove(membership=bobs, by=alice)
    member_remove(membership=charlies, by=charlie)  # leaving
    assert room_access(user=bob, session=alice_session) is None
    assert room_access(user=charlie, session=alice_session) is None


def test_the_sessions_of_a_person_are_their_own_and_the_rooms_they_are_in(
    alice_session, alice, bob, charlie
):
    bobs_own = session_create(owner=bob, name="Bob's own")
    member_add(session=alice_session, by=alice, username="bob", role="viewer")
    member_add(session=alice_session, by=alice, username="charlie")
    rooms = {session.name: session.access for session in rooms_for_user(user=bob)}
    assert rooms == {"Bob's own": "owner", alice_session.name: "viewer"}
    # Alice's room is listed once for her, however many people are in it.
    assert [s.access for s in rooms_for_user(user=alice) if s.pk == alice_session.pk] == ["owner"]
    assert bobs_own.pk not in {s.pk for s in rooms_for_user(user=charlie)}


def test_an_invite_link_works_once_for_one_person(alice_session, alice, bob, charlie):
    invite, token = invite_create(session=alice_session, by=alice, role="viewer")
    assert token not in invite.token_hash  # only its hash is kept
    membership = invite_accept(token=token, user=bob)
    assert (membership.user, membership.role) == (bob, "viewer")
    assert invite_accept(token=token, user=bob) == membership  # the same person again: fine
    with pytest.raises(ValidationError, match="does not work"):
        invite_accept(token=token, user=charlie)
    assert room_access(user=charlie, session=alice_session) is None
    member_remove(membership=membership, by=alice)
    with pytest.raises(ValidationError, match="does not work"):  # removed: not back by it
        invite_accept(token=token, user=bob)
    assert room_access(user=bob, session=alice_session) is None


def test_an_expired_revoked_or_made_up_link_lets_nobody_in(alice_session, alice, bob):
    expired, expired_token = invite_create(session=alice_session, by=alice)
    RoomInvite.objects.filter(pk=expired.pk).update(expires_at=timezone.now())
    revoked, revoked_token = invite_create(session=alice_session, by=alice)
    invite_revoke(invite=revoked, by=alice)
    for token in (expired_token, revoked_token, "made-up", ""):
        with pytest.raises(ValidationError, match="does not work"):
            invite_accept(token=token, user=bob)
    assert not Membership.objects.exists()


def test_an_invite_lasts_between_five_minutes_and_thirty_days(alice_session, alice):
    for lifetime in (timedelta(minutes=1), timedelta(days=31)):
        with pytest.raises(ValidationError, match="from 5 minutes to 30 days"):
            invite_create(session=alice_session, by=alice, lifetime=lifetime)


def test_the_owner_cannot_join_their_own_room_by_link(alice_session, alice):
    _, token = invite_create(session=alice_session, by=alice)
    with pytest.raises(ValidationError, match="You own this session"):
        invite_accept(token=token, user=alice)


def test_bad_input_to_the_people_dialog_is_a_clear_4xx(alice, bob, alice_session, make_user):
    """NUL in a username, a path that is not a person, budgets too big or not numbers, and a
    member whose username has a slash (made outside the sign-up form): never a 500."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    slashed = get_user_model().objects.create_user(username="ops/team", password="x")
    member_add(session=alice_session, by=alice, username="bob")
    member_add(session=alice_session, by=alice, username="ops/team")
    owner = Client()
    owner.force_login(alice)
    s = alice_session.public_id
    panel = owner.get(reverse("chat:room_panel", kwargs={"session": s}))
    assert panel.status_code == 200 and "ops/team" in panel.content.decode()
    added = owner.post(reverse("chat:room_add", kwargs={"session": s}), {"username": "a\x00b"})
    assert added.status_code == 422 and "Nobody here is called" in added.content.decode()
    base = f"/s/{s}/room/people/"
    assert owner.post(base + "a%00b/", {"role": "viewer"}).status_code == 404
    assert owner.post(base + "a%00b/remove/").status_code == 404
    update = reverse("chat:room_update", kwargs={"session": s, "person": bob.pk})
    for budget in ("99999999999999999999", "²", "-5"):
        answer = owner.post(update, {"daily_token_budget": budget})
        assert answer.status_code == 422, budget
    assert owner.post(update, {"daily_token_budget": "5,000"}).status_code == 200
    remove = reverse("chat:room_remove", kwargs={"session": s, "person": slashed.pk})
    assert owner.post(remove, HTTP_HX_REQUEST="true").status_code == 200
    assert not Membership.objects.filter(user=slashed).exists()
