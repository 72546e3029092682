"""How the council converses, on a real worker and the emulator: the follow-up queue, Send now,
sequential turns, budgets, AI mentions, truncation and Continue, suggestions by any role."""

from __future__ import annotations

import itertools
import json

import pytest

from apps.chat.council.orchestration import queued_cancel, queued_edit
from apps.chat.council.posting import message_post
from apps.chat.council.prompting import LAST_CUE, SEQUENTIAL_CUE
from apps.chat.council.replies import queued_send_now, reply_continue
from apps.chat.display.bubbles import render_bubbles
from apps.chat.models import (
    Message,
    MessageKind,
    MessageStatus,
    QueuedMessage,
    Stage,
    Turn,
    TurnMode,
)
from apps.chat.records.sessions import session_set_roles
from apps.chat.records.threads import thread_create
from apps.providers.emulator import Script
from apps.roles.models import Role
from tests.conftest import wait_settled, wait_until, wait_worker_idle

pytestmark = pytest.mark.django_db(transaction=True)

FOUR = ["editorial_architect", "visual_architect", "sound_designer", "actor_agent"]


def answer(handle: str, text: str = "", **options) -> Script:
    options.setdefault("ttft_ms", 50)
    return Script(
        text=text or f"{handle} has a view.",
        match=f"You are @{handle} ",
        provider="anthropic",
        **options,
    )


def with_roles(thread, *handles, **settings):
    session = thread.session
    session_set_roles(session=session, roles=list(Role.objects.filter(handle__in=handles)))
    for key, value in settings.items():
        setattr(session, key, value)
    session.save()
    return thread


def body_of(request) -> str:
    return json.dumps(request.body, ensure_ascii=False)


def requests_for(emulator, handle: str) -> list:
    return [r for r in emulator.requests if f"You are @{handle} " in body_of(r)]


def post(thread, text: str):
    return message_post(thread=thread, author=thread.session.owner, text=text)


def test_a_follow_up_sent_during_a_fan_out_waits_and_sees_the_directors_answer(
    anthropic_thread, celery_worker, emulator
):
    thread = with_roles(anthropic_thread, *FOUR, "director")
    emulator.script(
        *(answer(handle, tokens_per_second=40) for handle in FOUR),
        answer(
            "director", "DIRECTOR-VERDICT: the harbour opens in darkness.", tokens_per_second=40
        ),
        answer("director", "Shorter: darkness first."),
    )
    fan_out = post(thread, "@all what opens the film?")
    follow_up = post(thread, "@director shorter, please")
    assert follow_up.user_message is None and follow_up.queued is not None
    assert QueuedMessage.objects.filter(thread=thread).count() == 1
    # Nothing of it runs while the turn does: no message, no request.
    first_director = wait_settled(fan_out.replies, timeout=30)[-1]
    assert first_director.text.startswith("DIRECTOR-VERDICT")
    turn = wait_until(
        lambda: Turn.objects.filter(thread=thread, user_message__content__0__text="@director "
                                    "shorter, please").first(), timeout=10)  # fmt: skip
    (second,) = wait_settled(list(turn.messages.all()))
    assert second.text == "Shorter: darkness first."
    assert second.started_at >= first_director.finished_at
    assert not QueuedMessage.objects.filter(thread=thread).exists()
    director_requests = requests_for(emulator, "director")
    assert len(director_requests) == 2
    assert "DIRECTOR-VERDICT" in body_of(director_requests[1])
    # The queued message took its place after the whole turn in the transcript.
    assert turn.user_message.seq > first_director.seq


def test_several_queued_messages_run_in_order_and_can_be_edited_or_cancelled(
    anthropic_thread, celery_worker, emulator
):
    thread = with_roles(anthropic_thread, "visual_architect")
    emulator.script(
        answer("visual_architect", "first " * 20, tokens_per_second=40),
        answer("visual_architect", "The second, edited."),
        answer("visual_architect", "The fourth."),
    )
    other = thread_create(session=thread.session)  # another thread is independent
    first = post(thread, "@visual_architect one")
    second = post(thread, "two")
    third = post(thread, "three")
    fourth = post(thread, "four")
    assert all(p.queued for p in (second, third, fourth))
    queued_edit(queued=second.queued, text="two, edited")
    queued_cancel(queued=third.queued)
    elsewhere = post(other, "@visual_architect meanwhile")
    assert elsewhere.user_message is not None  # not queued behind another thread
    wait_settled(first.replies, timeout=20)
    wait_until(lambda: Message.objects.filter(thread=thread, speaker="user").count() == 3,
               timeout=20)  # fmt: skip
    wait_until(lambda: not QueuedMessage.objects.filter(thread=thread).exists(), timeout=20)
    replies = wait_settled(list(Message.objects.filter(thread=thread).exclude(speaker="user")))
    users = Message.objects.filter(thread=thread, speaker="user").order_by("seq")
    assert [m.text for m in users] == ["@visual_architect one", "two, edited", "four"]
    for earlier, later in itertools.pairwise(replies):
        assert later.started_at >= earlier.finished_at


def test_send_now_stops_the_turn_keeps_its_text_and_runs_the_message(
    anthropic_thread, celery_worker, emulator
):
    thread = with_roles(anthropic_thread, "visual_architect", "sound_designer")
    emulator.script(
        answer("visual_architect", "long " * 400, tokens_per_second=30),
        answer("sound_designer", "Right away."),
    )
    running = post(thread, "@visual_architect take your time")
    later = post(thread, "@sound_designer can you go first?")
    wait_until(lambda: Message.objects.get(pk=running.replies[0].pk).text, timeout=10)
    queued_send_now(queued=later.queued)
    (stopped,) = wait_settled(running.replies)
    assert stopped.status == MessageStatus.INTERRUPTED and stopped.text.startswith("long")
    reply = wait_until(lambda: Message.objects.filter(thread=thread, speaker="sound_designer")
                       .first(), timeout=10)  # fmt: skip
    (reply,) = wait_settled([reply])
    assert reply.text == "Right away."
    assert not QueuedMessage.objects.filter(thread=thread).exists()


def test_sequential_mode_answers_one_at_a_time_from_the_start(
    anthropic_thread, celery_worker, emulator
):
    thread = with_roles(
        anthropic_thread, "editorial_architect", "visual_architect", "director",
        turn_mode=TurnMode.SEQUENTIAL, round_order=["visual_architect", "editorial_architect"],
    )  # fmt: skip
    emulator.script(
        answer("visual_architect", "VISUAL-FIRST: dawn light."),
        answer("editorial_architect", "EDITORIAL-SECOND: cut on the bell."),
        answer("director", "Decided."),
    )
    posted = post(thread, "@all how does it open?")
    assert [r.speaker for r in posted.replies] == [
        "visual_architect", "editorial_architect", "director",
    ]  # fmt: skip
    replies = wait_settled(posted.replies, timeout=30)
    for earlier, later in itertools.pairwise(replies):
        assert later.started_at >= earlier.finished_at
    second = body_of(requests_for(emulator, "editorial_architect")[0])
    assert "VISUAL-FIRST" in second and SEQUENTIAL_CUE in second
    assert SEQUENTIAL_CUE not in body_of(requests_for(emulator, "visual_architect")[0])
    last = body_of(requests_for(emulator, "director")[0])
    assert "VISUAL-FIRST" in last and "EDITORIAL-SECOND" in last and LAST_CUE in last


def test_the_answers_last_cue_only_when_others_answered(anthropic_thread, celery_worker, emulator):
    thread = with_roles(anthropic_thread, "visual_architect", "director")
    emulator.script(answer("director", "Alone."))
    (reply,) = wait_settled(post(thread, "@director alone?").replies)
    assert reply.text == "Alone."
    assert LAST_CUE not in body_of(emulator.requests[0])


def test_a_token_budget_stops_the_rounds_with_a_notice(anthropic_thread, celery_worker, emulator):
    thread = with_roles(
        anthropic_thread, "editorial_architect", "visual_architect",
        auto_rounds=3, turn_token_budget=250,
    )  # fmt: skip
    usage = {"input_tokens": 100, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    emulator.script(*(Script(text="ok.", provider="anthropic", usage=usage) for _ in range(8)))
    post(thread, "@all go")
    turn = Turn.objects.get(thread=thread)
    wait_until(lambda: Turn.objects.get(pk=turn.pk).stopped_because, timeout=20)
    turn.refresh_from_db()
    assert (turn.stopped_because, turn.rounds_stopped) == ("tokens", True)
    autos = wait_settled(list(Message.objects.filter(turn=turn, stage=Stage.AUTO_ROUND)))
    assert len(autos) == 1  # two replies of ~102 tokens left room for one more, which crossed 250
    notice = Message.objects.get(thread=thread, kind=MessageKind.NOTICE)
    assert "the token budget was reached" in notice.text
    wait_worker_idle()
    assert len(emulator.requests) == 3


def test_a_stop_phrase_ends_the_rounds_and_the_waiting_member_goes(
    anthropic_thread, celery_worker, emulator
):
    thread = with_roles(
        anthropic_thread, "editorial_architect", "visual_architect",
        auto_rounds=3, stop_phrase="we agree",
    )  # fmt: skip
    emulator.script(
        answer("editorial_architect", "Open on the bell."),
        answer("visual_architect", "Open on the light."),
        answer("editorial_architect", "Then WE AGREE: the bell in the light."),
        *(answer("visual_architect", "never said") for _ in range(3)),
    )
    post(thread, "@all go")
    turn = Turn.objects.get(thread=thread)
    wait_until(lambda: Turn.objects.get(pk=turn.pk).stopped_because == "phrase", timeout=20)
    autos = wait_settled(list(Message.objects.filter(turn=turn, stage=Stage.AUTO_ROUND)))
    assert [m.speaker for m in autos] == ["editorial_architect"]  # the waiting one was removed
    assert "the stop phrase was reached" in Message.objects.get(kind=MessageKind.NOTICE).text
    assert len(emulator.requests) == 3


def test_a_stop_phrase_in_any_first_round_reply_stops_the_rounds(
    anthropic_thread, celery_worker, emulator
):
    """The phrase comes in the fan-out's first reply to settle, not its last."""
    thread = with_roles(
        anthropic_thread, "editorial_architect", "visual_architect",
        auto_rounds=3, stop_phrase="we agree",
    )  # fmt: skip
    emulator.script(
        answer("editorial_architect", "We agree already."),
        answer("visual_architect", "Open on the light, slowly.", ttft_ms=800),
        *(answer(handle, "never said") for handle in ["editorial_architect", "visual_architect"]),
    )
    post(thread, "@all go")
    turn = Turn.objects.get(thread=thread)
    wait_until(lambda: Turn.objects.get(pk=turn.pk).stopped_because, timeout=20)
    assert Turn.objects.get(pk=turn.pk).stopped_because == "phrase"
    wait_worker_idle()
    assert not Message.objects.filter(turn=turn, stage=Stage.AUTO_ROUND).exists()
    assert "@editorial_architect said" in Message.objects.get(kind=MessageKind.NOTICE).text
    assert len(emulator.requests) == 2


def test_an_ai_mention_brings_in_that_role_within_the_budget(
    anthropic_thread, celery_worker, emulator
):
    thread = with_roles(
        anthropic_thread, "editorial_architect", "visual_architect",
        auto_rounds=1, ai_mentions=True,
    )  # fmt: skip
    emulator.script(
        answer("editorial_architect", "Ask @visual_architect about the light."),
        answer("visual_architect", "Back to you, @editorial_architect, and @ghost."),
        answer("editorial_architect", "And @visual_architect once more?"),
        answer("visual_architect", "never reached"),
    )
    posted = post(thread, "@editorial_architect what opens it?")
    turn = Turn.objects.get(thread=thread)
    wait_until(lambda: Turn.objects.get(pk=turn.pk).stopped_because == "rounds", timeout=20)
    wait_settled(posted.replies)
    autos = wait_settled(list(Message.objects.filter(turn=turn, stage=Stage.AUTO_ROUND)))
    # One round of two members is the budget: two mentioned replies, never a third.
    assert [m.speaker for m in autos] == ["visual_architect", "editorial_architect"]
    assert len(emulator.requests) == 3


def test_ai_mentions_off_leaves_a_directed_turn_alone(anthropic_thread, celery_worker, emulator):
    thread = with_roles(anthropic_thread, "editorial_architect", "visual_architect", auto_rounds=2)
    emulator.script(answer("editorial_architect", "Ask @visual_architect."))
    wait_settled(post(thread, "@editorial_architect hi").replies)
    wait_worker_idle()
    assert not Message.objects.filter(thread=thread, stage=Stage.AUTO_ROUND).exists()


def test_a_reply_cut_off_three_times_is_marked_and_continue_extends_it(
    anthropic_thread, celery_worker, emulator
):
    thread = with_roles(anthropic_thread, "visual_architect")
    emulator.script(
        *(Script(text=f"Part {n}. ", stop="max_tokens", provider="anthropic") for n in range(4)),
        Script(text="The end.", provider="anthropic"),
    )
    (reply,) = wait_settled(post(thread, "@visual_architect tell it all").replies)
    assert (reply.status, reply.stop_reason, reply.continuations) == ("done", "max_tokens", 3)
    assert reply.cut_off
    html = str(render_bubbles([reply]))
    assert "cut off" in html and ">Continue</button>" in html
    reply_continue(message=reply)
    (reply,) = wait_settled([reply])
    assert reply.text == "Part 0. Part 1. Part 2. Part 3. The end."
    assert (reply.status, reply.stop_reason, reply.cut_off) == ("done", "end", False)
    assert "Part 3." in body_of(emulator.requests[-1])  # it went on from its own words
    assert "cut off" not in str(render_bubbles([reply]))


def test_a_length_limit_inside_a_tool_call_is_continued(anthropic_thread, celery_worker, emulator):
    thread = with_roles(anthropic_thread, "visual_architect")
    call = {"name": "list_roles", "arguments": {}}
    emulator.script(
        Script(text="", tool_calls=[call], stop="max_tokens", provider="anthropic"),
        Script(text="", tool_calls=[call], provider="anthropic"),
        Script(text="Two roles.", provider="anthropic"),
    )
    (reply,) = wait_settled(post(thread, "@visual_architect who is here?").replies)
    assert (reply.text, reply.status, reply.continuations) == ("Two roles.", "done", 1)
    limits = [request.body["max_tokens"] for request in emulator.requests]
    assert limits[1] == 2 * limits[0]  # the cut-off round again, with room to finish the call
    assert [p["name"] for p in reply.content if p["type"] == "tool_call"] == ["list_roles"]


def test_a_creative_role_may_suggest_a_route_and_it_becomes_a_button(
    anthropic_thread, celery_worker, emulator
):
    thread = with_roles(anthropic_thread, "visual_architect", "sound_designer")
    assert not Role.objects.get(handle="visual_architect").can_write
    suggestion = {"handle": "sound_designer", "message": "What hum under the harbour?"}
    emulator.script(
        Script(text="Sound should say.", provider="anthropic",
               tool_calls=[{"name": "suggest_route", "arguments": suggestion}]),
        Script(text=" I asked for a button.", provider="anthropic"),
    )  # fmt: skip
    (reply,) = wait_settled(post(thread, "@visual_architect and the sound?").replies)
    result = next(p for p in reply.content if p["type"] == "tool_result")
    assert not result["is_error"]
    html = str(render_bubbles([reply]))
    assert "Ask @sound_designer" in html
    assert 'data-prefill="@sound_designer What hum under the harbour?"' in html


def test_a_time_limit_stops_the_rounds(anthropic_thread, celery_worker, emulator):
    thread = with_roles(
        anthropic_thread, "editorial_architect", "visual_architect",
        auto_rounds=3, turn_time_limit=1,
    )  # fmt: skip
    emulator.script(*(Script(text="slow " * 12, tokens_per_second=10, provider="anthropic")
                      for _ in range(6)))  # fmt: skip
    post(thread, "@all go")
    turn = Turn.objects.get(thread=thread)
    wait_until(lambda: Turn.objects.get(pk=turn.pk).stopped_because == "time", timeout=20)
    assert not Message.objects.filter(turn=turn, stage=Stage.AUTO_ROUND).exists()
    assert "the time limit was reached" in Message.objects.get(kind=MessageKind.NOTICE).text


def test_switching_provider_mid_thread_keeps_the_tool_history(
    alice, anthropic_thread, celery_worker, emulator
):
    """OpenAI → Anthropic → Gemini, a tool call in each turn: every later request carries the
    earlier calls and their whole results."""
    from apps.chat.records.sessions import session_set_provider
    from apps.providers.services import credential_save

    thread = with_roles(anthropic_thread, "assistant")
    credentials = {
        kind: credential_save(
            owner=alice,
            name=kind,
            provider=kind,
            api_key="k-test-0000",
            base_url=emulator.url + ("/v1" if kind == "openai" else ""),
        )
        for kind in ("openai", "anthropic", "gemini")
    }
    for turn, kind in enumerate(("openai", "anthropic", "gemini")):
        session_set_provider(session=thread.session, credential=credentials[kind], model="")
        emulator.script(
            Script(text="", provider=kind,
                   tool_calls=[{"name": "thread_info", "arguments": {}}]),
            Script(text=f"Answer {turn} via {kind}.", provider=kind),
        )  # fmt: skip
        thread.refresh_from_db()
        (reply,) = wait_settled(post(thread, f"question {turn}").replies, timeout=30)
        assert (reply.provider, reply.text) == (kind, f"Answer {turn} via {kind}.")
        assert any(p["type"] == "tool_result" for p in reply.content)
    last = body_of(emulator.requests[-2])  # Gemini's first call of the third turn
    assert "Answer 0 via openai." in last and "Answer 1 via anthropic." in last
    assert last.count("called thread_info") == 2
    assert last.count("tool result of thread_info: Thread:") == 2  # whole, labelled results
