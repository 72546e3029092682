"""Fan-out, answers-last, interrupt, auto-rounds and reruns on a real worker and the emulator."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.chat import livestate
from apps.chat.council import orchestration
from apps.chat.council.dispatch import QUEUED_GRACE_SECONDS
from apps.chat.council.posting import message_post
from apps.chat.council.replies import (
    replies_recover,
    reply_rerun,
    session_restart_in_flight,
    thread_interrupt,
)
from apps.chat.display.bubbles import render_thread_status
from apps.chat.models import Message, MessageStatus, Stage, Thread, Turn
from apps.chat.records.messages import allocate_seqs
from apps.chat.records.sessions import session_set_provider, session_set_roles
from apps.providers.emulator import Script
from apps.roles.models import Role
from config.celery import start_recovery, stop_recovery
from tests.conftest import wait_settled, wait_until, wait_worker_idle

pytestmark = pytest.mark.django_db(transaction=True)

FOUR = ["editorial_architect", "visual_architect", "sound_designer", "actor_agent"]


def role_of(request) -> str:
    """Which role an emulator request was made for (its final instruction names it)."""
    last = request.body["messages"][-1]["content"]
    text = last if isinstance(last, str) else last[-1].get("text", "")
    return text.split("You are @", 1)[1].split(" ", 1)[0]


def requests_by_role(emulator) -> dict[str, list]:
    found: dict[str, list] = {}
    for request in emulator.requests:
        found.setdefault(role_of(request), []).append(request)
    return found


def answer(handle: str, **options) -> Script:
    options.setdefault("ttft_ms", 150)
    options.setdefault("tokens_per_second", 60)
    text = options.pop("text", f"{handle} thinks the opening shot should be a slow push-in.")
    return Script(text=text, match=f"You are @{handle} ", provider="anthropic", **options)


@pytest.fixture
def council(anthropic_thread, settings):
    """The four creative roles and the director, and nobody else."""
    settings.PARLEY_FLUSH_INTERVAL_MS = 20
    session = anthropic_thread.session
    session_set_roles(
        session=session, roles=list(Role.objects.filter(handle__in=[*FOUR, "director"]))
    )
    return anthropic_thread


def test_all_fans_out_in_parallel_and_the_director_answers_last_seeing_everyone(
    alice, council, celery_worker, emulator
):
    # Slow enough (~2 s a call) that the staggered three start while the lead still streams,
    # even on a loaded two-core machine.
    emulator.script(
        *(answer(handle, tokens_per_second=8) for handle in FOUR),
        answer("director", text="I decide."),
    )
    posted = message_post(thread=council, author=alice, text="@all what opens the film?")
    assert [r.speaker for r in posted.replies] == [*FOUR, "director"]
    replies = wait_settled(posted.replies)
    assert [r.status for r in replies] == ["done"] * 5

    calls = requests_by_role(emulator)
    four = [calls[handle][0] for handle in FOUR]
    director = calls["director"][0]
    # The four overlap in time: each started before any of them ended.
    assert max(call.started for call in four) < min(call.ended for call in four)
    # The director started after the last of them, with all four answers whole in its request:
    # it was sent once they had ended. (The emulator's own end time is taken when its loop
    # comes back to the request, which on a loaded machine can be after the worker, having
    # read the last byte, has already sent the director's request.)
    assert director.started > max(call.started for call in four)
    sent = str(director.body["messages"])
    for handle in FOUR:
        assert f"{handle} thinks the opening shot should be a slow push-in." in sent
    # The four never saw each other's answers: their histories are identical.
    assert len({str(call.body["messages"][:-1]) for call in four}) == 1


@pytest.mark.parametrize("failing", ["editorial_architect", "sound_designer"])
def test_a_failing_role_does_not_block_the_director(
    alice, council, celery_worker, emulator, failing
):
    # The editorial architect leads the staggered start: its failure must release the rest.
    emulator.script(
        answer(failing, status=400, error_type="invalid_request_error"),
        *(answer(handle) for handle in FOUR if handle != failing),
        answer("director", text="Three of you answered; here is my call."),
    )
    posted = message_post(thread=council, author=alice, text="@all opening shot?")
    replies = {r.speaker: r for r in wait_settled(posted.replies)}
    assert replies[failing].status == MessageStatus.ERROR
    assert replies[failing].error
    assert all(replies[h].status == MessageStatus.DONE for h in FOUR if h != failing)
    assert replies["director"].status == MessageStatus.DONE
    assert replies["director"].text == "Three of you answered; here is my call."
    director_request = requests_by_role(emulator)["director"][0]
    assert "visual_architect thinks" in str(director_request.body["messages"])


def test_interrupt_stops_every_call_mid_stream_and_cancels_auto_rounds(
    alice, council, celery_worker, emulator
):
    session = council.session
    session.auto_rounds = 2
    session.save()
    long_text = "word " * 400
    emulator.script(*(answer(h, text=long_text, tokens_per_second=20) for h in FOUR))
    posted = message_post(thread=council, author=alice, text="@all take your time")
    parallel = [r for r in posted.replies if r.speaker in FOUR]
    wait_until(
        lambda: (
            all(len(m.text) > 10 for m in Message.objects.filter(pk__in=[r.pk for r in parallel]))
            or None
        ),
        timeout=15,
        message="the four never started streaming",
    )
    # The DB checkpoint lags; wait until the live tails are visibly growing in every call.
    wait_until(lambda: set(requests_by_role(emulator)) >= set(FOUR))
    thread_interrupt(thread=council)
    replies = wait_settled(posted.replies, timeout=5)
    by_speaker = {r.speaker: r for r in replies}
    for handle in FOUR:
        assert by_speaker[handle].status == MessageStatus.INTERRUPTED
        assert by_speaker[handle].text.startswith("word word")  # the partial text is kept
        assert len(by_speaker[handle].text) < len(long_text) // 2  # cut off mid-stream
    assert by_speaker["director"].status == MessageStatus.INTERRUPTED
    wait_until(lambda: all(r.closed_early for r in emulator.requests), timeout=3)
    assert "director" not in requests_by_role(emulator)
    wait_worker_idle()  # a wrongly scheduled auto-round would have been created by now
    assert Message.objects.filter(thread=council, stage=Stage.AUTO_ROUND).count() == 0
    assert Turn.objects.get(thread=council).rounds_stopped


def test_auto_rounds_follow_a_fan_out_round_robin_one_at_a_time_with_the_next_one_waiting(
    alice, council, celery_worker, emulator
):
    session = council.session
    session_set_roles(
        session=session, roles=list(Role.objects.filter(handle__in=["director", *FOUR[:2]]))
    )
    session.auto_rounds = 2
    session.save()
    emulator.script(
        *(Script(text="A short thought " * 6, tokens_per_second=80, provider="anthropic")
          for _ in range(9))
    )  # fmt: skip
    posted = message_post(thread=council, author=alice, text="@all go")
    turn = Turn.objects.get(thread=council)
    # While an auto-round reply streams, the next member's bubble already waits, and the
    # line above the composer says where the turn is.
    seen_waiting_next = False
    lines: list[tuple[int, str, str]] = []

    def rounds_done() -> bool:
        nonlocal seen_waiting_next
        autos = list(Message.objects.filter(turn=turn, stage=Stage.AUTO_ROUND).order_by("seq"))
        streaming = [m for m in autos if m.status == MessageStatus.STREAMING]
        waiting = [m for m in autos if m.status == MessageStatus.QUEUED and not m.dispatched_at]
        if streaming and waiting and not seen_waiting_next:
            seen_waiting_next = True
            html = str(render_thread_status(Thread.objects.get(pk=council.pk)))
            lines.append((len([m for m in autos if m.dispatched_at]), waiting[0].speaker, html))
        return len(autos) == 6 and all(m.status == MessageStatus.DONE for m in autos)

    wait_until(rounds_done, timeout=40)
    assert seen_waiting_next
    started, waiting_speaker, html = lines[0]
    assert f"Round {(started - 1) // 3 + 1} of 2 · next @{waiting_speaker}" in html
    auto = list(Message.objects.filter(turn=turn, stage=Stage.AUTO_ROUND).order_by("seq"))
    order = ["editorial_architect", "visual_architect", "director"]
    assert [m.speaker for m in auto] == order * 2
    everything = [*wait_settled(posted.replies), *auto]
    first_stage_end = max(m.finished_at for m in everything[:3])
    assert auto[0].started_at >= first_stage_end
    for earlier, later in itertools.pairwise(auto):
        assert later.started_at >= earlier.finished_at  # one at a time
    # The auto-round cue goes only to auto-round replies.
    cued = [r for r in emulator.requests if "This is an auto-round" in str(r.body["messages"])]
    assert len(cued) == 6
    # The last reply's task closes the rounds just after storing it.
    wait_until(lambda: Turn.objects.get(pk=turn.pk).stopped_because == "rounds", timeout=10)


def test_a_directed_message_starts_no_auto_rounds(alice, council, celery_worker, emulator):
    session = council.session
    session.auto_rounds = 3
    session.save()
    emulator.script(Script(text="Only me.", provider="anthropic"))
    posted = message_post(thread=council, author=alice, text="@visual_architect light it")
    (reply,) = wait_settled(posted.replies)
    assert reply.text == "Only me."
    wait_worker_idle()  # a wrongly scheduled auto-round would have been created by now
    assert not Message.objects.filter(thread=council, stage=Stage.AUTO_ROUND).exists()
    assert len(emulator.requests) == 1


def test_retry_reruns_only_the_failed_role_and_regenerate_keeps_the_old_text(
    alice, anthropic_thread, celery_worker, emulator
):
    emulator.script(
        Script(status=400, error_type="invalid_request_error", provider="anthropic"),
        Script(text="Second time lucky.", provider="anthropic"),
        Script(text="A fresh take.", provider="anthropic"),
    )
    posted = message_post(thread=anthropic_thread, author=alice, text="hello")
    (reply,) = wait_settled(posted.replies)
    assert reply.status == MessageStatus.ERROR
    reply_rerun(message=reply)
    (reply,) = wait_settled([reply])
    assert (reply.status, reply.text) == ("done", "Second time lucky.")
    assert reply.alternatives == []  # an error without text leaves nothing to keep
    reply_rerun(message=reply)
    (reply,) = wait_settled([reply])
    assert reply.text == "A fresh take."
    assert [alt["content"][0]["text"] for alt in reply.alternatives] == ["Second time lucky."]
    assert Message.objects.filter(thread=anthropic_thread).count() == 2  # same bubble, rerun


def test_a_reply_that_times_out_says_so_apart_from_other_failures(
    alice, anthropic_thread, celery_worker, emulator, settings
):
    from apps.chat.display.bubbles import render_bubbles, render_turn_finished

    settings.PARLEY_REPLY_TIMEOUT_SECONDS = 1
    emulator.script(Script(text="Too slow.", ttft_ms=3000, provider="anthropic"))
    posted = message_post(thread=anthropic_thread, author=alice, text="hello")
    (slow,) = wait_settled(posted.replies, timeout=15)
    assert (slow.status, slow.stop_reason, slow.timed_out) == ("error", "timeout", True)
    html = str(render_bubbles([slow]))
    assert ">timed out</span>" in html and "(timed out)" in html and "Timed out.</strong>" in html
    assert ">failed</span>" not in html
    assert "timed out" in str(render_turn_finished(anthropic_thread, user=alice))

    settings.PARLEY_REPLY_TIMEOUT_SECONDS = 120  # a provider's own error is a plain failure
    emulator.script(Script(status=400, error_type="invalid_request_error", provider="anthropic"))
    posted = message_post(thread=anthropic_thread, author=alice, text="again")
    (failed,) = wait_settled(posted.replies, timeout=15)
    assert (failed.status, failed.timed_out) == ("error", False)
    assert ">failed</span>" in str(render_bubbles([failed]))
    # Retry clears the ending: a rerun that succeeds is not marked.
    emulator.script(Script(text="In time.", provider="anthropic"))
    reply_rerun(message=slow)
    (slow,) = wait_settled([slow], timeout=15)
    assert (slow.status, slow.stop_reason, slow.timed_out) == ("done", "end", False)


def test_a_reply_that_starts_another_participants_turn_is_cut_there(
    alice, anthropic_thread, celery_worker, emulator
):
    rest = " ".join(["And the rain should be louder."] * 40)
    emulator.script(
        Script(
            text=f"[Assistant]: We go wide.\n\n[Sound Designer]: {rest}",
            tokens_per_second=80,
            provider="anthropic",
        )
    )
    posted = message_post(thread=anthropic_thread, author=alice, text="hello")
    (reply,) = wait_settled(posted.replies)
    assert (reply.status, reply.text) == ("done", "We go wide.")
    wait_until(lambda: emulator.requests[-1].closed_early, timeout=3)


def test_apply_now_restarts_a_streaming_reply_with_the_new_settings(
    alice, anthropic_thread, celery_worker, emulator
):
    emulator.script(
        Script(text="old " * 200, tokens_per_second=20, provider="anthropic"),
        Script(text="Restarted with the new model.", provider="anthropic"),
    )
    posted = message_post(thread=anthropic_thread, author=alice, text="hello")
    reply = posted.replies[0]
    wait_until(lambda: Message.objects.get(pk=reply.pk).text.startswith("old"), timeout=10)
    session = anthropic_thread.session
    session_set_provider(session=session, credential=session.credential, model="claude-haiku-4-5")
    session_restart_in_flight(session=session)
    wait_until(lambda: Message.objects.get(pk=reply.pk).alternatives, timeout=5)
    (reply,) = wait_settled([reply])
    assert (reply.status, reply.text, reply.model) == (
        "done", "Restarted with the new model.", "claude-haiku-4-5",
    )  # fmt: skip
    assert reply.alternatives[0]["content"][0]["text"].startswith("old old")
    # The emulator sees the first stream closed when its next write fails (a token later).
    wait_until(lambda: emulator.requests[0].closed_early, timeout=3)
    assert emulator.requests[1].body["model"] == "claude-haiku-4-5"


def stalled_reply(thread, alice) -> Message:
    """A reply as a worker that died mid-stream leaves it: streaming, partial text, no lease."""
    user_seq, reply_seq = allocate_seqs(thread, 2)
    Message.objects.create(
        thread=thread, seq=user_seq, speaker="user", author=alice,
        content=[{"type": "text", "text": "hello"}],
    )  # fmt: skip
    reply = Message.objects.create(
        thread=thread, seq=reply_seq, speaker="assistant", status=MessageStatus.STREAMING,
        content=[{"type": "text", "text": "half a "}], provider="demo", model="demo-1",
        dispatched_at=timezone.now() - timedelta(minutes=5), attempt=1,
    )  # fmt: skip
    # Its last checkpoint is as old: nobody has written it since.
    Message.objects.filter(pk=reply.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    return reply


def test_a_takeover_whose_worker_died_too_is_taken_over_as_quickly(alice, alice_thread, db):
    """The worker that received a recovered reply's task died before taking its lease: the
    next look, two lease renewals on, sends the task again — not a whole lease TTL later."""
    reply = stalled_reply(alice_thread, alice)
    renewals = 2 * livestate.LEASE_RENEW_SECONDS
    just_sent = timezone.now() - timedelta(seconds=renewals - 1)
    Message.objects.filter(pk=reply.pk).update(dispatched_at=just_sent)
    assert replies_recover() == []  # the new worker may still be about to take it
    a_while_ago = timezone.now() - timedelta(seconds=renewals + 0.5)
    assert renewals + 0.5 < livestate.LEASE_TTL_SECONDS
    Message.objects.filter(pk=reply.pk).update(dispatched_at=a_while_ago)
    assert replies_recover() == [reply.pk]


def test_a_reply_left_behind_by_a_dead_worker_is_recovered(
    alice, alice_thread, celery_worker, fast_demo
):
    reply = stalled_reply(alice_thread, alice)
    before = timezone.now()
    assert replies_recover() == [reply.pk]
    # Its dispatch time is renewed: the next look gives the new task a grace period.
    assert Message.objects.get(pk=reply.pk).dispatched_at >= before
    (reply,) = wait_settled([reply])
    assert reply.status == MessageStatus.DONE
    # Taken over with its text kept: the model was asked to go on from "half a ".
    assert reply.text.startswith("half a **Demo reply**")
    assert reply.attempt == 2


def test_the_worker_looks_again_periodically_for_replies_left_behind(
    alice, alice_thread, celery_worker, fast_demo, settings
):
    # As with a worker that dies while another keeps running: the reply is left behind after
    # every worker has started, so only a later look can find it.
    settings.PARLEY_RECOVERY_INTERVAL_SECONDS = 1
    start_recovery()
    try:
        reply = stalled_reply(alice_thread, alice)
        (reply,) = wait_settled([reply])
        assert reply.status == MessageStatus.DONE and reply.attempt == 2
    finally:
        stop_recovery()
    threads = [t for t in threading.enumerate() if t.name == "parley-recovery"]
    for sweeper in threads:
        sweeper.join(timeout=5)
    assert not any(t.is_alive() for t in threads)  # shutdown stops the sweeps


def test_a_reply_a_live_worker_holds_is_left_alone(alice, alice_thread, celery_worker, fast_demo):
    reply = stalled_reply(alice_thread, alice)
    client = livestate.sync_client()
    client.set(f"{livestate.PREFIX}:lease:{reply.pk}", "1", ex=30)
    assert replies_recover() == []
    wait_worker_idle(settled=False)  # nothing was sent: a takeover would have run by now
    assert Message.objects.get(pk=reply.pk).status == MessageStatus.STREAMING
    client.delete(f"{livestate.PREFIX}:lease:{reply.pk}")
    replies_recover()
    wait_settled([reply])


@contextlib.contextmanager
def redis_commands(client):
    """The commands Redis runs meanwhile, from every client (MONITOR), as lists of words."""
    seen: list[list[str]] = []
    ready, stop = threading.Event(), threading.Event()

    def watch() -> None:
        with client.monitor() as monitor:
            ready.set()
            while not stop.is_set():
                seen.append(monitor.next_command()["command"].split())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    ready.wait(5)
    try:
        yield seen
    finally:
        stop.set()
        client.ping()  # one more command, so the watcher wakes and ends


def test_a_rerun_queued_while_its_earlier_run_still_holds_the_lease_runs_once_it_lets_go(
    alice, alice_thread, celery_worker, fast_demo
):
    # Retry right after an error: the reply is queued again before the first run's task has
    # released its lease (it still publishes and advances the turn). The new task must wait.
    reply = stalled_reply(alice_thread, alice)
    Message.objects.filter(pk=reply.pk).update(status=MessageStatus.QUEUED, content=[])
    client = livestate.sync_client()
    lease = f"{livestate.PREFIX}:lease:{reply.pk}"
    client.set(lease, "earlier-run", ex=30)
    with redis_commands(client) as commands:
        orchestration.dispatch([Message.objects.get(pk=reply.pk)])
        # The new task asked for the lease (and was refused): it is waiting, not running.
        wait_until(lambda: any(c[:2] == ["SET", lease] and "NX" in c for c in commands))
    assert Message.objects.get(pk=reply.pk).status == MessageStatus.QUEUED
    client.delete(f"{livestate.PREFIX}:lease:{reply.pk}")
    (reply,) = wait_settled([reply])
    assert reply.status == MessageStatus.DONE and reply.text


def test_a_stalled_turn_starts_its_next_stage(alice, alice_thread, celery_worker, fast_demo):
    posted = message_post(thread=alice_thread, author=alice, text="@visual_architect @director go")
    director = posted.replies[1]
    wait_settled(posted.replies)
    # As if the worker died between settling the visual architect and starting the director.
    Message.objects.filter(pk=director.pk).update(
        status=MessageStatus.QUEUED, dispatched_at=None, content=[]
    )
    replies_recover()
    (director,) = wait_settled([director])
    assert director.status == MessageStatus.DONE and director.text


def test_a_lease_is_renewed_and_released_only_by_its_owner():
    async def scenario():
        redis, sync = livestate.async_client(), livestate.sync_client()
        try:
            assert await livestate.lease_acquire(redis, 424242, "run-a")
            assert not await livestate.lease_acquire(redis, 424242, "run-b")
            await livestate.lease_release(redis, 424242, "run-b")  # not b's to release
            assert livestate.leases_held([424242, 7]) == {424242}
            await redis.expire(f"{livestate.PREFIX}:lease:424242", 2)
            # The worker's heartbeat renews every lease it holds in one round trip.
            # Not b's to renew: b learns that another run owns the reply.
            assert livestate.leases_renew(sync, {424242: "run-b"}) == [424242]
            assert await redis.ttl(f"{livestate.PREFIX}:lease:424242") <= 2
            assert livestate.leases_renew(sync, {424242: "run-a", 7: "run-c"}) == []
            assert await redis.ttl(f"{livestate.PREFIX}:lease:424242") > 2
            # A lease that is simply gone (Redis restarted empty) is taken again by its stream.
            assert livestate.leases_held([7]) == {7}
            await livestate.lease_release(redis, 424242, "run-a")
            await livestate.lease_release(redis, 7, "run-c")
            assert livestate.leases_held([424242, 7]) == set()
        finally:
            await redis.aclose()
            sync.close()

    asyncio.run(scenario())


def test_the_workers_take_turns_looking_for_replies_left_behind():
    """One look per interval among all the workers: the first to ask makes it, the others
    skip it until the interval has (nearly) passed."""
    livestate.shared_sync_client().delete(f"{livestate.PREFIX}:recovery-sweep")
    assert livestate.sweep_claim(0.3)
    assert not livestate.sweep_claim(0.3)  # another worker, in the same interval
    time.sleep(0.3)
    assert livestate.sweep_claim(0.3)


def test_a_reply_whose_worker_keeps_dying_ends_as_an_error_with_its_text(
    alice, alice_thread, celery_worker, fast_demo, settings
):
    reply = stalled_reply(alice_thread, alice)
    Message.objects.filter(pk=reply.pk).update(attempt=settings.PARLEY_MAX_REPLY_ATTEMPTS)
    assert replies_recover() == [reply.pk]
    (reply,) = wait_settled([reply])
    assert reply.status == MessageStatus.ERROR  # no fourth paid call
    assert "Stopped after 3 attempts" in reply.error
    assert reply.text == "half a "


def test_a_live_reply_that_outlasts_its_lease_is_never_taken_over(
    alice, anthropic_thread, emulator, celery_worker, settings
):
    """The process's heartbeat keeps the lease: a model that says nothing for longer than
    the lease lasts (no checkpoint either) is not mistaken for a dead worker."""
    emulator.script(
        Script(text="Late, but alive.", ttft_ms=(livestate.LEASE_TTL_SECONDS + 3) * 1000)
    )
    settings.PARLEY_RECOVERY_INTERVAL_SECONDS = 1
    start_recovery()
    try:
        posted = message_post(
            thread=anthropic_thread, author=alice, text="@assistant take your time"
        )
        (reply,) = wait_settled(posted.replies, timeout=30)
    finally:
        stop_recovery()
    assert reply.status == MessageStatus.DONE and reply.text == "Late, but alive."
    assert reply.attempt == 1 and len(emulator.requests) == 1


def test_a_waiting_reply_is_enqueued_again_only_once_the_broker_has_had_it_long(
    alice, alice_thread, celery_worker, fast_demo
):
    reply = stalled_reply(alice_thread, alice)
    recently = timezone.now() - timedelta(seconds=livestate.LEASE_TTL_SECONDS + 5)
    Message.objects.filter(pk=reply.pk).update(
        status=MessageStatus.QUEUED, content=[], attempt=0, dispatched_at=recently
    )
    assert replies_recover() == []  # its task is most likely still queued behind others
    Message.objects.filter(pk=reply.pk).update(
        dispatched_at=timezone.now() - timedelta(seconds=QUEUED_GRACE_SECONDS + 1)
    )
    assert replies_recover() == [reply.pk]  # the broker lost it (Redis restarted empty)
    (reply,) = wait_settled([reply])
    assert reply.status == MessageStatus.DONE and reply.attempt == 1
