"""Faults with the real parts: a worker killed mid-stream, Redis restarted empty, Stop while a
worker is dead, two web and two worker processes. A provider stand-in streams numbered words,
so a lost or repeated word shows."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time

import aiohttp
import pytest
from channels.db import database_sync_to_async

from apps.chat.models import Message, MessageStatus
from apps.chat.records.sessions import session_create, session_set_provider
from apps.providers.emulator import Script
from apps.providers.services import credential_save
from tests.chat.test_live_streaming import session_cookie
from tests.conftest import wait_until
from tests.deadlines import scaled
from tests.topology import CSRF, FollowedTab, Topology, interrupt, post, press

pytestmark = pytest.mark.django_db(transaction=True)
RECEIVED = re.compile(r"run_reply\[[0-9a-f-]+\] received")

WORDS = "".join(f"w{n} " for n in range(1, 501)).rstrip()  # ~12 s at 40 tokens a second


def numbered_words_thread(owner, emulator, *, tokens_per_second: int = 40):
    """A thread whose assistant is an OpenAI-compatible upstream streaming numbered words, and
    continuing them exactly when asked to go on from a cut-off answer."""
    emulator.script(
        Script(text=WORDS, tokens_per_second=tokens_per_second, provider="openai"),
        Script(text=WORDS, tokens_per_second=tokens_per_second, resumes=True, provider="openai"),
    )
    credential = credential_save(
        owner=owner, name="Numbered words", provider="openai_compatible",
        base_url=f"{emulator.url}/v1", api_key="sk-test-numbered-words-key-0000",
    )  # fmt: skip
    session = session_create(owner=owner, name="Faults")
    session_set_provider(session=session, credential=credential, model="gpt-4.1")
    return session.active_thread


@pytest.fixture
def numbered_thread(alice, roles, emulator):
    return numbered_words_thread(alice, emulator)


def cookie_for(user) -> str:
    return session_cookie(user).decode()


def reply_of(thread) -> Message:
    return wait_until(lambda: Message.objects.filter(thread=thread, speaker="assistant").first())


def one_worker_and_web(topology: Topology, user, thread):
    """A worker and a web process, ready; the user's session cookie and a tab on the thread."""
    worker = topology.start_worker("worker")
    web = topology.start_web("web")
    topology.wait_worker_ready(worker)
    cookie = cookie_for(user)
    return worker, web, cookie, FollowedTab(web, str(thread.public_id), cookie)


def off_the_loop(function, *args, **kwargs):
    """Await a blocking database call in a pool thread that closes its connection afterwards
    (an executor thread that dies holding one takes it from the pool for good)."""
    return database_sync_to_async(function, thread_sensitive=False)(*args, **kwargs)


def run_with_reply(thread, scenario):
    """Run `scenario(reply)` (an async function given a callable that returns the reply's row
    once it exists) and return its result with the reply."""
    found: dict[str, Message] = {}

    async def run():
        watcher = asyncio.ensure_future(off_the_loop(reply_of, thread))
        await asyncio.sleep(0)
        task = asyncio.ensure_future(scenario(lambda: found.get("reply")))
        found["reply"] = await watcher
        return await task

    result = asyncio.run(run())
    return result, found["reply"]


def status_on(tab, reply: Message | None) -> str | None:
    return tab.status(str(reply.public_id)) if reply is not None else None


def words_shown(tab: FollowedTab, reply: Message | None) -> int:
    bubble = tab.tab.bubbles.get(str(reply.public_id)) if reply is not None else None
    return len(bubble.text.split()) if bubble else 0


def assert_never_lost_or_repeated(tab: FollowedTab, reply: Message) -> None:
    """Everything the tab showed of the reply, at every moment, was a prefix of the answer."""
    shown = tab.seen_texts.get(str(reply.public_id), [])
    assert shown, "the tab never showed the reply streaming"
    for text in shown:
        assert WORDS.startswith(text), f"the tab showed text that is not the answer: {text[-80:]!r}"
    lengths = [len(text) for text in shown]
    assert lengths == sorted(lengths), "text shown on the tab disappeared"


async def until_shown(tab: FollowedTab, reply_ref, words: int, topology: Topology) -> None:
    """Wait until the tab shows `words` words of the reply (failing loudly after a while)."""
    deadline = time.monotonic() + scaled(30)
    while words_shown(tab, reply_ref()) < words:
        assert time.monotonic() < deadline, (
            f"the tab showed {words_shown(tab, reply_ref())} words; frames: "
            f"{tab.tab.frames[-3:]}\n{topology.logs()}"
        )
        await asyncio.sleep(0.05)


def streaming_worker(topology: Topology):
    """The worker that received the reply's task (both list the task in their banner)."""
    return next(c for c in topology.children if RECEIVED.search(c.output()))


@pytest.mark.slow
@pytest.mark.heavy
def test_a_killed_worker_s_reply_is_taken_over_and_goes_on_without_a_lost_or_repeated_word(
    alice, numbered_thread, emulator, topology
):
    """Two web and two worker processes: post through one web, follow through the other, kill
    the worker that streams; the other takes over from what the tab was shown."""
    workers = [topology.start_worker("worker-a"), topology.start_worker("worker-b")]
    web_a, web_b = topology.start_web("web-a"), topology.start_web("web-b")
    for worker in workers:
        topology.wait_worker_ready(worker)
    cookie = cookie_for(alice)
    thread_id = str(numbered_thread.public_id)
    tab = FollowedTab(web_b, thread_id, cookie)

    async def scenario(current) -> tuple[float, float]:
        following = asyncio.ensure_future(tab.follow(lambda t: status_on(t, current()) == "done"))
        await post(web_a, thread_id, cookie, "@assistant count for me")
        await until_shown(tab, current, 60, topology)
        victim = streaming_worker(topology)
        victim.process.send_signal(signal.SIGKILL)
        killed_at, before = time.monotonic(), words_shown(tab, current())
        while words_shown(tab, current()) <= before:
            await asyncio.sleep(0.05)
        taken_over = time.monotonic() - killed_at
        await asyncio.wait_for(following, 60)
        return taken_over, before

    (taken_over, shown_before), reply = run_with_reply(numbered_thread, scenario)
    final = Message.objects.get(pk=reply.pk)
    assert final.status == MessageStatus.DONE, topology.logs()
    assert final.text == WORDS  # every word once, in order
    assert final.attempt == 2
    assert_never_lost_or_repeated(tab, final)
    # The second request asked the model to go on from at least what the tab had shown.
    resumed = emulator.requests[-1].body["messages"]
    assert resumed[-2]["role"] == "assistant"
    assert len(resumed[-2]["content"].split()) >= shown_before
    print(f"taken over in {taken_over:.1f} s")  # a figure for bench/chaos.py, not a test


@pytest.mark.slow
@pytest.mark.heavy
def test_a_lone_worker_killed_outright_is_forked_again_and_takes_its_reply_over(
    alice, numbered_thread, emulator, topology
):
    """The worker as the Procfile starts it (`python -m config.worker`), alone: its Celery
    worker SIGKILLed mid-stream is forked again from the loaded process, and the new one takes
    the reply over once the lease lapses; SIGTERM then stops the supervisor and its worker."""
    supervisor = topology.start_worker("worker", supervised=True)
    web = topology.start_web("web")
    topology.wait_worker_ready(supervisor)
    cookie = cookie_for(alice)
    thread_id = str(numbered_thread.public_id)
    tab = FollowedTab(web, thread_id, cookie)
    first = topology.forked_worker(supervisor)
    assert first is not None, supervisor.output()

    async def scenario(current) -> float:
        following = asyncio.ensure_future(tab.follow(lambda t: status_on(t, current()) == "done"))
        await post(web, thread_id, cookie, "@assistant count for me")
        await until_shown(tab, current, 60, topology)
        os.kill(first, signal.SIGKILL)
        killed_at, before = time.monotonic(), words_shown(tab, current())
        while words_shown(tab, current()) <= before:
            await asyncio.sleep(0.05)
        taken_over = time.monotonic() - killed_at
        await asyncio.wait_for(following, 60)
        return taken_over

    taken_over, reply = run_with_reply(numbered_thread, scenario)
    final = Message.objects.get(pk=reply.pk)
    assert (final.status, final.text, final.attempt) == (MessageStatus.DONE, WORDS, 2)
    assert_never_lost_or_repeated(tab, final)
    second = topology.forked_worker(supervisor)
    assert second not in (None, first)
    assert "The worker stopped unexpectedly (exit code -9)" in supervisor.output()
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.process.wait(timeout=scaled(30)) == 0, supervisor.output()
    assert wait_until(lambda: not os.path.exists(f"/proc/{second}"), timeout=30)
    assert "Traceback" not in supervisor.output()
    print(f"taken over in {taken_over:.1f} s")  # a figure for bench/chaos.py, not a test


def test_a_takeover_whose_model_starts_again_shows_no_word_twice(
    alice, numbered_thread, emulator, topology
):
    """The model asked to go on starts again from the beginning instead (many do): what it
    repeats of the shown text is dropped before any tab sees it, and the trim is recorded."""
    emulator.reset()
    emulator.script(
        Script(text=WORDS, tokens_per_second=40, provider="openai"),
        Script(text=WORDS, tokens_per_second=200, provider="openai"),  # restarts, ignoring
    )
    workers = [topology.start_worker("worker-a"), topology.start_worker("worker-b")]
    web = topology.start_web("web")
    for worker in workers:
        topology.wait_worker_ready(worker)
    cookie = cookie_for(alice)
    thread_id = str(numbered_thread.public_id)
    tab = FollowedTab(web, thread_id, cookie)

    async def scenario(current) -> None:
        following = asyncio.ensure_future(tab.follow(lambda t: status_on(t, current()) == "done"))
        await post(web, thread_id, cookie, "@assistant count for me")
        await until_shown(tab, current, 40, topology)
        streaming_worker(topology).process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(following, 60)

    _, reply = run_with_reply(numbered_thread, scenario)
    final = Message.objects.get(pk=reply.pk)
    assert (final.status, final.attempt) == (MessageStatus.DONE, 2), topology.logs()
    assert final.text == WORDS
    assert_never_lost_or_repeated(tab, final)
    assert final.usage["repeat_trimmed_chars"] > len("w1 w2 w3 " * 10)


def test_stop_while_the_worker_is_dead_settles_at_once_keeps_the_text_and_retry_runs_it(
    alice, numbered_thread, emulator, topology
):
    worker, web, cookie, tab = one_worker_and_web(topology, alice, numbered_thread)
    thread_id = str(numbered_thread.public_id)

    async def scenario(current) -> float:
        following = asyncio.ensure_future(
            tab.follow(lambda t: status_on(t, current()) == "interrupted")
        )
        await post(web, thread_id, cookie, "@assistant count for me")
        await until_shown(tab, current, 60, topology)
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait()
        took = await interrupt(web, thread_id, cookie)
        await asyncio.wait_for(following, 10)
        return took

    took, reply = run_with_reply(numbered_thread, scenario)
    stopped = Message.objects.get(pk=reply.pk)
    print(f"Stop took {took:.2f} s")  # its speed is bench/chaos.py's; here: it stopped
    assert stopped.status == MessageStatus.INTERRUPTED
    shown = tab.seen_texts[str(reply.public_id)][-1]
    assert stopped.text and WORDS.startswith(stopped.text)
    assert len(stopped.text) >= len(shown.rstrip())  # nothing the tab showed was dropped

    # A worker that starts later and sweeps for unfinished replies leaves it as it is (it
    # sweeps before it says "ready.").
    topology.wait_worker_ready(topology.start_worker("worker-later"))
    assert Message.objects.get(pk=reply.pk).text == stopped.text
    assert Message.objects.get(pk=reply.pk).status == MessageStatus.INTERRUPTED

    # Retry runs it again, once: Stop's flag belonged to the run it stopped.
    emulator.reset()
    emulator.script(Script(text="w1 w2 w3 again", provider="openai"))
    asyncio.run(press(web, thread_id, cookie, f"/m/{reply.public_id}/rerun/"))
    retried = wait_until(
        lambda: (m := Message.objects.get(pk=reply.pk)).status in ("done", "interrupted", "error")
        and m, timeout=30,
    )  # fmt: skip
    assert (retried.status, retried.text) == ("done", "w1 w2 w3 again"), topology.logs()


def test_redis_restarting_empty_mid_stream_loses_no_word_and_the_worker_carries_on(
    alice, numbered_thread, topology
):
    worker, web, cookie, tab = one_worker_and_web(topology, alice, numbered_thread)
    thread_id = str(numbered_thread.public_id)

    async def scenario(current) -> None:
        following = asyncio.ensure_future(tab.follow(lambda t: status_on(t, current()) == "done"))
        await post(web, thread_id, cookie, "@assistant count for me")
        await until_shown(tab, current, 60, topology)
        topology.kill_redis()
        await asyncio.sleep(2)
        topology.start_redis_again()
        try:
            await asyncio.wait_for(following, 60)
        except TimeoutError:
            stored = await off_the_loop(Message.objects.get, pk=current().pk)
            raise AssertionError(
                f"reply {stored.status} with {len(stored.text.split())} words; tab closes "
                f"{tab.closes}, reconnects {tab.reconnects}\n{topology.logs()}"
            ) from None

    _, reply = run_with_reply(numbered_thread, scenario)
    assert worker.alive(), worker.output()[-3000:]
    final = Message.objects.get(pk=reply.pk)
    assert final.status == MessageStatus.DONE
    assert final.text == WORDS
    assert final.attempt == 1  # the same run carried on; nothing was taken over
    assert_never_lost_or_repeated(tab, final)
    # The tab kept its socket: the bus's numbering jumped after the restart, so it resynced.
    assert tab.reconnects == 0, tab.closes


def test_a_message_posted_while_redis_is_down_is_kept_and_answered_when_it_returns(
    alice, numbered_thread, topology, emulator
):
    worker, web, cookie, _ = one_worker_and_web(topology, alice, numbered_thread)
    thread_id = str(numbered_thread.public_id)
    emulator.reset()
    emulator.script(Script(text="Back again.", provider="openai"))

    async def scenario() -> None:
        async with aiohttp.ClientSession(headers={"Cookie": cookie}) as http:
            async with http.get(f"{web.url}/t/{thread_id}/") as page:
                token = CSRF.search(await page.text())[1]
                csrf_cookie = page.cookies["csrftoken"].value
            topology.kill_redis()
            async with http.post(
                f"{web.url}/t/{thread_id}/messages/",
                data={"text": "@assistant are you there?", "csrfmiddlewaretoken": token},
                headers={"Cookie": f"{cookie}; csrftoken={csrf_cookie}", "HX-Request": "true",
                         "Referer": web.url},
            ) as response:  # fmt: skip
                # Saved, and answered once Redis is back: never a 500, never a message lost.
                assert response.status == 200, await response.text()
        await asyncio.sleep(1)
        topology.start_redis_again()

    asyncio.run(scenario())
    user = wait_until(
        lambda: Message.objects.filter(thread=numbered_thread, speaker="user").first()
    )
    assert user.text == "@assistant are you there?"
    reply = wait_until(
        lambda: Message.objects.filter(
            thread=numbered_thread, speaker="assistant", status=MessageStatus.DONE
        ).first(),
        timeout=40,
        message="the reply was not answered after Redis returned",
    )
    assert reply.text == "Back again."
    assert worker.alive()
