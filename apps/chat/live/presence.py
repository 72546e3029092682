"""Who is in a shared room now, and on which thread; who is typing. Kept in Redis and pushed
to the room's tabs — never a database write: a tab's presence is a sorted-set entry whose
score is its last heartbeat, so a tab that closes goes at once (its socket says so) and one
whose process died goes within `PRESENCE_TTL_SECONDS`."""

from __future__ import annotations

import time
import uuid

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string

from apps.chat import livebus, livestate
from apps.chat.display import events
from apps.chat.models import Session, Thread, person_hue, person_name

PRESENCE_BEAT_SECONDS = 5.0
PRESENCE_TTL_SECONDS = 15.0
TYPING_MIN_INTERVAL_SECONDS = 1.5


def _key(session_public_id: str) -> str:
    return f"{livestate.PREFIX}:presence:{uuid.UUID(session_public_id).hex}"


def entry(user_id: int, thread_public_id: str, tab: str) -> str:
    return f"{user_id}|{uuid.UUID(thread_public_id).hex}|{tab}"


async def arrive(redis, session_public_id: str, member: str) -> None:
    """A tab is on the room (again: its heartbeat). Announces it when it is new."""
    added = await redis.zadd(_key(session_public_id), {member: time.time()})
    await redis.expire(_key(session_public_id), int(PRESENCE_TTL_SECONDS * 4))
    if added:
        await announce(redis, session_public_id)


async def beat(redis, session_public_id: str, member: str) -> None:
    """A tab's heartbeat: it is still here; tabs whose process died meanwhile go."""
    key = _key(session_public_id)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zadd(key, {member: time.time()})
        pipe.zremrangebyscore(key, "-inf", time.time() - PRESENCE_TTL_SECONDS)
        pipe.expire(key, int(PRESENCE_TTL_SECONDS * 4))
        _, gone, _ = await pipe.execute()
    if gone:
        await announce(redis, session_public_id)


async def leave(redis, session_public_id: str, member: str) -> None:
    if await redis.zrem(_key(session_public_id), member):
        await announce(redis, session_public_id)


async def here(redis, session_public_id: str) -> list[tuple[int, str]]:
    """(user id, thread public id hex) of every tab on the room now."""
    members = await redis.zrangebyscore(
        _key(session_public_id), time.time() - PRESENCE_TTL_SECONDS, "+inf"
    )
    found = []
    for member in members:
        user_id, thread_hex, _ = (member.decode() if isinstance(member, bytes) else member).split(
            "|"
        )
        found.append((int(user_id), thread_hex))
    return found


@database_sync_to_async
def render(session_public_id: str, tabs: list[tuple[int, str]]) -> str:
    """The room's presence line: each person here once, with the threads they have open."""
    users = {u.pk: u for u in get_user_model().objects.filter(pk__in={uid for uid, _ in tabs})}
    hexes = {thread_hex for _, thread_hex in tabs}
    threads = {
        thread.public_id.hex: thread
        for thread in Thread.objects.filter(
            session__public_id=session_public_id,
            public_id__in=[uuid.UUID(h) for h in hexes],
        )
    }
    people: dict[int, dict] = {}
    for user_id, thread_hex in tabs:
        user = users.get(user_id)
        if user is None:
            continue
        person = people.setdefault(
            user_id,
            {"id": user_id, "name": person_name(user), "hue": person_hue(user), "threads": []},
        )
        thread = threads.get(thread_hex)
        if thread is not None and thread not in person["threads"]:
            person["threads"].append(thread)
    return render_to_string("chat/_presence.html", {"people": list(people.values())})


async def announce(redis, session_public_id: str) -> None:
    html = await render(session_public_id, await here(redis, session_public_id))
    await livebus.publish(
        redis, [(events.session_group(session_public_id), events.html_event(html))]
    )


async def typing(redis, thread_public_id: str, user) -> None:
    """Someone is typing in a thread: its tabs show it for a few seconds."""
    event = {"type": "room.typing", "user": user.pk, "name": person_name(user)}
    await livebus.publish(redis, [(events.thread_group(thread_public_id), event)])


@database_sync_to_async
def shared_room(session_id: int) -> bool:
    """Only a room with people besides its owner keeps presence and typing."""
    return Session.objects.filter(pk=session_id, memberships__isnull=False).exists()
